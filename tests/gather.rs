//! Gathered arguments: arguments read from rows of parameter blocks through index arrays,
//! gradients scattered back per row. Checked against the CPU reverse mode summed per row in
//! f64, against central differences of the batch sum (f64 twin), between the GPU and the CPU
//! device, and for bit-identical reruns; bad indices and blocks are errors.
// Per-coordinate loops read clearer than iterator chains over parallel arrays.
#![allow(clippy::needless_range_loop)]
// The widest functions a gathered kernel takes have sixteen arguments.
#![allow(clippy::too_many_arguments)]

mod common;

use common::{Rng, device};
use gradfuse::{Device, Error, Index, Source, differentiable};

#[differentiable]
pub fn edge(p: [f32; 3], q: [f32; 3], #[constant] rest: f32) -> f32 {
    let d = ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2) + (q[2] - p[2]).powi(2)).sqrt();
    0.5 * (d - rest) * (d - rest)
}

/// A residual coupling a "camera" row, a "point" row, a per-element observation and a
/// shared scale: two blocks, a plain argument and a shared one in one function.
#[differentiable]
pub fn observe(cam: [f32; 3], pt: [f32; 2], obs: f32, #[shared] s: f32) -> f32 {
    let u = s * (cam[0] * pt[0] + cam[1] * pt[1]) + cam[2] - obs;
    u * u
}

struct Mesh {
    vertices: Vec<[f32; 3]>,
    p: Vec<u32>,
    q: Vec<u32>,
    rest: Vec<f32>,
}

/// Random edges with repeats, some vertices read by no edge (the last 3), and the first
/// edges all on vertex 0.
fn mesh(v: usize, e: usize, seed: u64) -> Mesh {
    let mut rng = Rng(seed);
    let vertices = (0..v)
        .map(|_| {
            [
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
            ]
        })
        .collect();
    let pick = |rng: &mut Rng| (rng.next_u64() % (v as u64 - 3)) as u32;
    let p: Vec<u32> = (0..e)
        .map(|k| if k < 50 { 0 } else { pick(&mut rng) })
        .collect();
    // Never an edge from a vertex to itself (the length's derivative is 0/0 there).
    let q = p
        .iter()
        .map(|&a| (a + 1 + pick(&mut rng) % (v as u32 - 4)) % (v as u32 - 3))
        .collect();
    let rest = (0..e).map(|_| rng.uniform(0.2, 0.8)).collect();
    Mesh {
        vertices,
        p,
        q,
        rest,
    }
}

/// Values and per-vertex gradients from a gathered launch on `d`.
fn run_edges(d: &Device, m: &Mesh) -> (Vec<f32>, Vec<[f32; 3]>) {
    let v = d.buffer(&m.vertices).unwrap();
    let pi = d.index(&m.p, m.vertices.len()).unwrap();
    let qi = d.index(&m.q, m.vertices.len()).unwrap();
    let rest = d.buffer(&m.rest).unwrap();
    let values = d.zeros::<f32>(m.p.len()).unwrap();
    let grad = d.zeros::<[f32; 3]>(m.vertices.len()).unwrap();
    let sources = edge::Sources {
        p: Source::Gather(&v, &pi),
        q: Source::Gather(&v, &qi),
        rest: Source::Each(&rest),
    };
    let mut rec = d.record();
    edge::kernel(d)
        .value_and_grad_gathered(
            &mut rec,
            &sources,
            &values,
            &edge::Sinks { p: &grad, q: &grad },
        )
        .unwrap();
    rec.submit().unwrap();
    (d.read(&values).unwrap(), d.read(&grad).unwrap())
}

fn energy_f64(m: &Mesh, vertices: &[[f64; 3]]) -> f64 {
    (0..m.p.len())
        .map(|k| {
            edge::eval::<f64>(
                vertices[m.p[k] as usize],
                vertices[m.q[k] as usize],
                f64::from(m.rest[k]),
            )
        })
        .sum()
}

