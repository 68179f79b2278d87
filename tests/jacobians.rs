//! Vector results: `-> [f32; M]` gives `value_and_jacobian` on the CPU and in batches, by
//! reverse sweeps (M no larger than the argument words) or forward sweeps (M larger),
//! checked against central differences of the f64 interpreter, duals and `jvp`.

// Index loops compare rows and columns side by side.
#![allow(clippy::needless_range_loop)]

mod common;

use common::{Rng, device};
use gradfuse::{Device, Dual, Source, differentiable};
use gradfuse_shaders_gen::{ad::JacobianMode, compile_str, interp};

with_source! {
    POLAR_SRC,
    // Two results, two arguments: reverse sweeps.
    #[differentiable]
    pub fn polar(r: f32, theta: f32) -> [f32; 2] {
        [r * theta.cos(), r * theta.sin()]
    }
}

with_source! {
    HELIX_SRC,
    // Four results, one argument with a gradient: one forward sweep.
    #[differentiable]
    pub fn helix(t: f32, #[constant] pitch: f32) -> [f32; 4] {
        let mut p = [t.cos(), t.sin(), pitch * t, 0.0];
        for k in 0..3 {
            p[3] += p[k] * p[k];
        }
        p
    }
}

with_source! {
    ROTATE_SRC,
    // A rotation about z of a point, with a branch: 3 results, 4 argument words.
    #[differentiable]
    pub fn rotate(p: [f32; 3], angle: f32) -> [f32; 3] {
        let c = angle.cos();
        let s = angle.sin();
        let z = if p[2] > 0.0 { p[2] * p[2] } else { -p[2] };
        [c * p[0] - s * p[1], s * p[0] + c * p[1], z]
    }
}

with_source! {
    FRAME_SRC,
    // A tuple result: its words in order are the Jacobian's rows.
    #[differentiable]
    pub fn frame(t: f32, r: f32) -> (f32, [f32; 2]) {
        let speed = r * 2.0;
        (speed * t, [r * t.cos(), r * t.sin()])
    }
}

/// Values and the Jacobian (rows: results; columns: all argument words) by central
/// differences of the f64 interpreter.
fn oracle(src: &str, x: &[f64]) -> (Vec<f64>, Vec<Vec<f64>>) {
    let c = compile_str(src).expect("compiles");
    let f = &c.lowered.primal;
    let values = interp::eval(f, x);
    let mut rows = vec![vec![0.0; x.len()]; values.len()];
    for w in 0..x.len() {
        let h = 1e-6 * x[w].abs().max(1.0);
        let (mut plus, mut minus) = (x.to_vec(), x.to_vec());
        plus[w] += h;
        minus[w] -= h;
        let (fp, fm) = (interp::eval(f, &plus), interp::eval(f, &minus));
        for k in 0..values.len() {
            rows[k][w] = (fp[k] - fm[k]) / (2.0 * h);
        }
    }
    (values, rows)
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want.abs().max(1.0)
}

#[test]
fn the_mode_follows_the_shape() {
    let mode = |src| compile_str(src).expect("compiles").reverse.jacobian_mode();
    assert_eq!(mode(POLAR_SRC), Some(JacobianMode::Reverse));
    assert_eq!(mode(HELIX_SRC), Some(JacobianMode::Forward));
    assert_eq!(mode(ROTATE_SRC), Some(JacobianMode::Reverse));
}

