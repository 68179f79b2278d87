//! Kernels whose outputs are wider than a vector store go through the workgroup's stage
//! and are stored in runs (`out_stage`): adjoints of more than 16 gradient words and
//! Jacobians, each chunk of a power-of-two width permuted per element in the stage
//! (`stores.rs`, `chunk_swizzle`). A Jacobian's rows are computed one result at a time and
//! each chunk is stored as soon as its words are (`opt::outputs_in_groups`,
//! `jacobian_chunks_as_computed`). On the GPU, at a batch that ends inside a workgroup,
//! they give the CPU versions' values and derivatives.

mod common;

use common::sizes::stores_at_every_size;
use common::{Rng, device};
use gradfuse::differentiable;

#[differentiable]
fn wide(a: [f32; 20], s: f32) -> f32 {
    let mut acc = 0.0;
    for i in 0..19 {
        acc += (a[i] * s).tanh() * a[i + 1];
    }
    acc * s
}

#[differentiable]
fn wide_jacobian(x: [f32; 8]) -> [f32; 3] {
    let mut r = [0.0; 3];
    for j in 0..3 {
        let mut t = 0.0;
        for k in 0..8 {
            t += (x[k] * (j as f32 + 1.0)).sin() * x[7 - k];
        }
        r[j] = t;
    }
    r
}

#[differentiable]
fn rows_of_one_chunk(x: [f32; 16]) -> [f32; 4] {
    let mut r = [0.0; 4];
    for j in 0..4 {
        let c = j as f32 + 1.0;
        let mut t = 0.0;
        for k in 0..16 {
            t += (x[k] * c).sin() * x[15 - k];
        }
        r[j] = t;
    }
    r
}

#[differentiable]
fn rows_across_chunks(x: [f32; 24]) -> [f32; 3] {
    let mut r = [0.0; 3];
    for j in 0..3 {
        let c = 0.5 * j as f32 + 1.0;
        let mut t = 0.0;
        for k in 0..24 {
            t += (x[k] * c).cos() * x[23 - k] + x[k] * x[k] * c;
        }
        r[j] = t.tanh();
    }
    r
}

#[differentiable]
fn rows_in_vectors(x: [f32; 20]) -> [f32; 4] {
    let mut r = [0.0; 4];
    for j in 0..4 {
        let c = j as f32 * 0.25 + 0.5;
        let mut t = 0.0;
        for k in 0..20 {
            t += (x[k] * c).sin() * x[19 - k];
        }
        r[j] = t;
    }
    r
}

#[differentiable]
fn rows_of_seven(x: [f32; 7]) -> [f32; 4] {
    let mut r = [0.0; 4];
    for j in 0..4 {
        let mut t = j as f32;
        for k in 0..7 {
            t += (x[k] * (j as f32 + 1.0)).exp() * x[6 - k];
        }
        r[j] = t;
    }
    r
}

fn close(got: f32, want: f32) -> bool {
    (got - want).abs() <= 1e-4 * (1.0 + want.abs())
}

#[test]
fn wide_gradients_are_staged_and_match_the_cpu() {
    assert!(
        wide::WGSL_ADJOINT.contains("out_stage"),
        "21 gradient words: staged"
    );
    // Its first chunk, 16 words, permuted in the stage so that stores miss no bank.
    assert!(wide::WGSL_ADJOINT.contains("grads_swizzle_0"));
    let mut rng = Rng(17);
    let args: Vec<wide::Args> = (0..700)
        .map(|_| wide::Args {
            a: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            s: rng.uniform(0.5, 1.5),
        })
        .collect();
    let (values, grads) = wide::kernel(device())
        .value_and_grad(&args)
        .expect("launch");
    for (k, a) in args.iter().enumerate() {
        let (v, g) = wide::value_and_grad(a);
        assert_eq!(v, wide(a.a, a.s));
        assert!(close(values[k], v), "{k}: {} vs {v}", values[k]);
        for w in 0..20 {
            assert!(close(grads[k].a[w], g.a[w]), "{k}, a[{w}]");
        }
        assert!(close(grads[k].s, g.s), "{k}, s");
    }
}

