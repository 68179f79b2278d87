//! Gathered arguments of functions written over f64: rows of f64 parameter blocks read
//! through index arrays, their gradients scattered per row and summed in f64 (plain rows,
//! and rows read by many elements in chunks), next to a per-element argument and a shared
//! one; Jacobian blocks of a vector function read the same way. Against the CPU versions
//! summed here in f64, central differences of the batch's summed value, between the GPU and
//! the CPU device, and for bit-identical reruns.

// Per-coordinate loops read clearer than iterator chains over parallel arrays.
#![allow(clippy::needless_range_loop)]

mod common;

use common::{Rng, f64_devices};
use gradfuse::{Device, Source, differentiable};

/// An edge's spring energy, scaled by a shared stiffness.
#[differentiable]
pub fn edge64(p: [f64; 3], q: [f64; 3], #[constant] rest: f64, #[shared] k: f64) -> f64 {
    let d = ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2) + (q[2] - p[2]).powi(2)).sqrt();
    0.5 * k * (d - rest) * (d - rest)
}

/// The offset of two points, rotated by a per-element angle: a Jacobian block per element.
#[differentiable]
pub fn offset64(p: [f64; 2], q: [f64; 2], angle: f64) -> [f64; 2] {
    let s = angle.sin();
    let c = angle.cos();
    let dx = q[0] - p[0];
    let dy = q[1] - p[1];
    [c * dx - s * dy, s * dx + c * dy]
}

struct Mesh {
    vertices: Vec<[f64; 3]>,
    p: Vec<u32>,
    q: Vec<u32>,
    rest: Vec<f64>,
}

/// Random edges over `v` vertices; vertex 0 is read by the first 300 edges through `p`
/// (its gradient summed in chunks), vertex 1 by every fifth through `q`, the last 3 by
/// none.
fn mesh(v: usize, e: usize, seed: u64) -> Mesh {
    let mut rng = Rng(seed);
    let coordinate =
        |rng: &mut Rng| rng.uniform(-1.0, 1.0) as f64 + 1e-9 * rng.uniform(0.0, 1.0) as f64;
    let vertices = (0..v)
        .map(|_| {
            [
                coordinate(&mut rng),
                coordinate(&mut rng),
                coordinate(&mut rng),
            ]
        })
        .collect();
    let pick = |rng: &mut Rng| (rng.next_u64() % (v as u64 - 3)) as u32;
    let p: Vec<u32> = (0..e)
        .map(|k| if k < 300 { 0 } else { pick(&mut rng) })
        .collect();
    // Never an edge from a vertex to itself (the length's derivative is 0/0 there).
    let q = p
        .iter()
        .enumerate()
        .map(|(k, &a)| {
            if k % 5 == 0 && a != 1 {
                1
            } else {
                (a + 1 + pick(&mut rng) % (v as u32 - 4)) % (v as u32 - 3)
            }
        })
        .collect();
    let rest = (0..e).map(|_| rng.uniform(0.2, 0.8) as f64).collect();
    Mesh {
        vertices,
        p,
        q,
        rest,
    }
}

const STIFFNESS: f64 = 1.7;

/// Values, per-vertex gradients and the stiffness's gradient from a gathered launch on `d`.
fn run_edges(d: &Device, m: &Mesh) -> (Vec<f64>, Vec<[f64; 3]>, f64) {
    let v = d.buffer(&m.vertices).expect("vertices");
    let pi = d.index(&m.p, m.vertices.len()).expect("index p");
    let qi = d.index(&m.q, m.vertices.len()).expect("index q");
    let rest = d.buffer(&m.rest).expect("rest");
    let k = d
        .buffer(&[edge64::Shared { k: STIFFNESS }])
        .expect("shared");
    let values = d.zeros::<f64>(m.p.len()).expect("values");
    let grad = d.zeros::<[f64; 3]>(m.vertices.len()).expect("grad");
    let dk = d.zeros::<edge64::SharedGrad>(1).expect("shared grad");
    let sources = edge64::Sources {
        p: Source::Gather(&v, &pi),
        q: Source::Gather(&v, &qi),
        rest: Source::Each(&rest),
    };
    let mut rec = d.record();
    edge64::kernel(d)
        .value_and_grad_gathered(
            &mut rec,
            &sources,
            &k,
            &values,
            &edge64::Sinks { p: &grad, q: &grad },
            &dk,
        )
        .expect("record");
    rec.submit().expect("submit");
    let dk: Vec<edge64::SharedGrad> = d.read(&dk).expect("read");
    (
        d.read(&values).expect("read"),
        d.read(&grad).expect("read"),
        dk[0].k,
    )
}

fn energy(m: &Mesh, vertices: &[[f64; 3]], k: f64) -> f64 {
    (0..m.p.len())
        .map(|e| {
            edge64(
                vertices[m.p[e] as usize],
                vertices[m.q[e] as usize],
                m.rest[e],
                k,
            )
        })
        .sum()
}