#[test]
fn jacobians_match_differences_on_cpu_and_gpu() {
    let mut rng = Rng(41);
    let polar_batch: Vec<polar::Args> = (0..500)
        .map(|_| polar::Args {
            r: rng.uniform(0.1, 2.0),
            theta: rng.uniform(-3.0, 3.0),
        })
        .collect();
    let rotate_batch: Vec<rotate::Args> = (0..500)
        .map(|_| rotate::Args {
            p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            angle: rng.uniform(-3.0, 3.0),
        })
        .collect();
    let helix_batch: Vec<helix::Args> = (0..500)
        .map(|_| helix::Args {
            t: rng.uniform(-3.0, 3.0),
            pitch: rng.uniform(0.1, 1.0),
        })
        .collect();
    for d in [device(), &Device::cpu()] {
        let (pv, pj) = polar::kernel(d)
            .value_and_jacobian(&polar_batch)
            .expect("launch");
        assert_eq!(pv, polar::kernel(d).value(&polar_batch).expect("launch"));
        for (i, a) in polar_batch.iter().enumerate() {
            let (want_v, want_j) = oracle(POLAR_SRC, &[a.r as f64, a.theta as f64]);
            let (v, j) = polar::value_and_jacobian(a);
            for k in 0..2 {
                assert!(close(v[k] as f64, want_v[k], 1e-6));
                assert!(close(pv[i][k] as f64, want_v[k], 2e-5));
                for got in [&j[k], &pj[i][k]] {
                    assert!(
                        close(got.r as f64, want_j[k][0], 2e-5),
                        "{k}: {got:?} vs {want_j:?}"
                    );
                    assert!(close(got.theta as f64, want_j[k][1], 2e-5));
                }
            }
        }
        let (rv, rj) = rotate::kernel(d)
            .value_and_jacobian(&rotate_batch)
            .expect("launch");
        for (i, a) in rotate_batch.iter().enumerate() {
            let x: Vec<f64> = a.p.iter().chain([&a.angle]).map(|v| *v as f64).collect();
            let (want_v, want_j) = oracle(ROTATE_SRC, &x);
            let (v, j) = rotate::value_and_jacobian(a);
            for k in 0..3 {
                assert!(close(v[k] as f64, want_v[k], 1e-5));
                assert!(close(rv[i][k] as f64, want_v[k], 2e-5));
                for row in [&j[k], &rj[i][k]] {
                    let got = [row.p[0], row.p[1], row.p[2], row.angle];
                    for w in 0..4 {
                        assert!(close(got[w] as f64, want_j[k][w], 2e-5), "{k},{w}");
                    }
                }
            }
        }
        let (hv, hj) = helix::kernel(d)
            .value_and_jacobian(&helix_batch)
            .expect("launch");
        for (i, a) in helix_batch.iter().enumerate() {
            let (want_v, want_j) = oracle(HELIX_SRC, &[a.t as f64, a.pitch as f64]);
            let (v, j) = helix::value_and_jacobian(a);
            for k in 0..4 {
                assert!(close(v[k] as f64, want_v[k], 1e-5));
                assert!(close(hv[i][k] as f64, want_v[k], 2e-5));
                // The only column: t (pitch is #[constant]).
                assert!(close(j[k].t as f64, want_j[k][0], 2e-5));
                assert!(close(hj[i][k].t as f64, want_j[k][0], 2e-5));
            }
        }
    }
}

#[test]
fn tuple_results() {
    let batch: Vec<frame::Args> = (0..200)
        .map(|k| frame::Args {
            t: k as f32 * 0.03 - 3.0,
            r: 0.5 + k as f32 * 0.01,
        })
        .collect();
    for d in [device(), &Device::cpu()] {
        let (values, jacobians) = frame::kernel(d).value_and_jacobian(&batch).expect("launch");
        let plain = frame::kernel(d).value(&batch).expect("launch");
        for (i, a) in batch.iter().enumerate() {
            let (want_v, want_j) = oracle(FRAME_SRC, &[a.t as f64, a.r as f64]);
            let (v, j) = frame::value_and_jacobian(a);
            assert_eq!(frame(a.t, a.r), v);
            let words = frame::words_of(v);
            let gpu_words = frame::words_of(values[i]);
            assert_eq!(frame::words_of(plain[i]), gpu_words);
            for k in 0..3 {
                assert!(close(words[k] as f64, want_v[k], 1e-6));
                assert!(close(gpu_words[k] as f64, want_v[k], 2e-5));
                for row in [&j[k], &jacobians[i][k]] {
                    assert!(close(row.t as f64, want_j[k][0], 2e-5), "{k}");
                    assert!(close(row.r as f64, want_j[k][1], 2e-5), "{k}");
                }
            }
            let (jv, jd) = frame::jvp(a, &frame::Grad { t: 1.0, r: 0.0 });
            assert_eq!(jv, v);
            let jd = frame::words_of(jd);
            for k in 0..3 {
                assert!(close(jd[k] as f64, want_j[k][0], 2e-5));
            }
        }
    }
    let _ = frame::value_of(&[1.0, 2.0, 3.0]);
}

