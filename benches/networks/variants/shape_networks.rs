// Tanh networks of shapes other than the bench's I-32-32-O and I-64-64-O (other widths, one,
// three and four hidden layers), written as users write them, for the corpus bench:
// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/shape_networks.rs (BENCHMARKS.md,
// "Networks of other shapes"). Written by benches/networks/variants/shape_networks.py.
fn net16(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 144], #[shared] w2: [f32; 272], #[shared] w3: [f32; 17]) -> f32 {
    let mut h1 = [0.0; 16];
    for j in 0..16 {
        let mut s = w1[8 * 16 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 16];
    for j in 0..16 {
        let mut s = w2[16 * 16 + j];
        for k in 0..16 {
            s += w2[j * 16 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[16];
    for k in 0..16 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn net24(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 216], #[shared] w2: [f32; 600], #[shared] w3: [f32; 25]) -> f32 {
    let mut h1 = [0.0; 24];
    for j in 0..24 {
        let mut s = w1[8 * 24 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 24];
    for j in 0..24 {
        let mut s = w2[24 * 24 + j];
        for k in 0..24 {
            s += w2[j * 24 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[24];
    for k in 0..24 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn net40(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 360], #[shared] w2: [f32; 1640], #[shared] w3: [f32; 41]) -> f32 {
    let mut h1 = [0.0; 40];
    for j in 0..40 {
        let mut s = w1[8 * 40 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 40];
    for j in 0..40 {
        let mut s = w2[40 * 40 + j];
        for k in 0..40 {
            s += w2[j * 40 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[40];
    for k in 0..40 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn net48(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 432], #[shared] w2: [f32; 2352], #[shared] w3: [f32; 49]) -> f32 {
    let mut h1 = [0.0; 48];
    for j in 0..48 {
        let mut s = w1[8 * 48 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 48];
    for j in 0..48 {
        let mut s = w2[48 * 48 + j];
        for k in 0..48 {
            s += w2[j * 48 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[48];
    for k in 0..48 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

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

fn deep32(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 1056], #[shared] w4: [f32; 33]) -> f32 {
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
    let mut h3 = [0.0; 32];
    for j in 0..32 {
        let mut s = w3[32 * 32 + j];
        for k in 0..32 {
            s += w3[j * 32 + k] * h2[k];
        }
        h3[j] = s.tanh();
    }
    let mut y = w4[32];
    for k in 0..32 {
        y += w4[k] * h3[k];
    }
    (y - t) * (y - t)
}

fn deep64(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 576], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 4160], #[shared] w4: [f32; 65]) -> f32 {
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
    let mut h3 = [0.0; 64];
    for j in 0..64 {
        let mut s = w3[64 * 64 + j];
        for k in 0..64 {
            s += w3[j * 64 + k] * h2[k];
        }
        h3[j] = s.tanh();
    }
    let mut y = w4[64];
    for k in 0..64 {
        y += w4[k] * h3[k];
    }
    (y - t) * (y - t)
}

fn shallow64(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 576], #[shared] w2: [f32; 65]) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[8 * 64 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut y = w2[64];
    for k in 0..64 {
        y += w2[k] * h1[k];
    }
    (y - t) * (y - t)
}

fn shallow128(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 1152], #[shared] w2: [f32; 129]) -> f32 {
    let mut h1 = [0.0; 128];
    for j in 0..128 {
        let mut s = w1[8 * 128 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut y = w2[128];
    for k in 0..128 {
        y += w2[k] * h1[k];
    }
    (y - t) * (y - t)
}

fn funnel_64_32(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 576], #[shared] w2: [f32; 2080], #[shared] w3: [f32; 33]) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[8 * 64 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 32];
    for j in 0..32 {
        let mut s = w2[64 * 32 + j];
        for k in 0..64 {
            s += w2[j * 64 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[32];
    for k in 0..32 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn funnel_32_64(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 288], #[shared] w2: [f32; 2112], #[shared] w3: [f32; 65]) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[8 * 32 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 64];
    for j in 0..64 {
        let mut s = w2[32 * 64 + j];
        for k in 0..32 {
            s += w2[j * 32 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[64];
    for k in 0..64 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn funnel_64_16(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 576], #[shared] w2: [f32; 1040], #[shared] w3: [f32; 17]) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[8 * 64 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 16];
    for j in 0..16 {
        let mut s = w2[64 * 16 + j];
        for k in 0..64 {
            s += w2[j * 64 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[16];
    for k in 0..16 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn funnel_16_64(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 144], #[shared] w2: [f32; 1088], #[shared] w3: [f32; 65]) -> f32 {
    let mut h1 = [0.0; 16];
    for j in 0..16 {
        let mut s = w1[8 * 16 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 64];
    for j in 0..64 {
        let mut s = w2[16 * 64 + j];
        for k in 0..16 {
            s += w2[j * 16 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[64];
    for k in 0..64 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn funnel_48_24(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 432], #[shared] w2: [f32; 1176], #[shared] w3: [f32; 25]) -> f32 {
    let mut h1 = [0.0; 48];
    for j in 0..48 {
        let mut s = w1[8 * 48 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 24];
    for j in 0..24 {
        let mut s = w2[48 * 24 + j];
        for k in 0..48 {
            s += w2[j * 48 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[24];
    for k in 0..24 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn funnel_64_48(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 576], #[shared] w2: [f32; 3120], #[shared] w3: [f32; 49]) -> f32 {
    let mut h1 = [0.0; 64];
    for j in 0..64 {
        let mut s = w1[8 * 64 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 48];
    for j in 0..48 {
        let mut s = w2[64 * 48 + j];
        for k in 0..64 {
            s += w2[j * 64 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut y = w3[48];
    for k in 0..48 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn deep32x4(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 1056], #[shared] w4: [f32; 1056], #[shared] w5: [f32; 33]) -> f32 {
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
    let mut h3 = [0.0; 32];
    for j in 0..32 {
        let mut s = w3[32 * 32 + j];
        for k in 0..32 {
            s += w3[j * 32 + k] * h2[k];
        }
        h3[j] = s.tanh();
    }
    let mut h4 = [0.0; 32];
    for j in 0..32 {
        let mut s = w4[32 * 32 + j];
        for k in 0..32 {
            s += w4[j * 32 + k] * h3[k];
        }
        h4[j] = s.tanh();
    }
    let mut y = w5[32];
    for k in 0..32 {
        y += w5[k] * h4[k];
    }
    (y - t) * (y - t)
}

fn deep24(#[constant] x: [f32; 8], #[constant] t: f32, #[shared] w1: [f32; 216], #[shared] w2: [f32; 600], #[shared] w3: [f32; 600], #[shared] w4: [f32; 25]) -> f32 {
    let mut h1 = [0.0; 24];
    for j in 0..24 {
        let mut s = w1[8 * 24 + j];
        for k in 0..8 {
            s += w1[j * 8 + k] * x[k];
        }
        h1[j] = s.tanh();
    }
    let mut h2 = [0.0; 24];
    for j in 0..24 {
        let mut s = w2[24 * 24 + j];
        for k in 0..24 {
            s += w2[j * 24 + k] * h1[k];
        }
        h2[j] = s.tanh();
    }
    let mut h3 = [0.0; 24];
    for j in 0..24 {
        let mut s = w3[24 * 24 + j];
        for k in 0..24 {
            s += w3[j * 24 + k] * h2[k];
        }
        h3[j] = s.tanh();
    }
    let mut y = w4[24];
    for k in 0..24 {
        y += w4[k] * h3[k];
    }
    (y - t) * (y - t)
}

fn deep_coord32(#[constant] x: [f32; 3], #[constant] t: f32, #[shared] w1: [f32; 128], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 1056], #[shared] w4: [f32; 33]) -> f32 {
    let mut h1 = [0.0; 32];
    for j in 0..32 {
        let mut s = w1[3 * 32 + j];
        for k in 0..3 {
            s += w1[j * 3 + k] * x[k];
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
    let mut h3 = [0.0; 32];
    for j in 0..32 {
        let mut s = w3[32 * 32 + j];
        for k in 0..32 {
            s += w3[j * 32 + k] * h2[k];
        }
        h3[j] = s.tanh();
    }
    let mut y = w4[32];
    for k in 0..32 {
        y += w4[k] * h3[k];
    }
    (y - t) * (y - t)
}