#[test]
fn gathered_gradients_are_the_per_row_sums_and_bit_identical() {
    let m = mesh(500, 3000, 1);
    for d in [device(), &Device::cpu()] {
        let (values, grad) = run_edges(d, &m);
        // The CPU reverse mode per edge, summed per vertex in f64.
        let mut want = vec![[0.0f64; 3]; m.vertices.len()];
        for k in 0..m.p.len() {
            let a = edge::Args {
                p: m.vertices[m.p[k] as usize],
                q: m.vertices[m.q[k] as usize],
                rest: m.rest[k],
            };
            let (val, g) = edge::value_and_grad(&a);
            assert!(
                (val - values[k]).abs() <= 1e-5 * val.abs().max(1e-3),
                "edge {k}"
            );
            for i in 0..3 {
                want[m.p[k] as usize][i] += f64::from(g.p[i]);
                want[m.q[k] as usize][i] += f64::from(g.q[i]);
            }
        }
        let scale = want.iter().flatten().fold(0.0f64, |a, b| a.max(b.abs()));
        for (r, (g, w)) in grad.iter().zip(&want).enumerate() {
            for i in 0..3 {
                let err = (f64::from(g[i]) - w[i]).abs();
                assert!(err <= 1e-5 * scale, "vertex {r}[{i}]: {} vs {}", g[i], w[i]);
            }
        }
        // Rows no edge reads get zero.
        assert_eq!(&grad[grad.len() - 3..], &[[0.0; 3]; 3]);
        // The same bits on a second run.
        let (values2, grad2) = run_edges(d, &m);
        assert_eq!(values, values2);
        assert_eq!(grad, grad2);
        // Central differences of the batch sum in f64, for a few coordinates (vertex 0 is
        // read by the first 50 edges).
        let base: Vec<[f64; 3]> = m.vertices.iter().map(|v| v.map(f64::from)).collect();
        for (r, i) in [(0usize, 0usize), (0, 2), (7, 1), (123, 0), (321, 2)] {
            let h = 1e-6;
            let mut plus = base.clone();
            plus[r][i] += h;
            let mut minus = base.clone();
            minus[r][i] -= h;
            let fd = (energy_f64(&m, &plus) - energy_f64(&m, &minus)) / (2.0 * h);
            let g = f64::from(grad[r][i]);
            assert!(
                (g - fd).abs() <= 1e-3 * fd.abs().max(1.0),
                "vertex {r}[{i}]: {g} vs {fd}"
            );
        }
    }
}

/// Rows read by many elements are summed in chunks (two passes): hubs read by hundreds of
/// edges through both indices, rows read exactly 32 and 33 times, rows read once, and rows
/// read by none, against f64 sums of the CPU reverse mode; reruns bit-identical.
#[test]
fn rows_read_by_many_elements_sum_in_chunks() {
    let v = 120;
    let mut p = Vec::new();
    let mut q = Vec::new();
    let mut rng = Rng(17);
    for k in 0..2000u32 {
        // Hubs 0, 1 and 2 through p, hubs 3 and 4 through q.
        p.push(k % 3);
        q.push(3 + k % 2);
    }
    for (row, count) in [(10u32, 32), (11, 33), (12, 1), (13, 65)] {
        for _ in 0..count {
            p.push(row);
            q.push(20 + (rng.next_u64() % 90) as u32);
        }
    }
    let vertices: Vec<[f32; 3]> = (0..v)
        .map(|_| {
            [
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
            ]
        })
        .collect();
    let rest = (0..p.len()).map(|_| rng.uniform(0.2, 0.8)).collect();
    let m = Mesh {
        vertices,
        p,
        q,
        rest,
    };
    let mut want = vec![[0.0f64; 3]; v];
    for k in 0..m.p.len() {
        let a = edge::Args {
            p: m.vertices[m.p[k] as usize],
            q: m.vertices[m.q[k] as usize],
            rest: m.rest[k],
        };
        let (_, g) = edge::value_and_grad(&a);
        for i in 0..3 {
            want[m.p[k] as usize][i] += f64::from(g.p[i]);
            want[m.q[k] as usize][i] += f64::from(g.q[i]);
        }
    }
    let scale = want.iter().flatten().fold(0.0f64, |a, b| a.max(b.abs()));
    for d in [device(), &Device::cpu()] {
        let (_, grad) = run_edges(d, &m);
        for (r, (g, w)) in grad.iter().zip(&want).enumerate() {
            for i in 0..3 {
                let err = (f64::from(g[i]) - w[i]).abs();
                assert!(
                    err <= 2e-6 * scale,
                    "{}: vertex {r}[{i}]: {} vs {}",
                    d.describe(),
                    g[i],
                    w[i]
                );
            }
        }
        assert_eq!(grad[5], [0.0; 3]);
        assert_eq!(run_edges(d, &m).1, grad, "{}", d.describe());
    }
}

