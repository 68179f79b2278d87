//! Random functions with `#[shared]` arguments, compiled at run time by the macro's own
//! compiler, their adjoint kernels launched on the GPU with the shared gradient summed over
//! the batch: values, per-element gradients and the batch's shared gradient against the f64
//! interpreter's reverse mode. The hand-written tests pin one shape each; these cover the
//! paths a kernel that sums shared gradients takes on functions nobody chose: elements side
//! by side, gradients of 1 to 14 words stored directly, staged, or through the reduction's
//! stage, sums in registers or streamed, loops kept or unrolled.

mod common;

use common::Rng;
use common::shared_adjoint::check_shared_adjoint;
use gradfuse::Error;
use gradfuse_shaders_gen::compile_str;

/// A function of `m` element words and a layer of `t x m` shared weights plus `extra`
/// shared scalars, with a few random statements after the layer.
struct Program {
    src: String,
    m: usize,
    shared: usize,
}

/// One random statement's right-hand side over `a`, `b` (each a value in the domain where
/// every call is defined).
fn random_expr(rng: &mut Rng, a: &str, b: &str) -> String {
    match rng.next_u64() % 10 {
        0 => format!("{a} + {b}"),
        1 => format!("{a} * {b}"),
        2 => format!("{a} - {b} * 0.5"),
        3 => format!("({a}).sin()"),
        4 => format!("({a}).tanh() * {b}"),
        5 => format!("({a} * {a} + 1.0).ln()"),
        6 => format!("({a} * {a} + {b} * {b} + 0.5).sqrt()"),
        7 => format!("{a} / (1.0 + {b} * {b})"),
        8 => format!("if {a} > {b} {{ {a} * 0.7 }} else {{ ({b}).cos() }}"),
        _ => format!("({a}).atan2({b} + 2.0)"),
    }
}

/// The program of `seed`: `m` element words, a `t x m` layer of shared weights with a
/// transcendental per row, `extra` shared scalars mixed into random statements.
fn program(seed: u64, (m, t, extra): (usize, usize, usize)) -> Program {
    let mut rng = Rng(seed);
    let shared = t * m + extra;
    let mut body = format!(
        "let mut acc = 0.0;
        for j in 0..{t} {{
            let mut s = 0.0;
            for k in 0..{m} {{
                s += w[j * {m} + k] * x[k];
            }}
            acc += (s + 0.1 * (j as f32)).tanh();
        }}\n"
    );
    let mut vals: Vec<String> = vec!["acc".into()];
    for k in 0..m.min(4) {
        vals.push(format!("x[{k}]"));
    }
    for e in 0..extra {
        vals.push(format!("w[{}]", t * m + e));
    }
    for k in 0..4 + rng.next_u64() as usize % 8 {
        let n = vals.len();
        let a = vals[rng.next_u64() as usize % n].clone();
        let b = vals[rng.next_u64() as usize % n].clone();
        body.push_str(&format!("let v{k} = {};\n", random_expr(&mut rng, &a, &b)));
        vals.push(format!("v{k}"));
    }
    // Every element word reaches the result, so that each gradient word is exercised.
    let n = vals.len();
    let src = format!(
        "fn random_shared(x: [f32; {m}], #[shared] w: [f32; {shared}]) -> f32 {{\n{body}{} + {} + x[{}] * x[0]\n}}",
        vals[n - 1],
        vals[n - 2],
        m - 1
    );
    Program { src, m, shared }
}

/// [`check_shared_adjoint`] of `p`, its failures naming `seed` and the program.
fn check(seed: u64, p: &Program, n: usize, distinct: usize) -> Result<(), Error> {
    let label = format!("seed {seed}");
    check_shared_adjoint(
        &label,
        &p.src,
        (p.m, p.shared),
        (n, distinct),
        seed ^ 0x5eed,
    )
}

/// Shapes `(m, t, extra)`: element words 1 to 14 (odd counts past 8 through the reduction's
/// stage, 7 staged beside it), layers of a few to 480 shared words (past the sums a thread
/// keeps in registers, streamed).
const SHAPES: [(usize, usize, usize); 12] = [
    (1, 3, 2),
    (2, 5, 1),
    (3, 8, 0),
    (4, 2, 3),
    (5, 4, 1),
    (7, 3, 2),
    (8, 6, 0),
    (9, 2, 1),
    (11, 3, 0),
    (13, 2, 2),
    (14, 1, 1),
    (12, 40, 0),
];

#[test]
fn random_shared_adjoints_match_the_interpreter() {
    for (k, &shape) in SHAPES.iter().enumerate() {
        let seed = 0x5a4e_0000 + k as u64;
        let p = program(seed, shape);
        check(seed, &p, 3000, 3000).expect("launch");
    }
}

#[test]
fn random_shared_adjoints_over_several_runs_per_workgroup() {
    // Past 512 workgroups' worth each thread takes several runs, the last one part way.
    let n = 2 * 512 * 256 + 1001;
    for (k, &shape) in SHAPES.iter().enumerate().step_by(3) {
        let seed = 0x5a4e_1000 + k as u64;
        let p = program(seed, shape);
        check(seed, &p, n, 997).expect("launch");
    }
}

#[test]
fn the_shapes_take_every_path() {
    // Without this the shapes could drift away from the paths they are here to cover.
    let kernels: Vec<String> = (SHAPES.iter().enumerate())
        .map(|(k, &shape)| {
            let p = program(0x5a4e_0000 + k as u64, shape);
            compile_str(&p.src).expect("compiles").wgsl_reverse
        })
        .collect();
    let taken = |what: &str, needle: &str| {
        assert!(
            kernels.iter().any(|k| k.contains(needle)),
            "no shape's adjoint {what} (`{needle}`)"
        );
    };
    taken("computes 2 elements per thread", "nth += 2u");
    taken("stages its gradient beside the reduction", "grad_stage[");
    taken(
        "stores its gradient through the reduction's stage",
        "= reduce_stage[word",
    );
    taken("streams its shared gradient", "stage_count");
    taken("stores its gradient from registers", "grads[out_base");
}
