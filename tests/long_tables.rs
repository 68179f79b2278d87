//! A `#[shared]` table read in a loop unrolled in full: its 256 gradient words would be
//! summed per thread in registers, but its reverse pass reads every value of its forward
//! one as well, and the two do not fit a thread's registers together
//! (`abi::MAX_REGISTER_SUMS_WITH_VALUES`): the adjoint streams the shared gradient, and it
//! is the batch's sum of the CPU reverse mode's, the same bits on every launch.
//!
//! Tables read in loops too long to unroll: their reverse loops stage a few words a trip,
//! at slots fixed by the trip, a group of trips to one workgroup sum (`streams::TripSlots`):
//! one word a trip into workgroup sums (`table_1024`), two words a trip, each word added
//! by two trips (`pairs_1024`: repeated words in one sum), and one word a trip into the
//! owners' sums in groups of 8 trips (`table_4096`).
//!
//! The value and tangent kernels of such loops read their table words by quads of trips
//! (`quads.rs`): one uniform element a quad, each trip its lane.

mod common;

use common::{Rng, central_differences, device};
use gradfuse::differentiable;
use gradfuse_shaders_gen::{ad, compile_str, interp};

with_source! {
    LONG_TABLE_SRC,
    #[differentiable]
    pub fn long_table(x: f32, y: f32, #[shared] table: [f32; 256]) -> f32 {
        let mut s = 0.0;
        let mut p = x;
        for i in 0..256 {
            s += table[i] * p;
            p = p * y + 0.01 * (i as f32);
        }
        s.tanh()
    }
}

#[differentiable]
pub fn table_264(x: f32, y: f32, #[shared] table: [f32; 264]) -> f32 {
    let mut s = 0.0;
    let mut p = x;
    for i in 0..264 {
        s += table[i] * p;
        p = p * y + 0.01 * (i as f32);
    }
    s.tanh()
}

with_source! {
    TABLE_1024_SRC,
    #[differentiable]
    pub fn table_1024(x: f32, y: f32, #[shared] table: [f32; 1024]) -> f32 {
        let mut s = 0.0;
        let mut p = x;
        for i in 0..1024 {
            s += table[i] * p;
            p = p * y + 0.01 * (i as f32);
        }
        s.tanh()
    }
}

with_source! {
    PAIRS_1024_SRC,
    #[differentiable]
    pub fn pairs_1024(x: f32, y: f32, #[shared] t: [f32; 1025]) -> f32 {
        let mut s = 0.0;
        let mut p = x;
        for i in 0..1024 {
            s += t[i] * p + t[i + 1] * p * y;
            p = p * y + 0.01;
        }
        s.tanh()
    }
}

with_source! {
    TABLE_4096_SRC,
    #[differentiable]
    pub fn table_4096(x: f32, y: f32, #[shared] table: [f32; 4096]) -> f32 {
        let mut s = 0.0;
        for i in 0..4096 {
            s += table[i] * (x * (i as f32) * 0.001 + y).sin();
        }
        s.tanh()
    }
}

with_source! {
    OFFSET_TABLE_SRC,
    #[differentiable]
    pub fn offset_table(x: f32, y: f32, #[shared] t: [f32; 1024]) -> f32 {
        let mut s = 0.0;
        let mut p = x;
        for i in 8..1032 {
            s += t[i - 8] * p;
            p = p * y + 0.01;
        }
        s.tanh()
    }
}

/// The GPU's values and directional derivatives of `batch` against the CPU's `jvp`, one
/// element's derivative against central differences of `src` along its direction (the
/// element's words `(x, y)` and the table `table`, tangents `(tx, ty)` and `dt`).
fn check_quads(
    src: &str,
    (batch, table): (&[[f32; 2]], &[f32]),
    (tangents, dt): (&[[f32; 2]], &[f32]),
    cpu: impl Fn(usize) -> (f32, f32),
    gpu: (Vec<f32>, Vec<f32>),
) {
    let (values, derivatives) = gpu;
    for e in 0..batch.len() {
        let (v, d) = cpu(e);
        assert!(
            (values[e] - v).abs() <= 1e-5 * v.abs().max(1.0),
            "value {e}"
        );
        assert!(
            (derivatives[e] - d).abs() <= 1e-4 * d.abs().max(1.0),
            "derivative {e}: {} vs {d}",
            derivatives[e]
        );
    }
    let at = |h: f64| -> Vec<f64> {
        let (e, t) = (batch[0], tangents[0]);
        let mut w = vec![
            f64::from(e[0]) + h * f64::from(t[0]),
            f64::from(e[1]) + h * f64::from(t[1]),
        ];
        w.extend(
            table
                .iter()
                .zip(dt)
                .map(|(a, b)| f64::from(*a) + h * f64::from(*b)),
        );
        w
    };
    let f = compile_str(src).expect("compiles").lowered.primal;
    let h = 1e-4;
    let fd = (interp::eval(&f, &at(h))[0] - interp::eval(&f, &at(-h))[0]) / (2.0 * h);
    let got = f64::from(derivatives[0]);
    assert!(
        (got - fd).abs() <= 1e-3 * fd.abs().max(1e-2),
        "directional derivative: {got} vs {fd}"
    );
}

