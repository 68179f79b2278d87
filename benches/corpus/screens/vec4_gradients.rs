// Adjoints of functions without #[shared] arguments whose per-element gradients have a
// `vec4` view and are past 32 words (36 to 128): staged in rounds of whole elements
// through workgroup memory before `KernelPlan::stages_output_of` stored them from
// registers a `vec4` at a time; BENCHMARKS.md "Wide `vec4` gradients from registers".

fn vgrad_36(p: [f32; 36], #[constant] s: f32) -> f32 {
    let mut acc = 0.0;
    for k in 0..36 {
        acc += p[k] * p[k] * (k as f32 + s);
    }
    acc
}

fn vgrad_48(p: [f32; 48], #[constant] w: [f32; 2]) -> f32 {
    let mut acc = 0.0;
    for k in 0..48 {
        acc += (p[k] * w[0]).exp() - p[k] * w[1];
    }
    acc
}

fn vgrad_64(p: [f32; 64], #[constant] s: f32) -> f32 {
    let mut acc = 0.0;
    for k in 0..64 {
        acc += p[k] * s - p[63 - k] * p[k];
    }
    acc
}

fn vgrad_128(p: [f32; 128], #[constant] s: [f32; 4]) -> f32 {
    let mut acc = 0.0;
    for k in 0..32 {
        for j in 0..4 {
            acc += p[4 * k + j] * s[j];
        }
    }
    acc * acc
}

fn vgrad_tanh_40(p: [f32; 40], #[constant] s: f32) -> f32 {
    let mut acc = 0.0;
    for k in 0..40 {
        acc += (p[k] * s).tanh() * p[39 - k];
    }
    acc
}