#[test]
fn jvp_and_duals_agree_with_the_jacobian() {
    let a = rotate::Args {
        p: [0.3, -0.7, 0.4],
        angle: 0.9,
    };
    let (v, j) = rotate::value_and_jacobian(&a);
    let t = rotate::Grad {
        p: [1.0, 0.5, -0.25],
        angle: 2.0,
    };
    let (jv, jd) = rotate::jvp(&a, &t);
    assert_eq!(jv, v);
    for k in 0..3 {
        let want =
            j[k].p[0] * t.p[0] + j[k].p[1] * t.p[1] + j[k].p[2] * t.p[2] + j[k].angle * t.angle;
        assert!((jd[k] - want).abs() < 1e-5);
    }
    let var = |x: f32, i: usize| Dual::<f64, 4>::variable(x as f64, i);
    let r = rotate::eval(
        [var(a.p[0], 0), var(a.p[1], 1), var(a.p[2], 2)],
        var(a.angle, 3),
    );
    for k in 0..3 {
        let row = [j[k].p[0], j[k].p[1], j[k].p[2], j[k].angle];
        for w in 0..4 {
            assert!((r[k].tangent()[w] - row[w] as f64).abs() < 1e-6);
        }
    }
}

/// The tangent kernel of vector functions (`Kernel::jvp`, forward mode on the device)
/// against central differences of the f64 interpreter along random directions, and the
/// dot-product identity `<c, J t> = <J^T c, t>` with `J` from the Jacobian kernel (reverse
/// sweeps for `rotate`, a forward sweep for `helix`), on the GPU and the CPU device.
#[test]
fn tangent_kernels_and_the_dot_product_identity() {
    let mut rng = Rng(77);
    let batch: Vec<rotate::Args> = (0..300)
        .map(|_| rotate::Args {
            p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            angle: rng.uniform(-3.0, 3.0),
        })
        .collect();
    let tangents: Vec<rotate::Grad> = (0..300)
        .map(|_| rotate::Grad {
            p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0)),
            angle: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let helix_batch: Vec<helix::Args> = (0..300)
        .map(|_| helix::Args {
            t: rng.uniform(-3.0, 3.0),
            pitch: rng.uniform(0.1, 1.0),
        })
        .collect();
    let helix_tangents: Vec<helix::Grad> = (0..300)
        .map(|_| helix::Grad {
            t: rng.uniform(-1.0, 1.0),
        })
        .collect();
    let c = compile_str(ROTATE_SRC).expect("compiles");
    let f = &c.lowered.primal;
    for d in [device(), &Device::cpu()] {
        let (values, derivatives) = rotate::kernel(d).jvp(&batch, &tangents).expect("launch");
        let (jv, jj) = rotate::kernel(d)
            .value_and_jacobian(&batch)
            .expect("launch");
        for (i, (a, t)) in batch.iter().zip(&tangents).enumerate() {
            let x: Vec<f64> = a.p.iter().chain([&a.angle]).map(|v| *v as f64).collect();
            let dir: Vec<f64> = t.p.iter().chain([&t.angle]).map(|v| *v as f64).collect();
            let at = |s: f64| -> Vec<f64> {
                let y: Vec<f64> = x.iter().zip(&dir).map(|(x, t)| x + s * t).collect();
                interp::eval(f, &y)
            };
            let (plus, minus) = (at(1e-5), at(-1e-5));
            let cs: [f64; 3] = std::array::from_fn(|_| rng.uniform(-1.0, 1.0) as f64);
            let (mut c_jt, mut jtc_t) = (0.0, 0.0);
            for k in 0..3 {
                let cd = (plus[k] - minus[k]) / 2e-5;
                assert!(
                    close(derivatives[i][k] as f64, cd, 2e-3),
                    "{k}: {} vs {cd}",
                    derivatives[i][k]
                );
                // Two kernels: a driver may contract their products into FMAs differently.
                assert!(
                    close(values[i][k] as f64, jv[i][k] as f64, 1e-6),
                    "the tangent kernel's value {} vs {}",
                    values[i][k],
                    jv[i][k]
                );
                let row = [jj[i][k].p[0], jj[i][k].p[1], jj[i][k].p[2], jj[i][k].angle];
                c_jt += cs[k] * derivatives[i][k] as f64;
                jtc_t += cs[k]
                    * row
                        .iter()
                        .zip(&dir)
                        .map(|(j, t)| *j as f64 * t)
                        .sum::<f64>();
            }
            assert!(close(c_jt, jtc_t, 1e-5), "{c_jt} vs {jtc_t}");
        }
        let (hv, hd) = helix::kernel(d)
            .jvp(&helix_batch, &helix_tangents)
            .expect("launch");
        let (_, hj) = helix::kernel(d)
            .value_and_jacobian(&helix_batch)
            .expect("launch");
        for i in 0..helix_batch.len() {
            let (v, _) = helix::value_and_jacobian(&helix_batch[i]);
            for k in 0..4 {
                assert!(close(hv[i][k] as f64, v[k] as f64, 2e-5));
                let want = hj[i][k].t * helix_tangents[i].t;
                assert!(close(hd[i][k] as f64, want as f64, 1e-5), "{k}");
            }
        }
        let short = rotate::kernel(d).jvp(&batch, &tangents[1..]);
        assert!(
            matches!(short, Err(gradfuse::Error::ShapeMismatch { .. })),
            "{short:?}"
        );
    }
}

