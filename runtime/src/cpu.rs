//! The CPU fallback: a kernel's CPU version over the batch, in parallel with rayon.

use crate::spec::KernelSpec;
use rayon::prelude::*;

/// Elements per rayon task: large enough to amortize scheduling, small enough to balance.
const BLOCK: usize = 2048;

/// Runs `spec.cpu` for each of the `n` elements of `input`; lengths are already checked.
pub(crate) fn launch(spec: &KernelSpec, input: &[f32], n: usize, outputs: &mut [&mut [f32]]) {
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
    per_block
        .into_par_iter()
        .enumerate()
        .for_each(|(b, mut outs)| {
            let mut scratch = vec![0.0f32; total];
            let start = b * BLOCK;
            let len = BLOCK.min(n - start);
            for j in 0..len {
                let e = start + j;
                (spec.cpu)(&input[e * in_words..(e + 1) * in_words], &mut scratch);
                let mut off = 0;
                for (out, o) in outs.iter_mut().zip(spec.outputs) {
                    let w = o.words as usize;
                    out[j * w..(j + 1) * w].copy_from_slice(&scratch[off..off + w]);
                    off += w;
                }
            }
        });
}