/// Launches of one size share their intermediate rows: recorded together, each must give
/// what it gives alone (a later launch reuses the rows only after the earlier one is done).
#[test]
fn gathered_launches_recorded_together_equal_each_alone() {
    let meshes = [mesh(300, 2000, 2), mesh(300, 2000, 3), mesh(300, 2000, 4)];
    for d in [device(), &Device::cpu()] {
        let alone: Vec<_> = meshes.iter().map(|m| run_edges(d, m)).collect();
        let k = edge::kernel(d);
        let bufs: Vec<_> = meshes
            .iter()
            .map(|m| {
                (
                    d.buffer(&m.vertices).unwrap(),
                    d.index(&m.p, m.vertices.len()).unwrap(),
                    d.index(&m.q, m.vertices.len()).unwrap(),
                    d.buffer(&m.rest).unwrap(),
                    d.zeros::<f32>(m.p.len()).unwrap(),
                    d.zeros::<[f32; 3]>(m.vertices.len()).unwrap(),
                )
            })
            .collect();
        let mut rec = d.record();
        for (v, pi, qi, rest, values, grad) in &bufs {
            let sources = edge::Sources {
                p: Source::Gather(v, pi),
                q: Source::Gather(v, qi),
                rest: Source::Each(rest),
            };
            let sinks = edge::Sinks { p: grad, q: grad };
            k.value_and_grad_gathered(&mut rec, &sources, values, &sinks)
                .unwrap();
        }
        rec.submit().unwrap();
        for ((_, _, _, _, values, grad), (want_v, want_g)) in bufs.iter().zip(&alone) {
            assert_eq!(&d.read(values).unwrap(), want_v);
            assert_eq!(&d.read(grad).unwrap(), want_g);
        }
    }
}

#[test]
fn two_blocks_a_plain_argument_and_a_shared_one() {
    let (cams, pts, n) = (7usize, 40usize, 2000usize);
    let mut rng = Rng(9);
    let cam_rows: Vec<[f32; 3]> = (0..cams)
        .map(|_| {
            [
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
                rng.uniform(-1.0, 1.0),
            ]
        })
        .collect();
    let pt_rows: Vec<[f32; 2]> = (0..pts)
        .map(|_| [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)])
        .collect();
    let ci: Vec<u32> = (0..n)
        .map(|_| (rng.next_u64() % cams as u64) as u32)
        .collect();
    let pi: Vec<u32> = (0..n)
        .map(|_| (rng.next_u64() % pts as u64) as u32)
        .collect();
    let obs: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let s = observe::Shared { s: 1.5 };
    let mut results = Vec::new();
    for d in [device(), &Device::cpu()] {
        let (cb, pb) = (d.buffer(&cam_rows).unwrap(), d.buffer(&pt_rows).unwrap());
        let (cidx, pidx) = (d.index(&ci, cams).unwrap(), d.index(&pi, pts).unwrap());
        let ob = d.buffer(&obs).unwrap();
        let sb = d.buffer(&[s]).unwrap();
        let values = d.zeros::<f32>(n).unwrap();
        let (cg, pg, og) = (
            d.zeros::<[f32; 3]>(cams).unwrap(),
            d.zeros::<[f32; 2]>(pts).unwrap(),
            d.zeros::<f32>(n).unwrap(),
        );
        let sg = d.zeros::<observe::SharedGrad>(1).unwrap();
        let mut rec = d.record();
        observe::kernel(d)
            .value_and_grad_gathered(
                &mut rec,
                &observe::Sources {
                    cam: Source::Gather(&cb, &cidx),
                    pt: Source::Gather(&pb, &pidx),
                    obs: Source::Each(&ob),
                },
                &sb,
                &values,
                &observe::Sinks {
                    cam: &cg,
                    pt: &pg,
                    obs: &og,
                },
                &sg,
            )
            .unwrap();
        rec.submit().unwrap();
        let (cg, pg, og) = (
            d.read(&cg).unwrap(),
            d.read(&pg).unwrap(),
            d.read(&og).unwrap(),
        );
        // The CPU reverse mode per element, summed per row in f64.
        let mut want_c = vec![[0.0f64; 3]; cams];
        let mut want_p = vec![[0.0f64; 2]; pts];
        let mut want_s = 0.0f64;
        for k in 0..n {
            let a = observe::Args {
                cam: cam_rows[ci[k] as usize],
                pt: pt_rows[pi[k] as usize],
                obs: obs[k],
            };
            let (_, g, gs) = observe::value_and_grad(&a, &s);
            (0..3).for_each(|i| want_c[ci[k] as usize][i] += f64::from(g.cam[i]));
            (0..2).for_each(|i| want_p[pi[k] as usize][i] += f64::from(g.pt[i]));
            // The GPU need not round as the CPU does (NVIDIA contracts products and sums
            // into FMAs): close, not equal.
            let near = (og[k] - g.obs).abs() <= 1e-6 * g.obs.abs().max(1.0);
            assert!(near, "element {k}: {} vs {}", og[k], g.obs);
            want_s += f64::from(gs.s);
        }
        let close = |a: f32, b: f64| (f64::from(a) - b).abs() <= 1e-4 * b.abs().max(1.0);
        for r in 0..cams {
            assert!((0..3).all(|i| close(cg[r][i], want_c[r][i])), "camera {r}");
        }
        for r in 0..pts {
            assert!((0..2).all(|i| close(pg[r][i], want_p[r][i])), "point {r}");
        }
        let got_s = d.read(&sg).unwrap()[0].s;
        assert!(close(got_s, want_s), "{got_s} vs {want_s}");
        results.push(d.read(&values).unwrap());
    }
    for (a, b) in results[0].iter().zip(&results[1]) {
        assert!((a - b).abs() <= 1e-5 * a.abs().max(1.0));
    }
}

