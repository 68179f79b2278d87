// 8-H-H-1 relu networks (`s.max(0.0)`), the tanh networks of networks.rs with another
// activation, for the corpus bench: GRADFUSE_CORPUS_EXTRA=benches/networks/variants/relu_networks.rs
// (BENCHMARKS.md, "Relu networks in the cooperative adjoint").
fn net32_relu(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 33]) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[8 * 32 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.max(0.0);
    }
    let mut h2 = [0.0; 32];
    for j in 0..32 {
        let mut s = w2[32 * 32 + j];
        for k in 0..32 {
            s += w2[j * 32 + k] * h1[k];
        }
        h2[j] = s.max(0.0);
    }
    let mut y = w3[32];
    for k in 0..32 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn net64_relu(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 576], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 65]) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[8 * 64 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.max(0.0);
    }
    let mut h2 = [0.0; 64];
    for j in 0..64 {
        let mut s = w2[64 * 64 + j];
        for k in 0..64 {
            s += w2[j * 64 + k] * h1[k];
        }
        h2[j] = s.max(0.0);
    }
    let mut y = w3[64];
    for k in 0..64 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}
