// Networks of two hidden layers of 65 to 128 rows, written as users write them, for the
// corpus bench: GRADFUSE_CORPUS_EXTRA=benches/networks/variants/wide_networks.rs
// (BENCHMARKS.md, "Two layers of 128 rows"). Written by benches/networks/variants/wide_networks.py.
fn net128(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 1152], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[8 * 128 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn net128_relu(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 1152], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[8 * 128 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.max(0.0);
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.max(0.0);
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn net96(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 864], #[shared] w2: [f32; 9312], #[shared] w3: [f32; 97]) -> f32 {
    let mut h1 = [0.0; 96];
    for j in 0..96 {
        let mut s = w1[8 * 96 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 96];
    for j in 0..96 {
        let mut s = w2[96 * 96 + j];
        for k in 0..96 {
            s += w2[j * 96 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[96];
    for k in 0..96 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn coord128(#[constant] x: [f32; 3], #[constant] t: f32, #[shared] w1: [f32; 512], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[3 * 128 + j];
        for k in 0..3 {
            s += w1[j * 3 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn two_out_128(#[constant] x: [f32; 16], #[constant] t: [f32; 2], #[shared] w1: [f32; 2176], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 258]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[16 * 128 + j];
        for k in 0..16 {
            s += w1[j * 16 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut loss = 0.0;
    for j in 0..2 {
        let mut y = w3[128 * 2 + j];
        for k in 0..128 {
            y += w3[j * 128 + k] * h2[k];
        }
        loss += (y - t[j]) * (y - t[j]);
    }
    loss
}

fn three_out_128(#[constant] x: [f32; 8], #[constant] t: [f32; 3], #[shared] w1: [f32; 1152], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 387]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[8 * 128 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut loss = 0.0;
    for j in 0..3 {
        let mut y = w3[128 * 3 + j];
        for k in 0..128 {
            y += w3[j * 128 + k] * h2[k];
        }
        loss += (y - t[j]) * (y - t[j]);
    }
    loss
}

fn four_out_128(#[constant] x: [f32; 16], #[constant] t: [f32; 4], #[shared] w1: [f32; 2176], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 516]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[16 * 128 + j];
        for k in 0..16 {
            s += w1[j * 16 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 128];
    for j in 0..128 {
        let mut s = w2[128 * 128 + j];
        for k in 0..128 {
            s += w2[j * 128 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut loss = 0.0;
    for j in 0..4 {
        let mut y = w3[128 * 4 + j];
        for k in 0..128 {
            y += w3[j * 128 + k] * h2[k];
        }
        loss += (y - t[j]) * (y - t[j]);
    }
    loss
}