#[test]
fn bad_indices_and_blocks_are_errors_before_any_launch() {
    let d = device();
    assert!(matches!(
        d.index(&[0, 1, 5, 2], 5),
        Err(Error::IndexOutOfRange {
            entry: 2,
            row: 5,
            rows: 5
        })
    ));
    let m = mesh(20, 30, 4);
    let v = d.buffer(&m.vertices).unwrap();
    let small: Index = d
        .index(&m.p, 10)
        .unwrap_or_else(|_| d.index(&[0; 30], 10).unwrap());
    let qi = d.index(&m.q, 20).unwrap();
    let rest = d.buffer(&m.rest).unwrap();
    let values = d.zeros::<f32>(30).unwrap();
    let grad = d.zeros::<[f32; 3]>(20).unwrap();
    let mut rec = d.record();
    // An index built for 10 rows bound to a block of 20.
    let e = edge::kernel(d)
        .value_gathered(
            &mut rec,
            &edge::Sources {
                p: Source::Gather(&v, &small),
                q: Source::Gather(&v, &qi),
                rest: Source::Each(&rest),
            },
            &values,
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 30,
                got: 60,
                ..
            }
        ),
        "{e}"
    );
    // Indices of different lengths.
    let short = d.index(&m.q[..29], 20).unwrap();
    let e = edge::kernel(d)
        .value_gathered(
            &mut rec,
            &edge::Sources {
                p: Source::Gather(&v, &qi),
                q: Source::Gather(&v, &short),
                rest: Source::Each(&rest),
            },
            &values,
        )
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    // A gradient sink of per-element length for a gathered argument.
    let per_edge = d.zeros::<[f32; 3]>(30).unwrap();
    let pi = d.index(&m.p, 20).unwrap();
    let sources = edge::Sources {
        p: Source::Gather(&v, &pi),
        q: Source::Gather(&v, &qi),
        rest: Source::Each(&rest),
    };
    let e = edge::kernel(d)
        .value_and_grad_gathered(
            &mut rec,
            &sources,
            &values,
            &edge::Sinks {
                p: &per_edge,
                q: &grad,
            },
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 60,
                got: 90,
                ..
            }
        ),
        "{e}"
    );
    // A values buffer of another length than the launch's elements (the gathered kernel
    // binds it directly: it is checked before anything is recorded).
    let short_values = d.zeros::<f32>(29).unwrap();
    for launch in 0..2 {
        let e = if launch == 0 {
            edge::kernel(d).value_gathered(&mut rec, &sources, &short_values)
        } else {
            let sinks = edge::Sinks { p: &grad, q: &grad };
            edge::kernel(d).value_and_grad_gathered(&mut rec, &sources, &short_values, &sinks)
        };
        let e = e.unwrap_err();
        let expected = matches!(
            e,
            Error::ShapeMismatch {
                expected: 30,
                got: 29,
                ..
            }
        );
        assert!(expected, "{e}");
    }
    // A sink that is also a source.
    let e = edge::kernel(d)
        .value_and_grad_gathered(
            &mut rec,
            &sources,
            &values,
            &edge::Sinks { p: &v, q: &grad },
        )
        .unwrap_err();
    assert!(matches!(e, Error::Aliased(_)), "{e}");
    rec.submit().unwrap();
    assert_eq!(d.read(&values).unwrap(), vec![0.0; 30]);
}

