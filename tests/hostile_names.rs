//! A user may name arguments and locals after what the generated Rust and WGSL name their
//! own values (`args`, `grads`, `out`, `rec`, `v5`, `d_x`, `t_s`...): each function here
//! compiles in every version and agrees with central differences of the f64 interpreter,
//! on the GPU and on the CPU device.

mod common;

use common::{central_differences, device, rel_error};
use gradfuse::{Device, differentiable};
use gradfuse_shaders_gen::{compile_str, interp};

with_source! {
    STORAGE_NAMES_SRC,
    #[differentiable]
    pub fn storage_names(
        args: [f32; 2],
        grads: f32,
        tangent: f32,
        shared_tangent: f32,
        words: f32,
        #[constant] input: f32,
        #[shared] shared: [f32; 2],
    ) -> f32 {
        let v5 = args[0] * grads + tangent * shared_tangent - words;
        let mut out = 0.0;
        for i in 0..2 {
            let rec = shared[i] * args[i];
            let row = rec.sin() + v5;
            out += row * input;
        }
        let t = out * out;
        let tt = t + v5;
        let seg = tt.tanh();
        let sink = seg * 2.0;
        sink + grads
    }
}

with_source! {
    LOCAL_NAMES_SRC,
    #[differentiable]
    #[allow(clippy::too_many_arguments)]
    pub fn local_names(a: f32, b: f32, d: f32, g: f32, i: f32, j: f32, k: f32, v: f32) -> f32 {
        let x = a * b + d;
        let d_x = x.sin() * g;
        let t_x = d_x + i * j;
        let s = t_x.exp() - k;
        let d_s = s * v;
        let t_s = d_s.cos();
        let rows = t_s + x;
        let st = rows * rows;
        st.sqrt() + a
    }
}

/// An argument named like `hvp`'s direction.
#[differentiable]
pub fn direction_names(direction: f32, v: f32) -> f32 {
    (direction * v).sin() + direction * direction
}

with_source! {
    VECTOR_NAMES_SRC,
    #[differentiable]
    pub fn vector_names(tangent: f32, jacobians: f32, values: f32, rec: f32, v: f32) -> [f32; 2] {
        let out = tangent * jacobians + values.sin();
        [out * rec, (v + tangent).exp()]
    }
}

with_source! {
    ROUNDS_EVEN_SRC,
    #[differentiable]
    pub fn rounds_even(u: [f32; 65], x: f32) -> f32 {
        let e = x.sin();
        let at = (0.5 * x).cos();
        let first = x * x;
        let mut word = x + u[63] * e + u[64] * first;
        for k in 0..21 {
            word += u[3 * k] * e + u[3 * k + 1] * at + u[3 * k + 2] * first;
        }
        word
    }
}

with_source! {
    ROUNDS_ODD_SRC,
    #[differentiable]
    pub fn rounds_odd(u: [f32; 64], x: f32) -> f32 {
        let e = x.sin();
        let at = (0.5 * x).cos();
        let mut part = x;
        for k in 0..32 {
            part += u[2 * k] * e + u[2 * k + 1] * at;
        }
        part
    }
}

with_source! {
    HELPER_NAMES_SRC,
    #[differentiable]
    pub fn helper_names(x: f32, y: f32, #[shared] table: [f32; 1024]) -> f32 {
        let gf_reduce_distinct = 0.5 * y;
        let gf_slot_sum = x;
        let mut s = 0.0;
        for i in 0..1024 {
            s += table[i] * (gf_slot_sum + gf_reduce_distinct * (i as f32) * 0.001);
        }
        s.tanh()
    }
}

/// The value and the gradient in every word of the f64 interpreter of `src` at `words`.
fn oracle(src: &str, words: &[f64]) -> (f64, Vec<f64>) {
    let all: Vec<usize> = (0..words.len()).collect();
    central_differences(src, words, &all)
}

