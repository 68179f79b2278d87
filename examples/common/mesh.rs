//! Meshes the examples (and the sparse least-squares bench) share: the icosphere, its
//! edges, and the mesh deformation problem of the `mesh` example.
#![allow(dead_code)]

use gradfuse::{Buffer, Device, Index, Loss, Problem, Source, differentiable};
use std::collections::HashMap;

/// An icosphere: the icosahedron's faces subdivided `levels` times, on the unit sphere.
pub fn icosphere(levels: u32) -> (Vec<[f32; 3]>, Vec<[u32; 3]>) {
    let t = (1.0 + 5f32.sqrt()) / 2.0;
    let mut v: Vec<[f32; 3]> = [
        [-1.0, t, 0.0],
        [1.0, t, 0.0],
        [-1.0, -t, 0.0],
        [1.0, -t, 0.0],
        [0.0, -1.0, t],
        [0.0, 1.0, t],
        [0.0, -1.0, -t],
        [0.0, 1.0, -t],
        [t, 0.0, -1.0],
        [t, 0.0, 1.0],
        [-t, 0.0, -1.0],
        [-t, 0.0, 1.0],
    ]
    .to_vec();
    let mut faces: Vec<[u32; 3]> = vec![
        [0, 11, 5],
        [0, 5, 1],
        [0, 1, 7],
        [0, 7, 10],
        [0, 10, 11],
        [1, 5, 9],
        [5, 11, 4],
        [11, 10, 2],
        [10, 7, 6],
        [7, 1, 8],
        [3, 9, 4],
        [3, 4, 2],
        [3, 2, 6],
        [3, 6, 8],
        [3, 8, 9],
        [4, 9, 5],
        [2, 4, 11],
        [6, 2, 10],
        [8, 6, 7],
        [9, 8, 1],
    ];
    for _ in 0..levels {
        let mut mid: HashMap<(u32, u32), u32> = HashMap::new();
        let mut split = |a: u32, b: u32, v: &mut Vec<[f32; 3]>| {
            *mid.entry((a.min(b), a.max(b))).or_insert_with(|| {
                let (pa, pb) = (v[a as usize], v[b as usize]);
                v.push([0, 1, 2].map(|i| (pa[i] + pb[i]) / 2.0));
                (v.len() - 1) as u32
            })
        };
        let mut next = Vec::with_capacity(faces.len() * 4);
        for [a, b, c] in faces {
            let (ab, bc, ca) = (
                split(a, b, &mut v),
                split(b, c, &mut v),
                split(c, a, &mut v),
            );
            next.extend([[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]);
        }
        faces = next;
    }
    for p in &mut v {
        let r = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
        *p = p.map(|x| x / r);
    }
    (v, faces)
}

/// Each edge of the faces once: its two vertex indices.
pub fn edges(faces: &[[u32; 3]]) -> (Vec<u32>, Vec<u32>) {
    let mut seen = std::collections::BTreeSet::new();
    for &[a, b, c] in faces {
        for (x, y) in [(a, b), (b, c), (c, a)] {
            seen.insert((x.min(y), x.max(y)));
        }
    }
    seen.into_iter().unzip()
}

/// Each edge once with the vertices opposite it in its two faces: `(p, q, a, b)`.
pub fn edges_with_wings(faces: &[[u32; 3]]) -> Vec<[u32; 4]> {
    let mut opposite: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
    for &[a, b, c] in faces {
        for (x, y, o) in [(a, b, c), (b, c, a), (c, a, b)] {
            opposite.entry((x.min(y), x.max(y))).or_default().push(o);
        }
    }
    let mut wings: Vec<[u32; 4]> = opposite
        .into_iter()
        .filter(|(_, o)| o.len() == 2)
        .map(|((p, q), o)| [p, q, o[0], o[1]])
        .collect();
    wings.sort_unstable();
    wings
}

/// Writes a mesh as a Wavefront OBJ file.
pub fn write_obj(
    path: &std::path::Path,
    vertices: &[[f32; 3]],
    faces: &[[u32; 3]],
) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    for v in vertices {
        writeln!(f, "v {} {} {}", v[0], v[1], v[2])?;
    }
    for t in faces {
        writeln!(f, "f {} {} {}", t[0] + 1, t[1] + 1, t[2] + 1)?;
    }
    f.flush()
}

/// The length of the edge from `p` to `q` against the target's.
#[differentiable]
pub fn edge_length(p: [f32; 3], q: [f32; 3], #[constant] target: f32) -> f32 {
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    let dz = q[2] - p[2];
    (dx * dx + dy * dy + dz * dz).sqrt() - target
}

/// A marker: a vertex against where the target has it.
#[differentiable]
pub fn marker(p: [f32; 3], #[constant] target: [f32; 3]) -> [f32; 3] {
    [p[0] - target[0], p[1] - target[1], p[2] - target[2]]
}

/// Every this many vertices is a marker.
pub const MARKER_EVERY: usize = 16;

