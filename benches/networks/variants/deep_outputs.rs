// Networks of three and four hidden layers of 32 rows with three and four outputs, as
// samples::deep_network writes them, for the corpus bench:
// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/deep_outputs.rs (BENCHMARKS.md, "Workgroups
// a multiprocessor: 48 KiB in all": the outputs' parts a pair at a time where the kernel
// holds one workgroup a multiprocessor either way).
fn deep3_out4(#[constant] x: [f32; 8], #[constant] t: [f32; 4], #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 1056], #[shared] w4: [f32; 132]) -> f32 {
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
            let mut loss = 0.0;
            for j in 0..4 {
                let mut y = w4[32 * 4 + j];
                for k in 0..32 {
                    y += w4[j * 32 + k] * h3[k];
                }
                loss += (y - t[j]) * (y - t[j]);
            }
            loss
        }
fn deep4_out3(#[constant] x: [f32; 8], #[constant] t: [f32; 3], #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 1056], #[shared] w4: [f32; 1056], #[shared] w5: [f32; 99]) -> f32 {
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
            let mut loss = 0.0;
            for j in 0..3 {
                let mut y = w5[32 * 3 + j];
                for k in 0..32 {
                    y += w5[j * 32 + k] * h4[k];
                }
                loss += (y - t[j]) * (y - t[j]);
            }
            loss
        }
fn deep4_out4(#[constant] x: [f32; 8], #[constant] t: [f32; 4], #[shared] w1: [f32; 288], #[shared] w2: [f32; 1056], #[shared] w3: [f32; 1056], #[shared] w4: [f32; 1056], #[shared] w5: [f32; 132]) -> f32 {
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
            let mut loss = 0.0;
            for j in 0..4 {
                let mut y = w5[32 * 4 + j];
                for k in 0..32 {
                    y += w5[j * 32 + k] * h4[k];
                }
                loss += (y - t[j]) * (y - t[j]);
            }
            loss
        }