#[test]
fn storage_names_compile_and_differentiate() {
    let batch = vec![
        storage_names::Args {
            args: [0.3, -0.7],
            grads: 0.9,
            tangent: 0.2,
            shared_tangent: -0.5,
            words: 0.1,
            input: 1.3,
        },
        storage_names::Args {
            args: [-1.1, 0.2],
            grads: -0.4,
            tangent: 0.7,
            shared_tangent: 0.3,
            words: -0.2,
            input: 0.6,
        },
    ];
    let shared = storage_names::Shared { shared: [0.4, 0.8] };
    for dev in [device(), &Device::cpu()] {
        let (values, grads, shared_grad) = storage_names::kernel(dev)
            .value_and_grad(&batch, &shared)
            .expect("launch");
        let mut want_shared = [0.0f64; 2];
        for (e, a) in batch.iter().enumerate() {
            let words = [
                a.args[0],
                a.args[1],
                a.grads,
                a.tangent,
                a.shared_tangent,
                a.words,
                a.input,
                shared.shared[0],
                shared.shared[1],
            ]
            .map(f64::from);
            let (value, fd) = oracle(STORAGE_NAMES_SRC, &words);
            let what = format!("element {e} on {}", dev.describe());
            assert!(
                rel_error(&[values[e] as f64], &[value], 1.0) < 1e-5,
                "value, {what}"
            );
            let g = &grads[e];
            let g = [
                g.args[0],
                g.args[1],
                g.grads,
                g.tangent,
                g.shared_tangent,
                g.words,
            ];
            let g = g.map(f64::from);
            assert!(rel_error(&g, &fd[..6], 1e-2) < 1e-3, "gradient, {what}");
            want_shared[0] += fd[7];
            want_shared[1] += fd[8];
        }
        let got = shared_grad.shared.map(f64::from);
        assert!(
            rel_error(&got, &want_shared, 1e-2) < 1e-3,
            "shared gradient"
        );
    }
}

#[test]
fn local_names_compile_and_differentiate() {
    let batch: Vec<local_names::Args> = (0..3)
        .map(|e| {
            let t = 0.1 * e as f32;
            local_names::Args {
                a: 0.3 + t,
                b: -0.5 + t,
                d: 0.7,
                g: 1.1 - t,
                i: 0.2,
                j: -0.9 + t,
                k: 0.4,
                v: 0.8 - t,
            }
        })
        .collect();
    for dev in [device(), &Device::cpu()] {
        let (values, grads) = local_names::kernel(dev)
            .value_and_grad(&batch)
            .expect("launch");
        for (e, a) in batch.iter().enumerate() {
            let words = [a.a, a.b, a.d, a.g, a.i, a.j, a.k, a.v].map(f64::from);
            let (value, fd) = oracle(LOCAL_NAMES_SRC, &words);
            let what = format!("element {e} on {}", dev.describe());
            assert!(
                rel_error(&[values[e] as f64], &[value], 1.0) < 1e-5,
                "value, {what}"
            );
            let g = grads[e];
            let got = [g.a, g.b, g.d, g.g, g.i, g.j, g.k, g.v].map(f64::from);
            assert!(rel_error(&got, &fd, 1e-2) < 1e-3, "gradient, {what}");
        }
    }
}

/// `hvp` took its direction as `v`, and `local_names` has an argument named `v`: its
/// binding shadowed the direction, and the module did not compile. The direction is now
/// `direction`, a name the generated code keeps for itself: `direction_names` takes it.
#[test]
fn hessian_vector_products_beside_an_argument_named_v() {
    use gradfuse::bytemuck::{cast, cast_ref};
    let args = local_names::Args {
        a: 0.3,
        b: -0.5,
        d: 0.7,
        g: 1.1,
        i: 0.2,
        j: -0.9,
        k: 0.4,
        v: 0.8,
    };
    let grad_at = |w: usize, h: f32| {
        let mut words: [f32; 8] = cast(args);
        words[w] += h;
        let (_, g) = local_names::value_and_grad(cast_ref(&words));
        cast::<_, [f32; 8]>(g).map(f64::from)
    };
    for w in 0..8 {
        let mut unit = [0.0f32; 8];
        unit[w] = 1.0;
        let hv = cast::<_, [f32; 8]>(local_names::hvp(&args, cast_ref(&unit))).map(f64::from);
        let h = 1e-3;
        let (plus, minus) = (grad_at(w, h), grad_at(w, -h));
        let fd: Vec<f64> = (0..8)
            .map(|k| (plus[k] - minus[k]) / (2.0 * h as f64))
            .collect();
        assert!(
            rel_error(&hv, &fd, 1e-1) < 1e-2,
            "column {w}: {hv:?} vs {fd:?}"
        );
    }
}

