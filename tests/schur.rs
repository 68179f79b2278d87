//! Levenberg–Marquardt with CG on the Schur complement (`LevenbergMarquardt::eliminate`):
//! one step against a dense f64 solve of the damped normal equations (the same system as
//! without elimination), convergence to a known minimum in fewer CG iterations, held rows
//! of both blocks, bit-identical reruns and the CPU device, and the problems that cannot
//! be eliminated.

mod common;

use common::{Rng, device, solve_dense};
use gradfuse::{
    BlockId, Buffer, Device, Error, Index, LevenbergMarquardt, Loss, Problem, Source,
    differentiable,
};

/// A bundle-adjustment-like residual: a "camera" of 3 words sees a "point" of 2 words.
#[differentiable]
pub fn seen(c: [f32; 3], p: [f32; 2], #[constant] o: [f32; 2]) -> [f32; 2] {
    [
        c[0] * p[0] + c[1] * p[1] - o[0],
        c[2] * p[0] * p[1] + c[0] - o[1],
    ]
}

/// Two points of one block in one residual: their rows are coupled.
#[differentiable]
pub fn between(p: [f32; 2], q: [f32; 2]) -> f32 {
    p[0] - q[0] + p[1] - q[1]
}

/// Cameras, points, and which camera sees which point, with noise-free observations of a
/// known truth.
struct Scene {
    cameras: Vec<[f32; 3]>,
    points: Vec<[f32; 2]>,
    camera_of: Vec<u32>,
    point_of: Vec<u32>,
    observed: Vec<[f32; 2]>,
}

impl Scene {
    fn new(cameras: usize, points: usize, seed: u64) -> Scene {
        let mut rng = Rng(seed);
        let c: Vec<[f32; 3]> = (0..cameras)
            .map(|_| {
                [
                    rng.uniform(0.5, 1.5),
                    rng.uniform(-1.0, 1.0),
                    rng.uniform(0.5, 1.5),
                ]
            })
            .collect();
        let p: Vec<[f32; 2]> = (0..points)
            .map(|_| [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)])
            .collect();
        let (mut camera_of, mut point_of, mut observed) = (Vec::new(), Vec::new(), Vec::new());
        for (j, pj) in p.iter().enumerate() {
            for k in 0..3 {
                let i = (j * 7 + k * 3 + (j % 2)) % cameras;
                camera_of.push(i as u32);
                point_of.push(j as u32);
                let r = residual([0.0; 2], c[i].map(f64::from), pj.map(f64::from));
                observed.push(r.map(|x| x as f32));
            }
        }
        Scene {
            cameras: c,
            points: p,
            camera_of,
            point_of,
            observed,
        }
    }

    /// A start off the truth.
    fn start(&self, seed: u64) -> (Vec<[f32; 3]>, Vec<[f32; 2]>) {
        let mut rng = Rng(seed);
        let mut off = |x: f32| x + rng.uniform(-0.1, 0.1);
        (
            self.cameras.iter().map(|c| c.map(&mut off)).collect(),
            self.points.iter().map(|p| p.map(&mut off)).collect(),
        )
    }

    /// The gradient `Jᵀr` and `JᵀJ` in f64 at a start (cameras' words first).
    fn normal_equations(&self, c: &[[f32; 3]], p: &[[f32; 2]]) -> (Vec<f64>, Vec<Vec<f64>>) {
        let n = 3 * c.len() + 2 * p.len();
        let (mut g, mut a) = (vec![0.0; n], vec![vec![0.0; n]; n]);
        for ((&i, &j), o) in self
            .camera_of
            .iter()
            .zip(&self.point_of)
            .zip(&self.observed)
        {
            let (ci, pj) = (c[i as usize].map(f64::from), p[j as usize].map(f64::from));
            let r = residual(o.map(f64::from), ci, pj);
            // Hand derivatives of `seen`, rows by residual word.
            let rows = [
                [(0, pj[0]), (1, pj[1]), (2, 0.0), (3, ci[0]), (4, ci[1])],
                [
                    (0, 1.0),
                    (1, 0.0),
                    (2, pj[0] * pj[1]),
                    (3, ci[2] * pj[1]),
                    (4, ci[2] * pj[0]),
                ],
            ];
            let column = |k: usize| {
                if k < 3 {
                    3 * i as usize + k
                } else {
                    3 * c.len() + 2 * j as usize + k - 3
                }
            };
            for (row, rw) in rows.iter().zip(r) {
                for &(k, jk) in row {
                    g[column(k)] += jk * rw;
                    for &(l, jl) in row {
                        a[column(k)][column(l)] += jk * jl;
                    }
                }
            }
        }
        (g, a)
    }
}

