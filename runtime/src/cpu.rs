//! The CPU fallback: a kernel's CPU version over the batch, in parallel with rayon.

use crate::spec::KernelSpec;
use rayon::prelude::*;

/// Elements per rayon task: large enough to amortize scheduling, small enough to balance.
/// Fixed (not derived from the thread count), so that shared-gradient sums, taken block by
/// block in order, are the same bits on every machine and run.
const BLOCK: usize = 2048;

/// Runs `spec.cpu` for each of the `n` elements of `input`; lengths are already checked.
/// Shared gradients are summed within each block in element order, then over blocks in
/// block order, into `shared_grad`.
pub(crate) fn launch(
    spec: &KernelSpec,
    input: &[f32],
    shared: &[f32],
    n: usize,
    outputs: &mut [&mut [f32]],
    shared_grad: &mut [f32],
) {
    let in_words = spec.input_words as usize;
    let blocks = n.div_ceil(BLOCK);
    let mut per_block: Vec<Vec<&mut [f32]>> = (0..blocks).map(|_| Vec::new()).collect();
    for (out, o) in outputs.iter_mut().zip(spec.outputs) {
        let w = o.words as usize;
        for (b, chunk) in out.chunks_mut(BLOCK * w).enumerate() {
            per_block[b].push(chunk);
        }
    }
    let total = spec.output_words();
    let sg_words = spec.shared_grad_words();
    let sums: Vec<Vec<f32>> = per_block
        .into_par_iter()
        .enumerate()
        .map(|(b, mut outs)| {
            // 8-byte aligned, so that an f64 kernel's CPU version views its words as f64.
            let mut scratch_store = aligned_words(total + sg_words);
            let scratch: &mut [f32] =
                &mut bytemuck::cast_slice_mut(&mut scratch_store[..])[..total + sg_words];
            let mut sum = vec![0.0f32; sg_words];
            let precision = spec.precision;
            let mut args_store = aligned_words(in_words + shared.len());
            let args: &mut [f32] =
                &mut bytemuck::cast_slice_mut(&mut args_store[..])[..in_words + shared.len()];
            args[in_words..].copy_from_slice(shared);
            let start = b * BLOCK;
            let len = BLOCK.min(n - start);
            for j in 0..len {
                let e = start + j;
                args[..in_words].copy_from_slice(&input[e * in_words..(e + 1) * in_words]);
                (spec.cpu)(args, scratch);
                let mut off = 0;
                for (out, o) in outs.iter_mut().zip(spec.outputs) {
                    let w = o.words as usize;
                    out[j * w..(j + 1) * w].copy_from_slice(&scratch[off..off + w]);
                    off += w;
                }
                precision.add_words(&mut sum, &scratch[total..]);
            }
            sum
        })
        .collect();
    shared_grad.fill(0.0);
    for block in sums {
        spec.precision.add_words(shared_grad, &block);
    }
}

/// Zeroed storage for `n` f32 words, 8-byte aligned (a `Vec<f64>` of half as many).
fn aligned_words(n: usize) -> Vec<f64> {
    vec![0.0f64; n.div_ceil(2)]
}
