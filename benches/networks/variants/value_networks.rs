// Networks of `samples::deep_network` whose value kernel of one element a thread keeps a
// layer as a loop (and one 32-row network that does too), for the value kernels timed in
// `benches/networks/h200_2026-12-02_value.md` (`GRADFUSE_CORPUS_EXTRA`).

fn deep64(#[constant] x: [f32; 8], #[constant] t: [f32; 1], #[shared] w1: [f32; 576], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 4160], #[shared] w4: [f32; 65]) -> f32 {
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
            let mut loss = 0.0;
            for j in 0..1 {
                let mut y = w4[64 * 1 + j];
                for k in 0..64 {
                    y += w4[j * 64 + k] * h3[k];
                }
                loss += (y - t[j]) * (y - t[j]);
            }
            loss
        }

fn coord64x3(#[constant] x: [f32; 3], #[constant] t: [f32; 1], #[shared] w1: [f32; 256], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 4160], #[shared] w4: [f32; 65]) -> f32 {
            let mut h1 = [0.0; 64];
            for j in 0..64 {
                let mut s = w1[3 * 64 + j];
                for k in 0..3 {
                    s += w1[j * 3 + k] * x[k];
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
            let mut loss = 0.0;
            for j in 0..1 {
                let mut y = w4[64 * 1 + j];
                for k in 0..64 {
                    y += w4[j * 64 + k] * h3[k];
                }
                loss += (y - t[j]) * (y - t[j]);
            }
            loss
        }

fn wide_in64x3(#[constant] x: [f32; 32], #[constant] t: [f32; 1], #[shared] w1: [f32; 2112], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 4160], #[shared] w4: [f32; 65]) -> f32 {
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
            let mut h3 = [0.0; 64];
            for j in 0..64 {
                let mut s = w3[64 * 64 + j];
                for k in 0..64 {
                    s += w3[j * 64 + k] * h2[k];
                }
                h3[j] = s.tanh();
            }
            let mut loss = 0.0;
            for j in 0..1 {
                let mut y = w4[64 * 1 + j];
                for k in 0..64 {
                    y += w4[j * 64 + k] * h3[k];
                }
                loss += (y - t[j]) * (y - t[j]);
            }
            loss
        }

fn two_out64(#[constant] x: [f32; 16], #[constant] t: [f32; 2], #[shared] w1: [f32; 1088], #[shared] w2: [f32; 4160], #[shared] w3: [f32; 2145], #[shared] w4: [f32; 68]) -> f32 {
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
            let mut h3 = [0.0; 33];
            for j in 0..33 {
                let mut s = w3[64 * 33 + j];
                for k in 0..64 {
                    s += w3[j * 64 + k] * h2[k];
                }
                h3[j] = s.tanh();
            }
            let mut loss = 0.0;
            for j in 0..2 {
                let mut y = w4[33 * 2 + j];
                for k in 0..33 {
                    y += w4[j * 33 + k] * h3[k];
                }
                loss += (y - t[j]) * (y - t[j]);
            }
            loss
        }

fn deep32x8(#[constant] x: [f32; 8], #[constant] t: [f32; 1], #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 1056], #[shared] w4: [f32; 1056], #[shared] w5: [f32; 1056], #[shared] w6: [f32; 1056], #[shared] w7: [f32; 1056], #[shared] w8: [f32; 1056], #[shared] w9: [f32; 33]) -> f32 {
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
            let mut h5 = [0.0; 32];
            for j in 0..32 {
                let mut s = w5[32 * 32 + j];
                for k in 0..32 {
                    s += w5[j * 32 + k] * h4[k];
                }
                h5[j] = s.tanh();
            }
            let mut h6 = [0.0; 32];
            for j in 0..32 {
                let mut s = w6[32 * 32 + j];
                for k in 0..32 {
                    s += w6[j * 32 + k] * h5[k];
                }
                h6[j] = s.tanh();
            }
            let mut h7 = [0.0; 32];
            for j in 0..32 {
                let mut s = w7[32 * 32 + j];
                for k in 0..32 {
                    s += w7[j * 32 + k] * h6[k];
                }
                h7[j] = s.tanh();
            }
            let mut h8 = [0.0; 32];
            for j in 0..32 {
                let mut s = w8[32 * 32 + j];
                for k in 0..32 {
                    s += w8[j * 32 + k] * h7[k];
                }
                h8[j] = s.tanh();
            }
            let mut loss = 0.0;
            for j in 0..1 {
                let mut y = w9[32 * 1 + j];
                for k in 0..32 {
                    y += w9[j * 32 + k] * h8[k];
                }
                loss += (y - t[j]) * (y - t[j]);
            }
            loss
        }