/// `seen` in f64.
fn residual(o: [f64; 2], c: [f64; 3], p: [f64; 2]) -> [f64; 2] {
    [
        c[0] * p[0] + c[1] * p[1] - o[0],
        c[2] * p[0] * p[1] + c[0] - o[1],
    ]
}

/// A scene's buffers on a device.
struct SceneBuffers {
    cameras: Buffer<[f32; 3]>,
    points: Buffer<[f32; 2]>,
    observed: Buffer<[f32; 2]>,
    camera_of: Index,
    point_of: Index,
}

impl SceneBuffers {
    fn new(d: &Device, s: &Scene, start: &(Vec<[f32; 3]>, Vec<[f32; 2]>)) -> SceneBuffers {
        SceneBuffers {
            cameras: d.buffer(&start.0).unwrap(),
            points: d.buffer(&start.1).unwrap(),
            observed: d.buffer(&s.observed).unwrap(),
            camera_of: d.index(&s.camera_of, s.cameras.len()).unwrap(),
            point_of: d.index(&s.point_of, s.points.len()).unwrap(),
        }
    }

    /// The problem, its camera and point blocks.
    fn problem<'b>(&'b self, d: &'b Device) -> (Problem<'b>, BlockId, BlockId) {
        let mut p = Problem::new(d);
        let cameras = p.add_block(&self.cameras).unwrap();
        let points = p.add_block(&self.points).unwrap();
        let sources = seen::Sources {
            c: Source::Gather(&self.cameras, &self.camera_of),
            p: Source::Gather(&self.points, &self.point_of),
            o: Source::Each(&self.observed),
        };
        p.add_term(seen::kernel(d), sources, Loss::Squared).unwrap();
        (p, cameras, points)
    }
}

fn bits<const N: usize>(v: &[[f32; N]]) -> Vec<u32> {
    v.iter().flatten().map(|x| x.to_bits()).collect()
}

#[test]
fn one_step_on_the_schur_complement_matches_a_dense_solve() {
    let scene = Scene::new(4, 30, 1);
    let start = scene.start(2);
    let lambda = 0.05f32;
    let (g, mut a) = scene.normal_equations(&start.0, &start.1);
    for (k, row) in a.iter_mut().enumerate() {
        row[k] += f64::from(lambda) * row[k].clamp(1e-6, 1e32);
    }
    let delta = solve_dense(a, g.iter().map(|x| -x).collect());
    let scale = delta.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for d in [device(), &Device::cpu()] {
        for eliminate in [false, true] {
            let b = SceneBuffers::new(d, &scene, &start);
            let (problem, _, points) = b.problem(d);
            let options = LevenbergMarquardt {
                max_iterations: 1,
                initial_lambda: lambda,
                cg_tolerance: 1e-5,
                max_cg_iterations: 200,
                eliminate: eliminate.then_some(points),
                ..LevenbergMarquardt::default()
            };
            let summary = options.solve(&problem).unwrap();
            assert!(summary.iterations[0].accepted, "{}", d.describe());
            let cams = d.read(&b.cameras).unwrap();
            let pts = d.read(&b.points).unwrap();
            let got = cams
                .iter()
                .zip(&start.0)
                .flat_map(|(x, s)| (0..3).map(move |w| f64::from(x[w]) - f64::from(s[w])))
                .chain(
                    pts.iter()
                        .zip(&start.1)
                        .flat_map(|(x, s)| (0..2).map(move |w| f64::from(x[w]) - f64::from(s[w]))),
                );
            for (k, (step, want)) in got.zip(&delta).enumerate() {
                assert!(
                    (step - want).abs() <= 2e-3 * scale,
                    "{}, eliminating: {eliminate}: unknown {k}: step {step} vs dense {want}",
                    d.describe()
                );
            }
        }
    }
}

