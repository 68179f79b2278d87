//! Bundle-adjustment problems in the BAL format (grail.cs.washington.edu/projects/bal): a
//! reader of its text files, and synthetic scenes with known truth.
#![allow(dead_code)]

use gradfuse::{BlockId, Buffer, Device, Index, Loss, Problem, Source, differentiable};
use std::path::Path;

/// A bundle-adjustment problem: Snavely cameras (angle-axis rotation, translation, focal
/// length, k1, k2), points, and observations (camera, point, pixel).
#[derive(Clone, Debug)]
pub struct Bal {
    pub cameras: Vec<[f32; 9]>,
    pub points: Vec<[f32; 3]>,
    pub observed: Vec<[f32; 2]>,
    pub camera_of: Vec<u32>,
    pub point_of: Vec<u32>,
}

impl Bal {
    /// Reads a BAL text file: counts, observations, cameras (9 numbers), points (3).
    pub fn read(path: &Path) -> Result<Bal, Box<dyn std::error::Error>> {
        let text = std::fs::read_to_string(path)?;
        let mut words = text.split_ascii_whitespace();
        let mut next = |what: &str| -> Result<f64, Box<dyn std::error::Error>> {
            let w = words
                .next()
                .ok_or_else(|| format!("{}: ends before {what}", path.display()))?;
            Ok(w.parse::<f64>()
                .map_err(|e| format!("{}: {what} {w:?}: {e}", path.display()))?)
        };
        let cameras = next("the camera count")? as usize;
        let points = next("the point count")? as usize;
        let observations = next("the observation count")? as usize;
        let mut bal = Bal {
            cameras: Vec::with_capacity(cameras),
            points: Vec::with_capacity(points),
            observed: Vec::with_capacity(observations),
            camera_of: Vec::with_capacity(observations),
            point_of: Vec::with_capacity(observations),
        };
        for _ in 0..observations {
            let (c, p) = (next("a camera index")?, next("a point index")?);
            if c < 0.0 || c as usize >= cameras || p < 0.0 || p as usize >= points {
                return Err(
                    format!("{}: observation of camera {c}, point {p}", path.display()).into(),
                );
            }
            bal.camera_of.push(c as u32);
            bal.point_of.push(p as u32);
            bal.observed
                .push([next("a pixel")? as f32, next("a pixel")? as f32]);
        }
        for _ in 0..cameras {
            let mut c = [0.0f32; 9];
            for w in &mut c {
                *w = next("a camera parameter")? as f32;
            }
            bal.cameras.push(c);
        }
        for _ in 0..points {
            let mut p = [0.0f32; 3];
            for w in &mut p {
                *w = next("a point coordinate")? as f32;
            }
            bal.points.push(p);
        }
        Ok(bal)
    }

    /// A synthetic scene: `cameras` cameras at distance 5 from a cloud of `points` points in
    /// the unit cube, all looking at its centre; each point seen by `per_point` cameras,
    /// with Gaussian pixel noise of `noise`. Returns the perturbed start (camera 0 and point
    /// 0 left at the truth, the gauge) and the truth, with the same observations.
    pub fn synthetic(
        cameras: usize,
        points: usize,
        per_point: usize,
        noise: f64,
        seed: u64,
    ) -> (Bal, Bal) {
        let mut rng = Rng(seed);
        let truth_cameras: Vec<[f64; 9]> = (0..cameras)
            .map(|_| {
                let axis = [rng.normal(), rng.normal(), rng.normal()];
                let length = (axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]).sqrt();
                let angle = 0.3 + 2.0 * rng.uniform();
                let w = axis.map(|a| a / length * angle);
                // t = −5 e_z: the origin is 5 in front of every camera (down its −z axis),
                // whatever its rotation, so the cameras surround the cloud looking at it.
                [
                    w[0],
                    w[1],
                    w[2],
                    0.0,
                    0.0,
                    -5.0,
                    500.0 + 100.0 * rng.uniform(),
                    -0.05,
                    0.01,
                ]
            })
            .collect();
        let truth_points: Vec<[f64; 3]> = (0..points)
            .map(|_| {
                [
                    rng.uniform() * 2.0 - 1.0,
                    rng.uniform() * 2.0 - 1.0,
                    rng.uniform() * 2.0 - 1.0,
                ]
            })
            .collect();
        let (mut observed, mut camera_of, mut point_of) = (Vec::new(), Vec::new(), Vec::new());
        for (p, point) in truth_points.iter().enumerate() {
            // `per_point` distinct cameras: from a random first one, in equal steps.
            let first = rng.below(cameras);
            for k in 0..per_point.min(cameras) {
                let c = (first + k * (cameras / per_point.min(cameras)).max(1)) % cameras;
                let [u, v] = project(&truth_cameras[c], point);
                observed.push([
                    (u + noise * rng.normal()) as f32,
                    (v + noise * rng.normal()) as f32,
                ]);
                camera_of.push(c as u32);
                point_of.push(p as u32);
            }
        }
        let to32 = |v: &[f64]| -> Vec<f32> { v.iter().map(|&x| x as f32).collect() };
        let truth = Bal {
            cameras: truth_cameras
                .iter()
                .map(|c| to32(c).try_into().unwrap_or([0.0; 9]))
                .collect(),
            points: truth_points
                .iter()
                .map(|p| to32(p).try_into().unwrap_or([0.0; 3]))
                .collect(),
            observed,
            camera_of,
            point_of,
        };
        let mut start = truth.clone();
        for c in start.cameras.iter_mut().skip(1) {
            for w in &mut c[..3] {
                *w += (0.02 * rng.normal()) as f32;
            }
            for w in &mut c[3..6] {
                *w += (0.05 * rng.normal()) as f32;
            }
            c[6] *= (1.0 + 0.02 * rng.normal()) as f32;
        }
        for p in start.points.iter_mut().skip(1) {
            for w in p.iter_mut() {
                *w += (0.05 * rng.normal()) as f32;
            }
        }
        (start, truth)
    }
}

