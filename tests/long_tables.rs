//! A `#[shared]` table read in a loop unrolled in full: its 256 gradient words would be
//! summed per thread in registers, but its reverse pass reads every value of its forward
//! one as well, and the two do not fit a thread's registers together
//! (`abi::MAX_REGISTER_SUMS_WITH_VALUES`): the adjoint streams the shared gradient, and it
//! is the batch's sum of the CPU reverse mode's, the same bits on every launch.

mod common;

use common::{Rng, device};
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
    let (mut want, mut magnitude) = (vec![0.0f64; 256], vec![0.0f64; 256]);
    for a in &batch {
        let (_, _, g) = long_table::value_and_grad(a, &shared);
        for (k, g) in g.table.iter().enumerate() {
            want[k] += *g as f64;
            magnitude[k] += g.abs() as f64;
        }
    }
    for k in 0..256 {
        let e = (sums.table[k] as f64 - want[k]).abs() / magnitude[k].max(1e-30);
        assert!(e < 1e-5, "word {k}: {} against {}", sums.table[k], want[k]);
    }
    let (_, _, again) = kernel.value_and_grad(&batch, &shared).expect("launch");
    assert!(
        sums.table
            .iter()
            .zip(&again.table)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}