#[test]
fn tables_read_in_loops_run_by_quads_in_value_and_tangent_kernels() {
    for wgsl in [
        table_1024::WGSL_FORWARD,
        table_1024::WGSL_TANGENT,
        offset_table::WGSL_TANGENT,
    ] {
        assert!(wgsl.contains("_quad"), "no quads");
    }
    // `t[i + 1]` starts no uniform element: a trip that reads it is not run by quads.
    assert!(!pairs_1024::WGSL_TANGENT.contains("_quad"));
    // The offset table's quads start two elements past the table's first.
    assert!(offset_table::WGSL_TANGENT.contains("_quad - 2i)]"));
    let (batch, table) = table_batch(8, 1000, (1025, 5e-4));
    let (tangents, dt) = table_batch(9, 1000, (1025, 1.0));
    // Each function's GPU jvp (and the table's values) against its CPU jvp and central
    // differences, on the batch's elements and the table's first `$words` words.
    macro_rules! check_function {
        ($f:ident, $src:ident, $table:ident, $words:literal) => {{
            let shared = $f::Shared {
                $table: table[..$words].try_into().expect("the table's words"),
            };
            let d = $f::SharedGrad {
                $table: dt[..$words].try_into().expect("the table's words"),
            };
            let args: Vec<_> = batch
                .iter()
                .map(|b| $f::Args { x: b[0], y: b[1] })
                .collect();
            let t: Vec<_> = tangents
                .iter()
                .map(|b| $f::Grad { x: b[0], y: b[1] })
                .collect();
            let kernel = $f::kernel(device());
            let gpu = kernel.jvp(&args, &shared, &t, &d).expect("launch");
            assert_eq!(kernel.value(&args, &shared).expect("launch"), gpu.0);
            check_quads(
                $src,
                (&batch, &table[..$words]),
                (&tangents, &dt[..$words]),
                |e| $f::jvp(&args[e], &shared, &t[e], &d),
                gpu,
            );
        }};
    }
    check_function!(table_1024, TABLE_1024_SRC, table, 1024);
    check_function!(pairs_1024, PAIRS_1024_SRC, t, 1025);
    check_function!(offset_table, OFFSET_TABLE_SRC, t, 1024);
}