/// The reprojection error of `point` in `camera` against the observed pixel (BAL's camera
/// model: `P = R(ω) X + t`, `p = −P.xy / P.z`, `f (1 + k1 |p|² + k2 |p|⁴) p`).
#[differentiable]
pub fn reprojection(camera: [f32; 9], point: [f32; 3], #[constant] observed: [f32; 2]) -> [f32; 2] {
    let theta2 = camera[0] * camera[0] + camera[1] * camera[1] + camera[2] * camera[2];
    let mut p = [0.0; 3];
    if theta2 > 1e-12 {
        // Rodrigues: X cos θ + (k × X) sin θ + k (k · X)(1 − cos θ), k the unit axis.
        let theta = theta2.sqrt();
        let c = theta.cos();
        let s = theta.sin();
        let k = [camera[0] / theta, camera[1] / theta, camera[2] / theta];
        let kx = k[0] * point[0] + k[1] * point[1] + k[2] * point[2];
        let cross = [
            k[1] * point[2] - k[2] * point[1],
            k[2] * point[0] - k[0] * point[2],
            k[0] * point[1] - k[1] * point[0],
        ];
        for i in 0..3 {
            p[i] = point[i] * c + cross[i] * s + k[i] * kx * (1.0 - c);
        }
    } else {
        // Near the identity, to first order: X + ω × X.
        p[0] = point[0] + camera[1] * point[2] - camera[2] * point[1];
        p[1] = point[1] + camera[2] * point[0] - camera[0] * point[2];
        p[2] = point[2] + camera[0] * point[1] - camera[1] * point[0];
    }
    let x = -(p[0] + camera[3]) / (p[2] + camera[5]);
    let y = -(p[1] + camera[4]) / (p[2] + camera[5]);
    let r2 = x * x + y * y;
    let d = camera[6] * (1.0 + r2 * (camera[7] + camera[8] * r2));
    [d * x - observed[0], d * y - observed[1]]
}

/// A BAL problem's cameras, points and observations on a device.
pub struct BalBuffers {
    pub cameras: Buffer<[f32; 9]>,
    pub points: Buffer<[f32; 3]>,
    observed: Buffer<[f32; 2]>,
    camera_of: Index,
    point_of: Index,
}

impl BalBuffers {
    pub fn new(device: &Device, bal: &Bal) -> Result<BalBuffers, gradfuse::Error> {
        Ok(BalBuffers {
            cameras: device.buffer(&bal.cameras)?,
            points: device.buffer(&bal.points)?,
            observed: device.buffer(&bal.observed)?,
            camera_of: device.index(&bal.camera_of, bal.cameras.len())?,
            point_of: device.index(&bal.point_of, bal.points.len())?,
        })
    }

    /// The problem: one reprojection residual per observation (`gauge`: camera 0 and
    /// point 0 held), and its points' block, the one a Schur complement eliminates.
    pub fn problem<'b>(
        &'b self,
        device: &'b Device,
        loss: Loss,
        gauge: bool,
    ) -> Result<(Problem<'b>, BlockId), gradfuse::Error> {
        let mut problem = Problem::new(device);
        let camera_block = problem.add_block(&self.cameras)?;
        let point_block = problem.add_block(&self.points)?;
        if gauge {
            problem.hold_rows(camera_block, &[0])?;
            problem.hold_rows(point_block, &[0])?;
        }
        let sources = reprojection::Sources {
            camera: Source::Gather(&self.cameras, &self.camera_of),
            point: Source::Gather(&self.points, &self.point_of),
            observed: Source::Each(&self.observed),
        };
        problem.add_term(reprojection::kernel(device), sources, loss)?;
        Ok((problem, point_block))
    }
}

/// The pixel where camera `c` sees point `x` (BAL's model, in f64).
pub fn project(c: &[f64; 9], x: &[f64; 3]) -> [f64; 2] {
    let w = [c[0], c[1], c[2]];
    let theta = (w[0] * w[0] + w[1] * w[1] + w[2] * w[2]).sqrt();
    let k = w.map(|a| a / theta);
    let kx = k[0] * x[0] + k[1] * x[1] + k[2] * x[2];
    let cross = [
        k[1] * x[2] - k[2] * x[1],
        k[2] * x[0] - k[0] * x[2],
        k[0] * x[1] - k[1] * x[0],
    ];
    let p: [f64; 3] = std::array::from_fn(|i| {
        x[i] * theta.cos() + cross[i] * theta.sin() + k[i] * kx * (1.0 - theta.cos()) + c[3 + i]
    });
    let (u, v) = (-p[0] / p[2], -p[1] / p[2]);
    let r2 = u * u + v * v;
    let d = c[6] * (1.0 + r2 * (c[7] + c[8] * r2));
    [d * u, d * v]
}

/// SplitMix64, with uniform and normal draws.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Box–Muller.
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform().max(1e-300), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}