#[test]
fn gathered_f64_gradients_are_the_per_row_sums() {
    let m = mesh(400, 5000, 91);
    let shared = edge64::Shared { k: STIFFNESS };
    // The CPU version per edge, summed per vertex here, with the sums of absolute values
    // as the scale of each sum's rounding.
    let (mut want, mut scale) = (vec![[0.0f64; 3]; 400], vec![[0.0f64; 3]; 400]);
    let (mut want_values, mut want_k, mut scale_k) = (Vec::new(), 0.0, 0.0);
    for e in 0..m.p.len() {
        let a = edge64::Args {
            p: m.vertices[m.p[e] as usize],
            q: m.vertices[m.q[e] as usize],
            rest: m.rest[e],
        };
        let (v, g, sg) = edge64::value_and_grad(&a, &shared);
        want_values.push(v);
        (want_k, scale_k) = (want_k + sg.k, scale_k + sg.k.abs());
        for i in 0..3 {
            want[m.p[e] as usize][i] += g.p[i];
            want[m.q[e] as usize][i] += g.q[i];
            scale[m.p[e] as usize][i] += g.p[i].abs();
            scale[m.q[e] as usize][i] += g.q[i].abs();
        }
    }
    for d in f64_devices() {
        let (values, grad, dk) = run_edges(d, &m);
        let name = d.describe();
        for (e, (v, w)) in values.iter().zip(&want_values).enumerate() {
            assert!(
                (v - w).abs() <= 1e-13 * w.abs().max(1e-3),
                "{name}: edge {e}"
            );
        }
        for r in 0..400 {
            for i in 0..3 {
                let err = (grad[r][i] - want[r][i]).abs();
                assert!(
                    err <= 1e-13 * scale[r][i],
                    "{name}: vertex {r}[{i}]: {} vs {}",
                    grad[r][i],
                    want[r][i]
                );
            }
        }
        assert!(
            (dk - want_k).abs() <= 1e-13 * scale_k,
            "{name}: {dk} vs {want_k}"
        );
        // Rows no edge reads get zero.
        assert_eq!(&grad[397..], &[[0.0; 3]; 3]);
        // The same bits on a second run.
        let again = run_edges(d, &m);
        assert_eq!(
            (&values, &grad, dk.to_bits()),
            (&again.0, &again.1, again.2.to_bits())
        );
        // Central differences of the batch's summed value, for a few coordinates: the hub
        // vertices 0 and 1 and plain ones.
        for (r, i) in [(0usize, 0usize), (0, 2), (1, 1), (7, 1), (123, 0), (321, 2)] {
            let h = 1e-6;
            let (mut plus, mut minus) = (m.vertices.clone(), m.vertices.clone());
            plus[r][i] += h;
            minus[r][i] -= h;
            let fd = (energy(&m, &plus, STIFFNESS) - energy(&m, &minus, STIFFNESS)) / (2.0 * h);
            assert!(
                (grad[r][i] - fd).abs() <= 1e-7 * fd.abs().max(1.0),
                "{name}: vertex {r}[{i}]: {} vs {fd}",
                grad[r][i]
            );
        }
        let h = 1e-6;
        let fd = (energy(&m, &m.vertices, STIFFNESS + h) - energy(&m, &m.vertices, STIFFNESS - h))
            / (2.0 * h);
        assert!(
            (dk - fd).abs() <= 1e-7 * fd.abs().max(1.0),
            "{name}: {dk} vs {fd}"
        );
    }
}

#[test]
fn gathered_f64_jacobian_blocks_match_the_cpu() {
    let mut rng = Rng(92);
    let points: Vec<[f64; 2]> = (0..50)
        .map(|_| [rng.uniform(-2.0, 2.0) as f64, rng.uniform(-2.0, 2.0) as f64])
        .collect();
    let n = 700;
    let pi: Vec<u32> = (0..n).map(|_| (rng.next_u64() % 50) as u32).collect();
    let qi: Vec<u32> = (0..n).map(|_| (rng.next_u64() % 50) as u32).collect();
    let angles: Vec<f64> = (0..n).map(|_| rng.uniform(-3.0, 3.0) as f64).collect();
    for d in f64_devices() {
        let pts = d.buffer(&points).expect("points");
        let (ip, iq) = (d.index(&pi, 50).expect("p"), d.index(&qi, 50).expect("q"));
        let a = d.buffer(&angles).expect("angles");
        let values = d.zeros::<[f64; 2]>(n).expect("values");
        let blocks = d.zeros::<offset64::Jacobian>(n).expect("blocks");
        let sources = offset64::Sources {
            p: Source::Gather(&pts, &ip),
            q: Source::Gather(&pts, &iq),
            angle: Source::Each(&a),
        };
        let mut rec = d.record();
        offset64::kernel(d)
            .value_and_jacobian_gathered(&mut rec, &sources, &values, &blocks)
            .expect("record");
        rec.submit().expect("submit");
        let (values, blocks) = (
            d.read(&values).expect("read"),
            d.read(&blocks).expect("read"),
        );
        for e in 0..n {
            let args = offset64::Args {
                p: points[pi[e] as usize],
                q: points[qi[e] as usize],
                angle: angles[e],
            };
            let (v, j) = offset64::value_and_jacobian(&args);
            let (got, want): ([f64; 10], [f64; 10]) = (
                gradfuse::bytemuck::cast(blocks[e]),
                gradfuse::bytemuck::cast(j),
            );
            for k in 0..2 {
                assert!((values[e][k] - v[k]).abs() <= 1e-13 * v[k].abs().max(1.0));
            }
            for k in 0..10 {
                assert!(
                    (got[k] - want[k]).abs() <= 1e-13 * want[k].abs().max(1.0),
                    "{}: element {e} word {k}: {} vs {}",
                    d.describe(),
                    got[k],
                    want[k]
                );
            }
        }
    }
}

/// The gathered kernels of f64 functions are generated and read f64 rows.
#[test]
fn gathered_f64_kernels_read_f64_rows() {
    for (name, src) in [
        ("edge64 forward", edge64::WGSL_FORWARD_GATHERED),
        ("edge64 adjoint", edge64::WGSL_ADJOINT_GATHERED),
        ("offset64 jacobian", offset64::WGSL_JACOBIAN_GATHERED),
    ] {
        assert!(src.contains("array<f64>"), "{name} reads f64 rows");
        common::validate_wgsl_f64(name, src);
    }
}