#[test]
fn vector_names_compile_and_differentiate() {
    let batch = vec![
        vector_names::Args {
            tangent: 0.3,
            jacobians: -1.2,
            values: 0.5,
            rec: 0.9,
            v: -0.1,
        };
        3
    ];
    let c = compile_str(VECTOR_NAMES_SRC).expect("the source compiles");
    let f = &c.lowered.primal;
    for dev in [device(), &Device::cpu()] {
        let (values, jacobians) = vector_names::kernel(dev)
            .value_and_jacobian(&batch)
            .expect("launch");
        for (e, a) in batch.iter().enumerate() {
            let words = [a.tangent, a.jacobians, a.values, a.rec, a.v].map(f64::from);
            let want = interp::eval(f, &words);
            let got = values[e].map(f64::from);
            assert!(
                rel_error(&got, &want, 1.0) < 1e-5,
                "values on {}",
                dev.describe()
            );
            for (k, row) in jacobians[e].iter().enumerate() {
                let fd: Vec<f64> = (0..5)
                    .map(|w| {
                        let h = 1e-6;
                        let (mut plus, mut minus) = (words, words);
                        plus[w] += h;
                        minus[w] -= h;
                        (interp::eval(f, &plus)[k] - interp::eval(f, &minus)[k]) / (2.0 * h)
                    })
                    .collect();
                let got = [row.tangent, row.jacobians, row.values, row.rec, row.v].map(f64::from);
                assert!(
                    rel_error(&got, &fd, 1e-2) < 1e-3,
                    "row {k} on {}",
                    dev.describe()
                );
            }
        }
    }
}

#[test]
fn an_argument_named_like_the_direction_of_hvp() {
    let args = direction_names::Args {
        direction: 0.6,
        v: -1.3,
    };
    let (x, y) = (0.6f64, -1.3f64);
    // f = sin(x y) + x^2: its Hessian, by hand.
    let c = (x * y).cos();
    let s = (x * y).sin();
    let hessian = [
        [2.0 - y * y * s, c - x * y * s],
        [c - x * y * s, -x * x * s],
    ];
    for (w, row) in hessian.iter().enumerate() {
        let mut unit = [0.0f32; 2];
        unit[w] = 1.0;
        let dir = gradfuse::bytemuck::cast_ref(&unit);
        let hv = gradfuse::bytemuck::cast::<_, [f32; 2]>(direction_names::hvp(&args, dir));
        let hv = hv.map(f64::from);
        assert!(
            rel_error(&hv, row, 1e-2) < 1e-5,
            "column {w}: {hv:?} vs {row:?}"
        );
    }
}

/// The gradient words of `batch` (rows of `words` words: `u` then `x`) on `dev`, each row
/// against central differences of the f64 interpreter of `src`.
fn check_rounds<A: gradfuse::bytemuck::Pod, G: gradfuse::bytemuck::Pod>(
    (src, words): (&str, usize),
    batch: &[A],
    launch: impl Fn(&Device, &[A]) -> (Vec<f32>, Vec<G>),
) {
    use gradfuse::bytemuck::cast_slice;
    for dev in [device(), &Device::cpu()] {
        let (values, grads) = launch(dev, batch);
        let rows: &[f32] = cast_slice(batch);
        let got_rows: &[f32] = cast_slice(&grads);
        for e in [0, 1, 37, 64, 65, batch.len() - 1] {
            let w: Vec<f64> = rows[e * words..(e + 1) * words]
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            let (value, fd) = oracle(src, &w);
            let what = format!("element {e} on {}", dev.describe());
            assert!(
                rel_error(&[values[e] as f64], &[value], 1.0) < 1e-5,
                "value, {what}: {} vs {value}",
                values[e]
            );
            let got: Vec<f64> = got_rows[e * words..(e + 1) * words]
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            assert!(
                rel_error(&got, &fd, 1e-2) < 1e-3,
                "gradient, {what}: {got:?} vs {fd:?}"
            );
        }
    }
}

