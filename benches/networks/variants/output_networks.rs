// 8-H-H-O tanh networks of several outputs, as samples::network writes them (a loop over the
// output rows, the squared errors summed inside it), for the corpus bench:
// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/output_networks.rs (BENCHMARKS.md,
// "Networks of several outputs in the cooperative adjoint").
fn net64_out2(#[constant] x: [f32; 8], #[constant] t: [f32; 2], #[shared] w1: [f32; 576], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 130]) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[8 * 64 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 64];
    for j in 0..64 {
        let mut s = w2[64 * 64 + j];
        for k in 0..64 {
            s += w2[j * 64 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut loss = 0.0;
    for j in 0..2 {
        let mut y = w3[64 * 2 + j];
        for k in 0..64 {
            y += w3[j * 64 + k] * h2[k];
        }
        loss += (y - t[j]) * (y - t[j]);
    }
    loss
}

fn net32_out2(#[constant] x: [f32; 8], #[constant] t: [f32; 2], #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 66]) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[8 * 32 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 32];
    for j in 0..32 {
        let mut s = w2[32 * 32 + j];
        for k in 0..32 {
            s += w2[j * 32 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut loss = 0.0;
    for j in 0..2 {
        let mut y = w3[32 * 2 + j];
        for k in 0..32 {
            y += w3[j * 32 + k] * h2[k];
        }
        loss += (y - t[j]) * (y - t[j]);
    }
    loss
}

fn net32_out4(#[constant] x: [f32; 8], #[constant] t: [f32; 4], #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 132]) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[8 * 32 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 32];
    for j in 0..32 {
        let mut s = w2[32 * 32 + j];
        for k in 0..32 {
            s += w2[j * 32 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut loss = 0.0;
    for j in 0..4 {
        let mut y = w3[32 * 4 + j];
        for k in 0..32 {
            y += w3[j * 32 + k] * h2[k];
        }
        loss += (y - t[j]) * (y - t[j]);
    }
    loss
}

fn net32_out3(#[constant] x: [f32; 8], #[constant] t: [f32; 3], #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 99]) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[8 * 32 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 32];
    for j in 0..32 {
        let mut s = w2[32 * 32 + j];
        for k in 0..32 {
            s += w2[j * 32 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut loss = 0.0;
    for j in 0..3 {
        let mut y = w3[32 * 3 + j];
        for k in 0..32 {
            y += w3[j * 32 + k] * h2[k];
        }
        loss += (y - t[j]) * (y - t[j]);
    }
    loss
}
