//! `#[shared]` arguments of functions written over f64: their batch sums reduced in f64 on
//! the device (the workgroup sums of registers, of arrays and of streamed words, the second
//! pass) and on the CPU fallback, against the sum of the CPU version's per-element shared
//! gradients in f64 and against central differences of the batch's summed value; the
//! tangent and Hessian kernels with shared words against their CPU versions; shared words
//! from a uniform buffer and, past its 64 KiB, from storage.

// Hessians are indexed by row and column side by side.
#![allow(clippy::needless_range_loop)]

mod common;

use common::{Rng, f64_devices};
use gradfuse::{bytemuck, differentiable};

/// Shared words summed per thread in registers.
#[differentiable]
pub fn affine64(x: [f64; 2], #[constant] t: f64, #[shared] w: [f64; 3], #[shared] b: f64) -> f64 {
    let y = (w[0] * x[0] + w[1] * x[1]).tanh() * w[2] + b;
    (y - t) * (y - t)
}

/// A 3-16-16-1 tanh network: 353 shared words, past the sums a thread keeps in registers,
/// so its gradient is streamed into the workgroup's sums as the loops compute it.
#[differentiable]
pub fn net64(
    #[constant] x: [f64; 3],
    #[constant] t: f64,
    #[shared] w1: [f64; 64],
    #[shared] w2: [f64; 272],
    #[shared] w3: [f64; 17],
) -> f64 {
    let mut h1 = [0.0; 16];
    for j in 0..16 {
        let mut s = w1[48 + j];
        for k in 0..3 {
            s += w1[j * 3 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 16];
    for j in 0..16 {
        let mut s = w2[256 + j];
        for k in 0..16 {
            s += w2[j * 16 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[16];
    for k in 0..16 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

/// 9,000 shared f64 words (72 KB, past a uniform buffer): read from storage, 300 of them
/// in a loop kept as a loop, whose gradient is streamed and kept by the words' owners.
#[differentiable]
pub fn lookup64(x: f64, #[shared] table: [f64; 9000]) -> f64 {
    let mut s = 0.0;
    for k in 0..300 {
        s += table[k * 30 + 7] * (x * (k as f64 * 0.01 + 1.0)).sin();
    }
    s * x
}

/// 70,000 shared words: more than the threads of a workgroup keep sums for, so the
/// streamed slots of the kept loop are added into the workgroup's row of partials.
#[differentiable]
pub fn wide64(x: f64, #[shared] table: [f64; 70000]) -> f64 {
    let mut s = 0.0;
    for k in 0..2000 {
        s += table[k * 35 + 3] * (x + 10.0 + k as f64 * 0.001);
    }
    s * s
}

/// The error of `got` against `want`, relative to `scale` (the sum of the absolute
/// values of the terms `want` sums: a sum's rounding is relative to them, not to itself).
fn err(got: f64, want: f64, scale: f64) -> f64 {
    (got - want).abs() / scale.max(1e-300)
}

/// Whether a per-element result is within 1e-12 of the CPU version's, relative to the
/// larger of it and one: the functions here sum terms of order one that cancel, and a
/// sum's rounding is relative to its terms.
fn close(got: f64, want: f64) -> bool {
    err(got, want, want.abs().max(1.0)) < 1e-12
}

/// The device's (or the CPU fallback's) shared gradient, against the CPU version's
/// per-element shared gradients summed here in f64 (with their absolute sums as scale),
/// each word within `tol`.
fn check_sum(what: &str, got: &[f64], per_element: &[Vec<f64>], tol: f64) {
    for (w, g) in got.iter().enumerate() {
        let want: f64 = per_element.iter().map(|p| p[w]).sum();
        let scale: f64 = per_element.iter().map(|p| p[w].abs()).sum();
        let e = err(*g, want, scale);
        assert!(e < tol, "{what}: shared word {w}: {g} vs {want} ({e:e})");
    }
}

#[test]
fn shared_gradients_in_registers_sum_in_f64() {
    let mut rng = Rng(81);
    let n = 3000;
    let args: Vec<affine64::Args> = (0..n)
        .map(|_| affine64::Args {
            x: [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64],
            t: rng.uniform(-0.5, 0.5) as f64,
        })
        .collect();
    let shared = affine64::Shared {
        w: [0.7, -1.3, 0.45],
        b: 0.1,
    };
    let mut per_element = Vec::new();
    let (mut want_v, mut want_g) = (Vec::new(), Vec::new());
    for a in &args {
        let (v, g, sg) = affine64::value_and_grad(a, &shared);
        want_v.push(v);
        want_g.push(g);
        per_element.push(bytemuck::cast::<_, [f64; 4]>(sg).to_vec());
    }
    // Central differences of the batch's summed value in each shared word.
    let total =
        |s: &affine64::Shared| -> f64 { args.iter().map(|a| affine64(a.x, a.t, s.w, s.b)).sum() };
    let words: [f64; 4] = bytemuck::cast(shared);
    for d in f64_devices() {
        let (v, g, sg) = affine64::kernel(d)
            .value_and_grad(&args, &shared)
            .expect("launch");
        let sg: [f64; 4] = bytemuck::cast(sg);
        check_sum(&d.describe(), &sg, &per_element, 1e-13);
        for e in 0..n {
            assert!(close(v[e], want_v[e]));
            let (a, b): ([f64; 2], [f64; 2]) = (bytemuck::cast(g[e]), bytemuck::cast(want_g[e]));
            for k in 0..2 {
                assert!(close(a[k], b[k]), "element {e}");
            }
        }
        for w in 0..4 {
            let h = 1e-6;
            let (mut up, mut down) = (words, words);
            up[w] += h;
            down[w] -= h;
            let fd = (total(&bytemuck::cast(up)) - total(&bytemuck::cast(down))) / (2.0 * h);
            assert!(
                err(sg[w], fd, fd.abs() + 1.0) < 1e-7,
                "word {w}: {} vs {fd}",
                sg[w]
            );
        }
    }
}

fn net_weights(rng: &mut Rng) -> net64::Shared {
    net64::Shared {
        w1: std::array::from_fn(|_| rng.uniform(-1.0, 1.0) as f64),
        w2: std::array::from_fn(|_| rng.uniform(-0.5, 0.5) as f64),
        w3: std::array::from_fn(|_| rng.uniform(-0.5, 0.5) as f64),
    }
}

fn net_args(rng: &mut Rng, n: usize) -> Vec<net64::Args> {
    (0..n)
        .map(|_| net64::Args {
            x: std::array::from_fn(|_| rng.uniform(-1.0, 1.0) as f64),
            t: rng.uniform(-0.5, 0.5) as f64,
        })
        .collect()
}

#[test]
fn streamed_network_gradients_sum_in_f64() {
    let mut rng = Rng(82);
    // Past one reducing launch's workgroups, so that threads take several elements.
    let n = 70_000;
    let args = net_args(&mut rng, n);
    let shared = net_weights(&mut rng);
    const W: usize = 64 + 272 + 17;
    let per_element: Vec<Vec<f64>> = args
        .iter()
        .map(|a| bytemuck::cast::<_, [f64; W]>(net64::value_and_grad(a, &shared).2).to_vec())
        .collect();
    let words: [f64; W] = bytemuck::cast(shared);
    let total = |w: &[f64; W]| -> f64 {
        let s: net64::Shared = bytemuck::cast(*w);
        args[..500]
            .iter()
            .map(|a| net64(a.x, a.t, s.w1, s.w2, s.w3))
            .sum()
    };
    let mut first = None;
    for d in f64_devices() {
        let k = net64::kernel(d);
        let (values, _, sg) = k.value_and_grad(&args, &shared).expect("launch");
        let sg: [f64; W] = bytemuck::cast(sg);
        check_sum(&d.describe(), &sg, &per_element, 1e-13);
        for (e, a) in args.iter().enumerate().step_by(97) {
            let want = net64(a.x, a.t, shared.w1, shared.w2, shared.w3);
            assert!(close(values[e], want));
        }
        // The same bits on a second run.
        let (_, _, again) = k.value_and_grad(&args, &shared).expect("launch");
        assert_eq!(bytemuck::cast::<_, [f64; W]>(again), sg);
        // The first 500 elements against central differences, a few words of each layer.
        let (_, _, part) = k.value_and_grad(&args[..500], &shared).expect("launch");
        let part: [f64; W] = bytemuck::cast(part);
        for w in [0, 30, 50, 63, 64, 200, 300, 335, 336, 345, 352] {
            let h = 1e-6;
            let (mut up, mut down) = (words, words);
            up[w] += h;
            down[w] -= h;
            let fd = (total(&up) - total(&down)) / (2.0 * h);
            let e = err(part[w], fd, fd.abs() + 1.0);
            assert!(e < 1e-7, "{}: word {w}: {} vs {fd}", d.describe(), part[w]);
        }
        first.get_or_insert(sg);
    }
}

#[test]
fn shared_tables_past_a_uniform_buffer_sum_in_f64() {
    // The tables and their gradients are values of 72 and 560 KB: a debug build's
    // temporaries need more than a test thread's stack.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(shared_tables)
        .expect("thread")
        .join()
        .expect("shared tables");
}

fn shared_tables() {
    let mut rng = Rng(83);
    let n = 5000;
    let xs: Vec<f64> = (0..n).map(|_| rng.uniform(-2.0, 2.0) as f64).collect();
    let mut table = Box::new(lookup64::Shared { table: [0.0; 9000] });
    for (k, t) in table.table.iter_mut().enumerate() {
        *t = ((k % 13) as f64 - 6.0) * 0.1;
    }
    let args: Vec<lookup64::Args> = xs.iter().map(|&x| lookup64::Args { x }).collect();
    let per_element: Vec<Vec<f64>> = args
        .iter()
        .map(|a| lookup64::value_and_grad(a, &table).2.table.to_vec())
        .collect();
    let mut wide = Box::new(wide64::Shared {
        table: [0.0; 70000],
    });
    for (k, t) in wide.table.iter_mut().enumerate() {
        *t = ((k % 5) as f64 - 2.0) * 0.3;
    }
    let wargs: Vec<wide64::Args> = xs[..1000].iter().map(|&x| wide64::Args { x }).collect();
    let wide_per_element: Vec<Vec<f64>> = wargs
        .iter()
        .map(|a| wide64::value_and_grad(a, &wide).2.table.to_vec())
        .collect();
    for d in f64_devices() {
        let (v, g, sg) = lookup64::kernel(d)
            .value_and_grad(&args, &table)
            .expect("launch");
        check_sum(&d.describe(), &sg.table, &per_element, 1e-13);
        for (e, a) in args.iter().enumerate() {
            let (wv, wg, _) = lookup64::value_and_grad(a, &table);
            assert!(
                close(v[e], wv),
                "{}: value {e}: {} vs {wv}",
                d.describe(),
                v[e]
            );
            assert!(
                close(g[e].x, wg.x),
                "{}: grad {e}: {} vs {}",
                d.describe(),
                g[e].x,
                wg.x
            );
        }
        let (_, _, sg) = wide64::kernel(d)
            .value_and_grad(&wargs, &wide)
            .expect("launch");
        check_sum(&d.describe(), &sg.table, &wide_per_element, 1e-13);
        // The words read: nonzero sums; the rest exactly zero.
        let read: Vec<usize> = (0..2000).map(|k| k * 35 + 3).collect();
        for (w, s) in sg.table.iter().enumerate() {
            assert_eq!(*s != 0.0, read.contains(&w), "word {w}: {s}");
        }
    }
}

#[test]
fn tangents_and_hessians_with_shared_f64_words() {
    let mut rng = Rng(84);
    let n = 600;
    let args = net_args(&mut rng, n);
    let shared = net_weights(&mut rng);
    let dw: net64::SharedGrad = bytemuck::cast(net_weights(&mut rng));
    let aargs: Vec<affine64::Args> = (0..n)
        .map(|_| affine64::Args {
            x: [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64],
            t: rng.uniform(-0.5, 0.5) as f64,
        })
        .collect();
    let ashared = affine64::Shared {
        w: [0.3, 1.1, -0.8],
        b: 0.25,
    };
    let atangents: Vec<affine64::Grad> = (0..n)
        .map(|_| affine64::Grad {
            x: [rng.uniform(-1.0, 1.0) as f64, rng.uniform(-1.0, 1.0) as f64],
        })
        .collect();
    let ashared_tangent = affine64::SharedGrad {
        w: [0.5, -0.25, 1.0],
        b: -2.0,
    };
    for d in f64_devices() {
        let (values, dirs) = net64::kernel(d)
            .jvp(&args, &shared, &vec![net64::Grad {}; n], &dw)
            .expect("jvp");
        for (e, a) in args.iter().enumerate() {
            let (v, dir) = net64::jvp(a, &shared, &net64::Grad {}, &dw);
            assert!(
                close(values[e], v),
                "{}: value {e}: {} vs {v}",
                d.describe(),
                values[e]
            );
            assert!(
                close(dirs[e], dir),
                "{}: jvp {e}: {} vs {dir}",
                d.describe(),
                dirs[e]
            );
        }
        let (values, dirs) = affine64::kernel(d)
            .jvp(&aargs, &ashared, &atangents, &ashared_tangent)
            .expect("jvp");
        let (hv, hg, hessians) = affine64::kernel(d)
            .value_grad_hessian(&aargs, &ashared)
            .expect("hessian");
        for (e, a) in aargs.iter().enumerate() {
            let (v, dir) = affine64::jvp(a, &ashared, &atangents[e], &ashared_tangent);
            assert!(
                close(values[e], v),
                "{}: value {e}: {} vs {v}",
                d.describe(),
                values[e]
            );
            assert!(
                close(dirs[e], dir),
                "{}: jvp {e}: {} vs {dir}",
                d.describe(),
                dirs[e]
            );
            let (wv, wg, wh) = affine64::value_grad_hessian(a, &ashared);
            assert!(close(hv[e], wv));
            let (gg, ww): ([f64; 2], [f64; 2]) = (bytemuck::cast(hg[e]), bytemuck::cast(wg));
            let (gh, whh): ([f64; 4], [f64; 4]) = (bytemuck::cast(hessians[e]), bytemuck::cast(wh));
            for k in 0..2 {
                assert!(close(gg[k], ww[k]), "grad {e}");
            }
            for k in 0..4 {
                assert!(close(gh[k], whh[k]), "H {e}");
            }
            assert_eq!(gh[1].to_bits(), gh[2].to_bits(), "symmetric");
        }
    }
}

/// Resident launches with shared f64 words in buffers give the host launches' bits.
#[test]
fn resident_shared_f64_launches_match_host_launches() {
    let mut rng = Rng(85);
    let args = net_args(&mut rng, 3000);
    let shared = net_weights(&mut rng);
    for d in f64_devices() {
        let k = net64::kernel(d);
        let a = d.buffer(&args).expect("args");
        let s = d.buffer(std::slice::from_ref(&shared)).expect("shared");
        let values = d.zeros::<f64>(args.len()).expect("values");
        let sg = d.zeros::<net64::SharedGrad>(1).expect("shared grad");
        let mut rec = d.record();
        k.value_and_grad_to(&mut rec, &a, &s, &values, &sg)
            .expect("record");
        rec.submit().expect("submit");
        let (want_v, _, want_sg) = k.value_and_grad(&args, &shared).expect("host launch");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&d.read(&values).expect("read")), bits(&want_v));
        let got: Vec<net64::SharedGrad> = d.read(&sg).expect("read");
        assert_eq!(got[0], want_sg, "{}", d.describe());
    }
}

/// The functions above take the paths they are meant to test: shared words from a
/// uniform buffer of `vec2<f64>` or from storage, sums in registers, streamed sums kept in
/// workgroup memory, by their owners or added into the workgroup's row; and every kernel
/// validates.
#[test]
fn each_reduction_path_is_exercised() {
    let uniform = "var<uniform> shared_args: array<vec2<f64>";
    let storage = "var<storage, read> shared_args: array<f64>";
    assert!(affine64::WGSL_ADJOINT.contains(uniform));
    assert!(!affine64::WGSL_ADJOINT.contains("stage_words"));
    assert!(net64::WGSL_ADJOINT.contains(uniform));
    assert!(net64::WGSL_ADJOINT.contains("stage_words: array<u32, 16>"));
    assert!(net64::WGSL_ADJOINT.contains("var<workgroup> word_sums: array<f64, 353>"));
    assert!(lookup64::WGSL_ADJOINT.contains(storage));
    assert!(lookup64::WGSL_ADJOINT.contains("owned_sums"));
    assert!(wide64::WGSL_ADJOINT.contains(storage));
    assert!(!wide64::WGSL_ADJOINT.contains("owned_sums"));
    assert!(wide64::WGSL_ADJOINT.contains("shared_partials[group * 70000u + word] +="));
    for (name, src) in [
        ("affine64 adjoint", affine64::WGSL_ADJOINT),
        ("affine64 tangent", affine64::WGSL_TANGENT),
        ("affine64 hessian", affine64::WGSL_HESSIAN),
        ("affine64 reduce", affine64::WGSL_REDUCE),
        ("net64 adjoint", net64::WGSL_ADJOINT),
        ("lookup64 adjoint", lookup64::WGSL_ADJOINT),
        ("wide64 adjoint", wide64::WGSL_ADJOINT),
    ] {
        common::validate_wgsl_f64(name, src);
    }
}

/// A table read a word a trip in a loop of 512 trips, in f64: its value and tangent kernels
/// run the loop by pairs of trips (a uniform element holds two f64 words, `quads.rs`).
#[differentiable]
pub fn table64(x: f64, y: f64, #[shared] t: [f64; 512]) -> f64 {
    let mut s = 0.0;
    let mut p = x;
    for i in 0..512 {
        s += t[i] * p;
        p = p * y + 0.001;
    }
    s.tanh()
}

#[test]
fn an_f64_table_read_by_pairs_of_trips_matches_the_cpu() {
    assert!(table64::WGSL_FORWARD.contains("_quad") && table64::WGSL_TANGENT.contains("_quad"));
    assert!(
        table64::WGSL_TANGENT.contains("i32 = 2i * "),
        "two trips a uniform element"
    );
    let mut rng = Rng(61);
    let shared = table64::Shared {
        t: std::array::from_fn(|_| f64::from(rng.uniform(-1e-3, 1e-3))),
    };
    let dt = table64::SharedGrad {
        t: std::array::from_fn(|_| f64::from(rng.uniform(-1.0, 1.0))),
    };
    let args: Vec<table64::Args> = (0..500)
        .map(|_| table64::Args {
            x: f64::from(rng.uniform(-1.0, 1.0)),
            y: f64::from(rng.uniform(-0.9, 0.9)),
        })
        .collect();
    let tangents: Vec<table64::Grad> = (0..500)
        .map(|_| table64::Grad {
            x: f64::from(rng.uniform(-1.0, 1.0)),
            y: f64::from(rng.uniform(-1.0, 1.0)),
        })
        .collect();
    for dev in f64_devices() {
        let kernel = table64::kernel(dev);
        let values = kernel.value(&args, &shared).expect("launch");
        let (jv, dirs) = kernel.jvp(&args, &shared, &tangents, &dt).expect("launch");
        for (e, a) in args.iter().enumerate() {
            let (v, d) = table64::jvp(a, &shared, &tangents[e], &dt);
            let what = format!("element {e} on {}", dev.describe());
            assert!(
                (values[e] - v).abs() <= 1e-12 * v.abs().max(1.0),
                "value, {what}"
            );
            assert!(
                (jv[e] - v).abs() <= 1e-12 * v.abs().max(1.0),
                "jvp value, {what}"
            );
            assert!(
                (dirs[e] - d).abs() <= 1e-11 * d.abs().max(1.0),
                "derivative, {what}"
            );
        }
    }
}

/// Seven f64 gradient words beside a shared sum: past the 4 f64 words a lane of the
/// reduction's stage holds, stored through that stage in rounds of 128 elements
/// (`abi::reduce_stage_rounds`).
#[differentiable]
pub fn seven64(p: [f64; 7], #[shared] s: f64) -> f64 {
    let mut acc = 0.0;
    for k in 0..7 {
        acc += (p[k] * s).sin() * (k as f64 + 1.0);
    }
    acc + p[0] * p[6]
}

#[test]
fn seven_f64_gradient_words_go_through_the_reduction_stage() {
    assert!(seven64::WGSL_ADJOINT.contains("2 rounds of 128 elements"));
    let mut rng = Rng(82);
    let shared = seven64::Shared { s: 0.9 };
    // One run per workgroup, and several whose last ends part way.
    for n in [3000, 2 * 512 * 256 + 1001] {
        let args: Vec<seven64::Args> = (0..n)
            .map(|_| seven64::Args {
                p: std::array::from_fn(|_| rng.uniform(-1.0, 1.0) as f64),
            })
            .collect();
        let mut per_element = Vec::new();
        let (mut want_v, mut want_g) = (Vec::new(), Vec::new());
        for a in &args {
            let (v, g, sg) = seven64::value_and_grad(a, &shared);
            want_v.push(v);
            want_g.push(g);
            per_element.push(vec![sg.s]);
        }
        for d in f64_devices() {
            let (v, g, sg) = seven64::kernel(d)
                .value_and_grad(&args, &shared)
                .expect("launch");
            check_sum(&d.describe(), &[sg.s], &per_element, 1e-12);
            for e in 0..n {
                assert!(close(v[e], want_v[e]), "element {e}");
                for k in 0..7 {
                    assert!(close(g[e].p[k], want_g[e].p[k]), "element {e} word {k}");
                }
            }
        }
    }
}