/// Gradients of many words go out through workgroup memory in rounds of elements, and the
/// stores declare where a round's element writes (`grads_at`; `grads_e` where the width is
/// even and its words sit rotated): locals of the plain names `at`, `e`, `first`, `word`
/// and `part` whose values are gradient words were once shadowed by them, and 66-word
/// rows (even, without a `vec4` view) are written rotated. 70 elements: a round of 64 and
/// part of the next.
#[test]
fn gradient_words_named_like_the_stores_locals() {
    assert!(
        rounds_even::WGSL_ADJOINT.contains("let grads_e = "),
        "rotated rounds"
    );
    assert!(
        rounds_odd::WGSL_ADJOINT.contains("let grads_at = (lid % "),
        "rounds"
    );
    let x = |e: usize| 0.3 + 0.01 * e as f32;
    let u = |e: usize, k: usize| ((e * 7 + k * 3) % 11) as f32 * 0.1 + 0.1;
    let even: Vec<rounds_even::Args> = (0..70)
        .map(|e| rounds_even::Args {
            u: std::array::from_fn(|k| u(e, k)),
            x: x(e),
        })
        .collect();
    check_rounds((ROUNDS_EVEN_SRC, 66), &even, |dev, b| {
        rounds_even::kernel(dev).value_and_grad(b).expect("launch")
    });
    let odd: Vec<rounds_odd::Args> = (0..70)
        .map(|e| rounds_odd::Args {
            u: std::array::from_fn(|k| u(e, k)),
            x: x(e),
        })
        .collect();
    check_rounds((ROUNDS_ODD_SRC, 65), &odd, |dev, b| {
        rounds_odd::kernel(dev).value_and_grad(b).expect("launch")
    });
}

/// Locals named like the kernels' reduction helpers (`gf_reduce_distinct`, the sum of a
/// group of trips each adding a shared word of its own, and `gf_slot_sum`): renamed, and
/// the value, gradient and shared gradient agree with central differences.
#[test]
fn locals_named_like_the_reduction_helpers() {
    let batch = [
        helper_names::Args { x: 0.4, y: -0.3 },
        helper_names::Args { x: -0.2, y: 0.7 },
    ];
    let shared = helper_names::Shared {
        table: std::array::from_fn(|k| ((k % 13) as f32 - 6.0) * 1e-3),
    };
    let which = [0, 1, 2, 2 + 511, 2 + 1023];
    for dev in [device(), &Device::cpu()] {
        let (values, grads, sums) = helper_names::kernel(dev)
            .value_and_grad(&batch, &shared)
            .expect("launch");
        let mut want_sums = [0.0f64; 3];
        for (e, a) in batch.iter().enumerate() {
            let mut words = vec![f64::from(a.x), f64::from(a.y)];
            words.extend(shared.table.iter().map(|&w| f64::from(w)));
            let (value, fd) = central_differences(HELPER_NAMES_SRC, &words, &which);
            let what = format!("element {e} on {}", dev.describe());
            assert!((f64::from(values[e]) - value).abs() < 1e-5, "value, {what}");
            let got = [grads[e].x, grads[e].y].map(f64::from);
            assert!(rel_error(&got, &fd[..2], 1e-2) < 1e-3, "gradient, {what}");
            for (w, d) in want_sums.iter_mut().zip(&fd[2..]) {
                *w += d;
            }
        }
        let got = [sums.table[0], sums.table[511], sums.table[1023]].map(f64::from);
        assert!(
            rel_error(&got, &want_sums, 1e-2) < 1e-3,
            "shared gradient: {got:?} vs {want_sums:?}"
        );
    }
}
