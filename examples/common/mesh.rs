//! Meshes the examples share: the icosphere and its edges.
#![allow(dead_code)]

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