/// Checks a table function's streamed batch sums on the GPU: its adjoint stages by groups
/// of trips (`wgsl`); one element's CPU gradient in a few table words against central
/// differences of the f64 interpreter of `src`; the GPU's batch sums against the CPU
/// reverse mode's gradients summed in f64, and the same bits on a second launch.
fn check_grouped_table(
    (src, wgsl, words): (&str, &str, usize),
    elements: &[[f32; 2]],
    table: &[f32],
    cpu: impl Fn([f32; 2]) -> Vec<f32>,
    gpu: impl Fn() -> Vec<f32>,
) {
    assert!(wgsl.contains("_group"), "no groups of trips");
    assert!(!wgsl.contains("stage_count++"), "a trip counts its stages");
    let mut at: Vec<f64> = elements[0].iter().map(|&v| f64::from(v)).collect();
    at.extend(table.iter().map(|&v| f64::from(v)));
    let which = [2, 3, 2 + words / 2, 1 + words];
    let (_, fd) = central_differences(src, &at, &which);
    // Each word to a thousandth of the gradient's largest: a word far smaller than the
    // others carries the f32 rounding of the whole reverse pass.
    let one = cpu(elements[0]);
    let scale = one.iter().fold(0.0f64, |m, g| m.max(f64::from(g.abs())));
    for (k, want) in which.iter().zip(&fd) {
        let got = f64::from(one[k - 2]);
        assert!(
            (got - want).abs() <= 1e-3 * scale,
            "word {}: {got} vs {want}",
            k - 2
        );
    }
    let (mut want, mut magnitude) = (vec![0.0f64; words], vec![0.0f64; words]);
    for e in elements {
        for (k, g) in cpu(*e).iter().enumerate() {
            want[k] += f64::from(*g);
            magnitude[k] += f64::from(g.abs());
        }
    }
    let sums = gpu();
    for k in 0..words {
        let e = (f64::from(sums[k]) - want[k]).abs() / magnitude[k].max(1e-30);
        assert!(e < 1e-5, "word {k}: {} against {}", sums[k], want[k]);
    }
    let again = gpu();
    assert!(
        sums.iter()
            .zip(&again)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

/// A batch of `n` elements `(x, y)` with `|y| < 0.9`, and a table of `words` words under
/// `size`: small enough that the sum stays where `tanh` is not flat in f32 (there its
/// derivative, `1 - tanh^2`, is a few ulps of 1, and the f32 gradient is off by tens of
/// percent).
fn table_batch(seed: u64, n: usize, (words, size): (usize, f64)) -> (Vec<[f32; 2]>, Vec<f32>) {
    let mut rng = Rng(seed);
    let table = (0..words).map(|_| rng.uniform(-size, size)).collect();
    let batch = (0..n)
        .map(|_| [rng.uniform(-1.0, 1.0), rng.uniform(-0.9, 0.9)])
        .collect();
    (batch, table)
}

/// [`check_grouped_table`] of function `$f` (its table `$field` of `$words` words, under
/// `$size`; `$n` elements from seed `$seed`).
macro_rules! check_grouped {
    ($f:ident, $src:ident, ($field:ident, $words:literal, $size:literal), ($seed:literal, $n:literal)) => {{
        let (batch, table) = table_batch($seed, $n, ($words, $size));
        let shared = $f::Shared {
            $field: table.clone().try_into().expect("the table's words"),
        };
        let args: Vec<$f::Args> = batch.iter().map(|&[x, y]| $f::Args { x, y }).collect();
        check_grouped_table(
            ($src, $f::WGSL_ADJOINT, $words),
            &batch,
            &table,
            |[x, y]| {
                $f::value_and_grad(&$f::Args { x, y }, &shared)
                    .2
                    .$field
                    .to_vec()
            },
            || {
                let kernel = $f::kernel(device());
                let sums = kernel.value_and_grad(&args, &shared).expect("launch").2;
                sums.$field.to_vec()
            },
        );
    }};
}

#[test]
fn a_table_of_1024_words_sums_by_groups_of_trips() {
    // One word a trip, each trip its own: the group is summed without looking for repeats.
    assert!(table_1024::WGSL_ADJOINT.contains("gf_reduce_distinct(lid"));
    check_grouped!(table_1024, TABLE_1024_SRC, (table, 1024, 5e-4), (5, 3000));
}

#[test]
fn two_words_a_trip_each_added_by_two_trips() {
    // Words repeat within a group: its sum looks for them.
    assert!(!pairs_1024::WGSL_ADJOINT.contains("gf_reduce_distinct"));
    check_grouped!(pairs_1024, PAIRS_1024_SRC, (t, 1025, 5e-4), (6, 3000));
}

#[test]
fn a_table_of_4096_words_sums_by_groups_into_its_owners() {
    check_grouped!(table_4096, TABLE_4096_SRC, (table, 4096, 0.01), (7, 1000));
}

#[test]
fn a_long_table_beside_its_tape_streams_its_gradient() {
    assert!(
        !long_table::WGSL_ADJOINT.contains("var sum_"),
        "per-thread sums"
    );
    assert!(
        long_table::WGSL_ADJOINT.contains("stage_count"),
        "no stream"
    );
    // Its forward values recomputed a segment at a time from checkpoints
    // (`opt::recompute`), not all kept alive for the reverse pass.
    assert!(
        long_table::WGSL_ADJOINT.contains("gf_fresh("),
        "not recomputed"
    );
    // Its unrolled stages add into known words: each run of 32 summed into its words
    // (`static_runs`), no slot's word written or looked up.
    assert!(
        long_table::WGSL_ADJOINT.contains("gf_sum_run(lid, 255u, -1, 32u)")
            && !long_table::WGSL_ADJOINT.contains("stage_words"),
        "not summed by known runs"
    );
    let mut rng = Rng(71);
    let shared = long_table::Shared {
        table: std::array::from_fn(|_| rng.uniform(-0.05, 0.05)),
    };
    let batch: Vec<long_table::Args> = (0..3000)
        .map(|_| long_table::Args {
            x: rng.uniform(-1.0, 1.0),
            y: rng.uniform(-0.9, 0.9),
        })
        .collect();
    // The CPU reverse mode against the f64 interpreter's, on a few elements.
    let reverse = ad::reverse(
        &compile_str(LONG_TABLE_SRC)
            .expect("compiles")
            .lowered
            .primal,
    );
    for a in batch.iter().take(3) {
        let words: Vec<f64> = [a.x, a.y]
            .iter()
            .chain(&shared.table)
            .map(|&w| w as f64)
            .collect();
        let want = interp::eval(&reverse, &words);
        let (v, _, g) = long_table::value_and_grad(a, &shared);
        assert!((v as f64 - want[0]).abs() <= 1e-5);
        for (k, g) in g.table.iter().enumerate() {
            assert!((*g as f64 - want[3 + k]).abs() <= 1e-5, "word {k}");
        }
    }
    let kernel = long_table::kernel(device());
    let (_, _, sums) = kernel.value_and_grad(&batch, &shared).expect("launch");
    check_long_table_sums(&batch, &shared, &sums.table);
    let (_, _, again) = kernel.value_and_grad(&batch, &shared).expect("launch");
    assert!(
        sums.table
            .iter()
            .zip(&again.table)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

/// A table's shared gradient `sums` against the sum, in f64, of each element's gradient
/// `grads` gives (the CPU version's), relative to the sum of their magnitudes.
fn check_table_sums<G: AsRef<[f32]>>(sums: &[f32], grads: impl IntoIterator<Item = G>) {
    let (mut want, mut magnitude) = (vec![0.0f64; sums.len()], vec![0.0f64; sums.len()]);
    for g in grads {
        for (k, g) in g.as_ref().iter().enumerate() {
            want[k] += *g as f64;
            magnitude[k] += g.abs() as f64;
        }
    }
    for (k, sum) in sums.iter().enumerate() {
        let e = (*sum as f64 - want[k]).abs() / magnitude[k].max(1e-30);
        assert!(e < 1e-5, "word {k}: {sum} against {}", want[k]);
    }
}

/// The long table's shared gradient `sums` over `batch` against the CPU version's.
fn check_long_table_sums(
    batch: &[long_table::Args],
    shared: &long_table::Shared,
    sums: &[f32; 256],
) {
    let grads = batch
        .iter()
        .map(|a| long_table::value_and_grad(a, shared).2.table);
    check_table_sums(sums, grads);
}

/// The recomputed reverse pass with two elements a thread side by side (past 512 x 256
/// elements each thread takes several), each element's value and gradient against the
/// CPU version's, and the shared gradient against the CPU's sum: each element's first
/// run of stages sums the last run the element before it left in the stage.
#[test]
fn a_long_table_recomputed_two_elements_a_thread() {
    let mut rng = Rng(73);
    let shared = long_table::Shared {
        table: std::array::from_fn(|_| rng.uniform(-0.05, 0.05)),
    };
    let n = 512 * 256 * 2 + 301;
    let batch: Vec<long_table::Args> = (0..n)
        .map(|_| long_table::Args {
            x: rng.uniform(-1.0, 1.0),
            y: rng.uniform(-0.9, 0.9),
        })
        .collect();
    let kernel = long_table::kernel(device());
    let (values, grads, sums) = kernel.value_and_grad(&batch, &shared).expect("launch");
    assert_eq!((values.len(), grads.len()), (n, n));
    check_long_table_sums(&batch, &shared, &sums.table);
    for i in (0..n).step_by(61).chain(n - 300..n) {
        let (v, g, _) = long_table::value_and_grad(&batch[i], &shared);
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * b.abs().max(1.0);
        assert!(
            close(values[i], v),
            "element {i}: {} against {v}",
            values[i]
        );
        assert!(
            close(grads[i].x, g.x) && close(grads[i].y, g.y),
            "element {i}"
        );
    }
}

/// A table of 264 words stages runs of 32 and a last run of 8, which the next element's
/// first check sums (`static_runs`): its shared gradient at several elements a thread
/// against the CPU's sum.
#[test]
fn a_table_with_a_short_last_run_sums_it_across_elements() {
    assert!(
        table_264::WGSL_ADJOINT.contains("if (stage_count > 0u) { gf_sum_run(lid, 7u, -1, 8u);")
    );
    let mut rng = Rng(79);
    let shared = table_264::Shared {
        table: std::array::from_fn(|_| rng.uniform(-0.05, 0.05)),
    };
    let n = 512 * 256 * 2 + 301;
    let batch: Vec<table_264::Args> = (0..n)
        .map(|_| table_264::Args {
            x: rng.uniform(-1.0, 1.0),
            y: rng.uniform(-0.9, 0.9),
        })
        .collect();
    let (_, _, sums) = table_264::kernel(device())
        .value_and_grad(&batch, &shared)
        .expect("launch");
    let grads = batch
        .iter()
        .map(|a| table_264::value_and_grad(a, &shared).2.table);
    check_table_sums(&sums.table, grads);
}