#[test]
fn the_schur_complement_converges_in_fewer_cg_iterations() {
    let scene = Scene::new(6, 200, 3);
    let mut start = scene.start(4);
    // The scene is known up to a gauge: one camera and one point are held, at the truth.
    start.0[0] = scene.cameras[0];
    start.1[0] = scene.points[0];
    let solve = |eliminate: bool| {
        let d = device();
        let b = SceneBuffers::new(d, &scene, &start);
        let (mut problem, cameras, points) = b.problem(d);
        problem.hold_rows(cameras, &[0]).unwrap();
        problem.hold_rows(points, &[0]).unwrap();
        // CG to a tight tolerance, checked often: its iterations count what each system
        // needs.
        let options = LevenbergMarquardt {
            max_iterations: 30,
            cg_tolerance: 1e-4,
            cg_iterations_per_check: 2,
            eliminate: eliminate.then_some(points),
            ..LevenbergMarquardt::default()
        };
        let summary = options.solve(&problem).unwrap();
        let (c, p) = (d.read(&b.cameras).unwrap(), d.read(&b.points).unwrap());
        (summary, c, p)
    };
    let (plain, _, _) = solve(false);
    let (schur, c, p) = solve(true);
    assert!(schur.final_cost <= 1e-9 * schur.initial_cost, "{schur}");
    assert!(plain.final_cost <= 1e-9 * plain.initial_cost, "{plain}");
    assert!(
        schur.cg_iterations() < plain.cg_iterations(),
        "Schur {} CG iterations, plain {}",
        schur.cg_iterations(),
        plain.cg_iterations()
    );
    assert!(format!("{schur}").contains("Schur complement of block 1"));
    // Held rows keep their bits.
    assert_eq!(bits(&c[..1]), bits(&start.0[..1]));
    assert_eq!(bits(&p[..1]), bits(&start.1[..1]));
}

#[test]
fn schur_reruns_are_bit_identical_and_the_devices_agree() {
    let scene = Scene::new(5, 60, 5);
    let start = scene.start(6);
    let run = |d: &Device| {
        let b = SceneBuffers::new(d, &scene, &start);
        let (problem, _, points) = b.problem(d);
        let options = LevenbergMarquardt {
            max_iterations: 4,
            cost_tolerance: 0.0,
            eliminate: Some(points),
            ..LevenbergMarquardt::default()
        };
        options.solve(&problem).unwrap();
        (d.read(&b.cameras).unwrap(), d.read(&b.points).unwrap())
    };
    let (c1, p1) = run(device());
    let (c2, p2) = run(device());
    assert_eq!((bits(&c1), bits(&p1)), (bits(&c2), bits(&p2)));
    let (c3, p3) = run(&Device::cpu());
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4);
    assert!(
        close(c1.as_flattened(), c3.as_flattened()),
        "{c1:?} vs {c3:?}"
    );
    assert!(
        close(p1.as_flattened(), p3.as_flattened()),
        "{p1:?} vs {p3:?}"
    );
}

#[test]
fn blocks_that_cannot_be_eliminated_are_errors() {
    let d = device();
    let scene = Scene::new(3, 10, 7);
    let start = scene.start(8);
    let b = SceneBuffers::new(d, &scene, &start);
    let (left, right): (Vec<u32>, Vec<u32>) = (0..9).map(|j| (j, j + 1)).unzip();
    let (left, right) = (d.index(&left, 10).unwrap(), d.index(&right, 10).unwrap());
    let (mut problem, _, points) = b.problem(d);
    let sources = between::Sources {
        p: Source::Gather(&b.points, &left),
        q: Source::Gather(&b.points, &right),
    };
    problem
        .add_term(between::kernel(d), sources, Loss::Squared)
        .unwrap();
    let options = LevenbergMarquardt {
        eliminate: Some(points),
        ..LevenbergMarquardt::default()
    };
    let before = d.read(&b.points).unwrap();
    match options.solve(&problem) {
        Err(Error::Unsupported(m)) => assert!(m.contains("reads two rows"), "{m}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert_eq!(
        bits(&d.read(&b.points).unwrap()),
        bits(&before),
        "nothing ran"
    );

    // A block id of another problem, past this one's blocks.
    let foreign = {
        let mut p = Problem::new(d);
        p.add_block(&b.cameras).unwrap();
        p.add_block(&b.points).unwrap()
    };
    let mut one_block = Problem::new(d);
    one_block.add_block(&b.points).unwrap();
    let sources = between::Sources {
        p: Source::Gather(&b.points, &left),
        q: Source::Gather(&b.points, &right),
    };
    one_block
        .add_term(between::kernel(d), sources, Loss::Squared)
        .unwrap();
    let options = LevenbergMarquardt {
        eliminate: Some(foreign),
        ..LevenbergMarquardt::default()
    };
    match options.solve(&one_block) {
        Err(Error::Unsupported(m)) => assert!(m.contains("not a block of this problem"), "{m}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}