#[test]
fn wide_jacobians_are_staged_and_match_the_cpu() {
    assert!(
        wide_jacobian::WGSL_JACOBIAN.contains("out_stage"),
        "24 Jacobian words: staged"
    );
    // Chunks of 16 and 8 words, both permuted.
    assert!(wide_jacobian::WGSL_JACOBIAN.contains("jacobians_swizzle_1"));
    let mut rng = Rng(18);
    let args: Vec<wide_jacobian::Args> = (0..700)
        .map(|_| wide_jacobian::Args {
            x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
        })
        .collect();
    let (values, jacobians) = wide_jacobian::kernel(device())
        .value_and_jacobian(&args)
        .expect("launch");
    for (k, a) in args.iter().enumerate() {
        let (v, j) = wide_jacobian::value_and_jacobian(a);
        assert_eq!(v, wide_jacobian(a.x));
        for m in 0..3 {
            assert!(close(values[k][m], v[m]), "{k}: result[{m}]");
            for w in 0..8 {
                assert!(close(jacobians[k][m].x[w], j[m].x[w]), "{k}: d{m}/dx[{w}]");
            }
        }
    }
}

/// The central difference of result `m` of `f` in word `w` of `x`, in f64 from f32
/// evaluations: an oracle that shares no code with the derivative kernels.
fn central<const N: usize, const M: usize>(
    f: impl Fn([f32; N]) -> [f32; M],
    x: [f32; N],
    m: usize,
    w: usize,
) -> f32 {
    let h = 1e-2f32;
    let (mut up, mut down) = (x, x);
    up[w] += h;
    down[w] -= h;
    ((f(up)[m] as f64 - f(down)[m] as f64) / (2.0 * h as f64)) as f32
}

/// The chunks of a Jacobian are stored among the statements that compute them: the first
/// chunk before the last call of the last row.
fn stored_as_computed(wgsl: &str, call: &str) -> bool {
    match (wgsl.find("jacobians_swizzle_0"), wgsl.rfind(call)) {
        (Some(store), Some(last)) => store < last,
        _ => false,
    }
}