/// The bending across the edge `p q` whose faces' other vertices are `a` and `b`: the
/// edge's midpoint against theirs, against the target's, weighted.
#[differentiable]
pub fn bending(
    p: [f32; 3],
    q: [f32; 3],
    a: [f32; 3],
    b: [f32; 3],
    #[constant] target: [f32; 3],
) -> [f32; 3] {
    let mut r = [0.0; 3];
    for i in 0..3 {
        r[i] = 0.5 * (0.5 * (p[i] + q[i]) - 0.5 * (a[i] + b[i]) - target[i]);
    }
    r
}

/// The target: the sphere pushed out and in by smooth bumps.
fn target_of(s: [f32; 3]) -> [f32; 3] {
    let bump = (3.0 * s[0]).sin() * (3.0 * s[1]).sin() * (3.0 * s[2]).sin();
    let radius = 1.0 + 0.25 * bump + 0.15 * s[2] * s[2];
    s.map(|x| x * radius)
}

pub fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub fn norm(a: [f32; 3]) -> f32 {
    (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt()
}

/// The deformation of an icosphere into [`target_of`]'s shape: its buffers on a device.
pub struct Deformation {
    pub sphere: Vec<[f32; 3]>,
    pub faces: Vec<[u32; 3]>,
    /// The target, moved so that vertex 0 (held) is where the sphere's is.
    pub target: Vec<[f32; 3]>,
    pub edges: usize,
    pub vertices: Buffer<[f32; 3]>,
    index: Vec<Index>,
    markers: Index,
    marker_targets: Buffer<[f32; 3]>,
    lengths: Buffer<f32>,
    bends: Buffer<[f32; 3]>,
}

impl Deformation {
    /// The sphere subdivided `levels` times, its vertices on `device`.
    pub fn new(device: &Device, levels: u32) -> Result<Deformation, gradfuse::Error> {
        let (sphere, faces) = icosphere(levels);
        let wings = edges_with_wings(&faces);
        let target: Vec<[f32; 3]> = sphere.iter().map(|&s| target_of(s)).collect();
        let corner = |w: &[u32; 4], k: usize| target[w[k] as usize];
        let lengths: Vec<f32> = wings
            .iter()
            .map(|w| norm(sub(corner(w, 1), corner(w, 0))))
            .collect();
        let bends: Vec<[f32; 3]> = wings
            .iter()
            .map(|w| {
                let mid = |i: usize, j: usize| {
                    [0, 1, 2].map(|c| 0.5 * (corner(w, i)[c] + corner(w, j)[c]))
                };
                sub(mid(0, 1), mid(2, 3))
            })
            .collect();
        let n = sphere.len();
        let column = |k: usize| wings.iter().map(|w| w[k]).collect::<Vec<u32>>();
        let index = (0..4)
            .map(|k| device.index(&column(k), n))
            .collect::<Result<_, _>>()?;
        // Edge lengths and bending do not change when the shape moves: the target that keeps
        // vertex 0 (held) where the sphere has it is their minimum, and the markers' too.
        let shift = sub(sphere[0], target[0]);
        let target: Vec<[f32; 3]> = target
            .iter()
            .map(|t| [t[0] + shift[0], t[1] + shift[1], t[2] + shift[2]])
            .collect();
        let markers: Vec<u32> = (0..n as u32).step_by(MARKER_EVERY).collect();
        let marker_targets: Vec<[f32; 3]> = markers.iter().map(|&m| target[m as usize]).collect();
        Ok(Deformation {
            vertices: device.buffer(&sphere)?,
            sphere,
            faces,
            target,
            edges: wings.len(),
            index,
            markers: device.index(&markers, n)?,
            marker_targets: device.buffer(&marker_targets)?,
            lengths: device.buffer(&lengths)?,
            bends: device.buffer(&bends)?,
        })
    }

    /// The problem: edge lengths and bending over the vertices, one vertex in
    /// [`MARKER_EVERY`] pulled to the target (without them, the shape's smooth modes make the
    /// system too ill-conditioned for f32 CG past some 10,000 vertices), vertex 0 held.
    pub fn problem<'b>(&'b self, device: &'b Device) -> Result<Problem<'b>, gradfuse::Error> {
        let mut problem = Problem::new(device);
        let block = problem.add_block(&self.vertices)?;
        problem.hold_rows(block, &[0])?;
        let gather = |k: usize| Source::Gather(&self.vertices, &self.index[k]);
        let lengths = edge_length::Sources {
            p: gather(0),
            q: gather(1),
            target: Source::Each(&self.lengths),
        };
        problem.add_term(edge_length::kernel(device), lengths, Loss::Squared)?;
        let bending = bending::Sources {
            p: gather(0),
            q: gather(1),
            a: gather(2),
            b: gather(3),
            target: Source::Each(&self.bends),
        };
        problem.add_term(bending::kernel(device), bending, Loss::Squared)?;
        let markers = marker::Sources {
            p: Source::Gather(&self.vertices, &self.markers),
            target: Source::Each(&self.marker_targets),
        };
        problem.add_term(marker::kernel(device), markers, Loss::Squared)?;
        Ok(problem)
    }
}