#[test]
fn jacobian_kernels_are_valid_and_snapshotted() {
    for (name, src) in [
        ("polar_jacobian", polar::WGSL_JACOBIAN),
        ("helix_jacobian", helix::WGSL_JACOBIAN),
        ("rotate_forward", rotate::WGSL_FORWARD),
        ("rotate_tangent", rotate::WGSL_TANGENT),
        ("rotate_jacobian_gathered", rotate::WGSL_JACOBIAN_GATHERED),
    ] {
        common::validate_wgsl(name, src);
        insta::assert_snapshot!(name, src);
    }
}

/// Jacobian blocks over resident buffers: points gathered from a block through an index
/// with repeats (and rows no element reads), angles per element, and the same batch laid
/// out per element (`value_and_jacobian_to`); each element's values and block against
/// central differences, on the GPU and the CPU device.
#[test]
fn resident_and_gathered_jacobian_blocks() {
    let (rows, n) = (40usize, 700usize);
    let mut rng = Rng(43);
    let points: Vec<[f32; 3]> = (0..rows)
        .map(|_| std::array::from_fn(|_| rng.uniform(-1.0, 1.0)))
        .collect();
    let entries: Vec<u32> = (0..n).map(|_| (rng.next_u64() % 37) as u32).collect();
    let angles: Vec<f32> = (0..n).map(|_| rng.uniform(-3.0, 3.0)).collect();
    let per_element: Vec<rotate::Args> = (0..n)
        .map(|e| rotate::Args {
            p: points[entries[e] as usize],
            angle: angles[e],
        })
        .collect();
    for d in [device(), &Device::cpu()] {
        let (block, angle) = (d.buffer(&points).unwrap(), d.buffer(&angles).unwrap());
        let index = d.index(&entries, rows).unwrap();
        let args = d.buffer(&per_element).unwrap();
        let values = [
            d.zeros::<[f32; 3]>(n).unwrap(),
            d.zeros::<[f32; 3]>(n).unwrap(),
        ];
        let blocks = [
            d.zeros::<rotate::Jacobian>(n).unwrap(),
            d.zeros::<rotate::Jacobian>(n).unwrap(),
        ];
        let only_values = d.zeros::<[f32; 3]>(n).unwrap();
        let sources = rotate::Sources {
            p: Source::Gather(&block, &index),
            angle: Source::Each(&angle),
        };
        let k = rotate::kernel(d);
        let mut rec = d.record();
        k.value_and_jacobian_gathered(&mut rec, &sources, &values[0], &blocks[0])
            .unwrap();
        k.value_and_jacobian_to(&mut rec, &args, &values[1], &blocks[1])
            .unwrap();
        k.value_gathered(&mut rec, &sources, &only_values).unwrap();
        rec.submit().unwrap();
        let only_values = d.read(&only_values).unwrap();
        for (v, j) in values.iter().zip(&blocks) {
            let (v, j) = (d.read(v).unwrap(), d.read(j).unwrap());
            for (e, a) in per_element.iter().enumerate() {
                let x: Vec<f64> = a.p.iter().chain([&a.angle]).map(|v| *v as f64).collect();
                let (want_v, want_j) = oracle(ROTATE_SRC, &x);
                for r in 0..3 {
                    assert!(close(v[e][r] as f64, want_v[r], 2e-5), "{}", d.describe());
                    assert!(close(only_values[e][r] as f64, want_v[r], 2e-5));
                    let row = &j[e][r];
                    let got = [row.p[0], row.p[1], row.p[2], row.angle];
                    for w in 0..4 {
                        let ok = close(got[w] as f64, want_j[r][w], 2e-5);
                        assert!(ok, "{}: element {e}, d{r}/d{w}", d.describe());
                    }
                }
            }
        }
    }
}
