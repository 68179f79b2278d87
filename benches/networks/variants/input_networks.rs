// Networks of 10 to 32 inputs, written as users write them, for the corpus bench:
// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/input_networks.rs (BENCHMARKS.md,
// "Networks of many inputs"). Written by benches/networks/variants/input_networks.py.
fn in32_128(#[constant] x: [f32; 32], #[constant] t: f32, #[shared] w1: [f32; 4224], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[32 * 128 + j];
        for k in 0..32 {
            s += w1[j * 32 + k] * x[k];
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

fn in32_128_relu(#[constant] x: [f32; 32], #[constant] t: f32, #[shared] w1: [f32; 4224], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[32 * 128 + j];
        for k in 0..32 {
            s += w1[j * 32 + k] * x[k];
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

fn in24_128_2(#[constant] x: [f32; 24], #[constant] t: [f32; 2], #[shared] w1: [f32; 3200], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 258]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[24 * 128 + j];
        for k in 0..24 {
            s += w1[j * 24 + k] * x[k];
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

fn in20_100(#[constant] x: [f32; 20], #[constant] t: f32, #[shared] w1: [f32; 2100], #[shared] w2: [f32; 10100], #[shared] w3: [f32; 101]) -> f32 {
    let mut h1 = [0.0; 100];
    for j in 0..100 {
        let mut s = w1[20 * 100 + j];
        for k in 0..20 {
            s += w1[j * 20 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 100];
    for j in 0..100 {
        let mut s = w2[100 * 100 + j];
        for k in 0..100 {
            s += w2[j * 100 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[100];
    for k in 0..100 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn in16_128(#[constant] x: [f32; 16], #[constant] t: f32, #[shared] w1: [f32; 2176], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
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
    let mut y = w3[128];
    for k in 0..128 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn in32_64(#[constant] x: [f32; 32], #[constant] t: f32, #[shared] w1: [f32; 2112], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 65]) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[32 * 64 + j];
        for k in 0..32 {
            s += w1[j * 32 + k] * x[k];
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
    let mut y = w3[64];
    for k in 0..64 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn in16_64(#[constant] x: [f32; 16], #[constant] t: f32, #[shared] w1: [f32; 1088], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 65]) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[16 * 64 + j];
        for k in 0..16 {
            s += w1[j * 16 + k] * x[k];
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
    let mut y = w3[64];
    for k in 0..64 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn in12_128(#[constant] x: [f32; 12], #[constant] t: f32, #[shared] w1: [f32; 1664], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[12 * 128 + j];
        for k in 0..12 {
            s += w1[j * 12 + k] * x[k];
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

fn in10_128(#[constant] x: [f32; 10], #[constant] t: f32, #[shared] w1: [f32; 1408], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[10 * 128 + j];
        for k in 0..10 {
            s += w1[j * 10 + k] * x[k];
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

fn in14_128(#[constant] x: [f32; 14], #[constant] t: f32, #[shared] w1: [f32; 1920], #[shared] w2: [f32; 16512], #[shared] w3: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[14 * 128 + j];
        for k in 0..14 {
            s += w1[j * 14 + k] * x[k];
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