#[test]
fn jacobian_rows_of_one_chunk_are_stored_as_computed_and_match_the_cpu() {
    assert!(stored_as_computed(
        rows_of_one_chunk::WGSL_JACOBIAN,
        "gf_sincos("
    ));
    let mut rng = Rng(19);
    for n in [1, 700] {
        let args: Vec<rows_of_one_chunk::Args> = (0..n)
            .map(|_| rows_of_one_chunk::Args {
                x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            })
            .collect();
        let (values, jacobians) = rows_of_one_chunk::kernel(device())
            .value_and_jacobian(&args)
            .expect("launch");
        for (k, a) in args.iter().enumerate() {
            let (v, j) = rows_of_one_chunk::value_and_jacobian(a);
            assert_eq!(v, rows_of_one_chunk(a.x));
            for m in 0..4 {
                assert!(close(values[k][m], v[m]), "{n}, {k}: result[{m}]");
                for w in 0..16 {
                    let got = jacobians[k][m].x[w];
                    assert!(close(got, j[m].x[w]), "{n}, {k}: d{m}/dx[{w}]");
                    if k % 97 == 0 {
                        let fd = central(rows_of_one_chunk, a.x, m, w);
                        assert!(
                            (got - fd).abs() < 2e-3 * (1.0 + fd.abs()),
                            "{k}: {got} vs {fd}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn jacobian_rows_across_chunks_are_stored_as_computed_and_match_the_cpu() {
    // 72 words: chunks of 16 words, the second row from the middle of the second, and a
    // last chunk of 8, in `vec4`s; the 3 values (no vector view) from registers.
    let wgsl = rows_across_chunks::WGSL_JACOBIAN;
    assert!(stored_as_computed(wgsl, "gf_sincos("));
    assert!(wgsl.contains("jacobians_swizzle_4"));
    assert!(wgsl.contains("var<storage, read_write> jacobians: array<vec4<f32>>;"));
    assert!(wgsl.contains("var<storage, read_write> values: array<f32>;"));
    assert!(wgsl.contains("values[values_base + 2u] = "));
    let mut rng = Rng(20);
    for n in [1, 700] {
        let args: Vec<rows_across_chunks::Args> = (0..n)
            .map(|_| rows_across_chunks::Args {
                x: std::array::from_fn(|_| rng.uniform(-0.5, 0.5)),
            })
            .collect();
        let (values, jacobians) = rows_across_chunks::kernel(device())
            .value_and_jacobian(&args)
            .expect("launch");
        for (k, a) in args.iter().enumerate() {
            let (v, j) = rows_across_chunks::value_and_jacobian(a);
            assert_eq!(v, rows_across_chunks(a.x));
            for m in 0..3 {
                assert!(close(values[k][m], v[m]), "{n}, {k}: result[{m}]");
                for w in 0..24 {
                    let got = jacobians[k][m].x[w];
                    assert!(close(got, j[m].x[w]), "{n}, {k}: d{m}/dx[{w}]");
                    if k % 97 == 0 {
                        let fd = central(rows_across_chunks, a.x, m, w);
                        assert!(
                            (got - fd).abs() < 2e-3 * (1.0 + fd.abs()),
                            "{k}: {got} vs {fd}"
                        );
                    }
                }
            }
        }
    }
}

/// Jacobians of a multiple of 4 words go through a stage of `vec4`s: 80 words in five
/// permuted chunks of four blocks, rows across them; 28 words in a chunk of four blocks
/// and one of three, unpermuted.
#[test]
fn jacobians_in_vectors_match_the_cpu() {
    for wgsl in [rows_in_vectors::WGSL_JACOBIAN, rows_of_seven::WGSL_JACOBIAN] {
        assert!(
            wgsl.contains("var<workgroup> out_stage: array<vec4<f32>, gf_workgroup_size * 4u>;")
        );
        assert!(wgsl.contains("var<storage, read_write> jacobians: array<vec4<f32>>;"));
    }
    assert!(stored_as_computed(
        rows_in_vectors::WGSL_JACOBIAN,
        "gf_sincos("
    ));
    assert!(rows_in_vectors::WGSL_JACOBIAN.contains("jacobians_swizzle_4"));
    assert!(rows_of_seven::WGSL_JACOBIAN.contains("let slot = part * gf_workgroup_size + lid;"));
    let mut rng = Rng(21);
    for n in [1, 300, 700] {
        let args: Vec<rows_in_vectors::Args> = (0..n)
            .map(|_| rows_in_vectors::Args {
                x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            })
            .collect();
        let (values, jacobians) = rows_in_vectors::kernel(device())
            .value_and_jacobian(&args)
            .expect("launch");
        for (k, a) in args.iter().enumerate() {
            let (v, j) = rows_in_vectors::value_and_jacobian(a);
            for m in 0..4 {
                assert!(close(values[k][m], v[m]), "{n}, {k}: result[{m}]");
                for w in 0..20 {
                    let got = jacobians[k][m].x[w];
                    assert!(close(got, j[m].x[w]), "{n}, {k}: d{m}/dx[{w}]");
                    if k % 97 == 0 {
                        let fd = central(rows_in_vectors, a.x, m, w);
                        assert!(
                            (got - fd).abs() < 2e-3 * (1.0 + fd.abs()),
                            "{k}: {got} vs {fd}"
                        );
                    }
                }
            }
        }
        let args: Vec<rows_of_seven::Args> = (0..n)
            .map(|_| rows_of_seven::Args {
                x: std::array::from_fn(|_| rng.uniform(-0.5, 0.5)),
            })
            .collect();
        let (values, jacobians) = rows_of_seven::kernel(device())
            .value_and_jacobian(&args)
            .expect("launch");
        for (k, a) in args.iter().enumerate() {
            let (v, j) = rows_of_seven::value_and_jacobian(a);
            assert_eq!(v, rows_of_seven(a.x));
            for m in 0..4 {
                assert!(close(values[k][m], v[m]), "{n}, {k}: result[{m}]");
                for w in 0..7 {
                    let got = jacobians[k][m].x[w];
                    assert!(close(got, j[m].x[w]), "{n}, {k}: d{m}/dx[{w}]");
                    if k % 97 == 0 {
                        let fd = central(rows_of_seven, a.x, m, w);
                        assert!(
                            (got - fd).abs() < 2e-3 * (1.0 + fd.abs()),
                            "{k}: {got} vs {fd}"
                        );
                    }
                }
            }
        }
    }
}

/// The runtime may launch these kernels at any of its workgroup sizes: every chunk's stores
/// out of the stage are written for the size (`stores::sized_parts`), so each size gives
/// the same bits, and the CPU versions' values.
#[test]
fn chunks_give_the_same_bits_at_every_size() {
    stores_at_every_size(&rows_across_chunks::JACOBIAN_KERNEL, 1e-4);
    stores_at_every_size(&rows_in_vectors::JACOBIAN_KERNEL, 1e-4);
    stores_at_every_size(&rows_of_seven::JACOBIAN_KERNEL, 1e-4);
    stores_at_every_size(&wide::ADJOINT_KERNEL, 1e-4);
}