/// A chain of products over as many scalar arguments as a gathered kernel takes (16: on a
/// device of 32 storage bindings per stage, such as lavapipe, its launch assembles argument
/// rows first; elsewhere the kernel gathers) and one more (no gathered kernel at all).
macro_rules! chain {
    ($name:ident, $test:ident, $($a:ident),*) => {
        #[differentiable]
        pub fn $name($($a: f32),*) -> f32 {
            let mut s = 0.0;
            let mut prev = 1.0;
            $(
                s += prev * $a + 0.25 * $a * $a * $a;
                prev = $a;
            )*
            s
        }

        /// Every other argument gathered from one block through one index, the others per
        /// element: values and per-row gradients against the CPU reverse mode summed per
        /// row in f64, on the GPU and the CPU device.
        #[test]
        fn $test() {
            let (rows, n) = (13usize, 700usize);
            let mut rng = Rng(17);
            let block: Vec<f32> = (0..rows).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let entries: Vec<u32> = (0..n).map(|_| (rng.next_u64() % rows as u64) as u32).collect();
            let own: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let names = [$(stringify!($a)),*];
            let gathered = |k: usize| k % 2 == 0;
            for d in [device(), &Device::cpu()] {
                let (bb, ob) = (d.buffer(&block).unwrap(), d.buffer(&own).unwrap());
                let index = d.index(&entries, rows).unwrap();
                let mut k = 0;
                let sources = $name::Sources {
                    $($a: {
                        k += 1;
                        if gathered(k - 1) { Source::Gather(&bb, &index) } else { Source::Each(&ob) }
                    }),*
                };
                let (block_grad, own_grad) = (d.zeros::<f32>(rows).unwrap(), d.zeros::<f32>(n).unwrap());
                let mut k = 0;
                let sinks = $name::Sinks {
                    $($a: {
                        k += 1;
                        if gathered(k - 1) { &block_grad } else { &own_grad }
                    }),*
                };
                let values = d.zeros::<f32>(n).unwrap();
                let mut rec = d.record();
                $name::kernel(d)
                    .value_and_grad_gathered(&mut rec, &sources, &values, &sinks)
                    .unwrap();
                rec.submit().unwrap();
                let (values, block_grad, own_grad) =
                    (d.read(&values).unwrap(), d.read(&block_grad).unwrap(), d.read(&own_grad).unwrap());
                let mut want_block = vec![0.0f64; rows];
                for e in 0..n {
                    let words: Vec<f32> = (0..names.len())
                        .map(|k| if gathered(k) { block[entries[e] as usize] } else { own[e] })
                        .collect();
                    let a: &$name::Args = &bytemuck::cast_slice(&words)[0];
                    let (v, g) = $name::value_and_grad(a);
                    let g: &[f32] = bytemuck::cast_slice(std::slice::from_ref(&g));
                    let close = |a: f32, b: f64| (f64::from(a) - b).abs() <= 1e-4 * b.abs().max(1.0);
                    assert!(close(values[e], f64::from(v)), "{}: element {e}", d.describe());
                    let own_sum: f64 = (0..names.len()).filter(|k| !gathered(*k)).map(|k| f64::from(g[k])).sum();
                    assert!(close(own_grad[e], own_sum), "{}: element {e}'s gradient", d.describe());
                    for k in (0..names.len()).filter(|k| gathered(*k)) {
                        want_block[entries[e] as usize] += f64::from(g[k]);
                    }
                }
                for r in 0..rows {
                    let close = (f64::from(block_grad[r]) - want_block[r]).abs() <= 1e-4 * want_block[r].abs().max(1.0);
                    assert!(close, "{}: row {r}: {} vs {}", d.describe(), block_grad[r], want_block[r]);
                }
            }
        }
    };
}

chain!(
    chain16,
    sixteen_arguments_gather,
    a0,
    a1,
    a2,
    a3,
    a4,
    a5,
    a6,
    a7,
    a8,
    a9,
    a10,
    a11,
    a12,
    a13,
    a14,
    a15
);
chain!(
    chain17,
    seventeen_arguments_gather_by_assembling_rows,
    a0,
    a1,
    a2,
    a3,
    a4,
    a5,
    a6,
    a7,
    a8,
    a9,
    a10,
    a11,
    a12,
    a13,
    a14,
    a15,
    a16
);
