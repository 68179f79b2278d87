// Networks whose adjoint keeps a dense layer's loop and sums its shared gradient as outer
// products through a stage of workgroup memory that grows with the device's limit
// (`outer_sums`: its target `t` has a gradient, which keeps them one element a thread), as
// tests/outer_sums.rs has them, for the corpus bench:
// GRADFUSE_CORPUS_EXTRA=benches/networks/variants/outer_networks.rs (BENCHMARKS.md,
// "Workgroups a multiprocessor: 48 KiB in all").
fn outer_net32(
    #[constant] x: [f32; 8],
    t: f32,
    #[shared] w1: [f32; 288],
    #[shared] w2: [f32; 1056],
    #[shared] w3: [f32; 33],
) -> f32 {
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
    let mut y = w3[32];
    for k in 0..32 {
        y += w3[k] * h2[k];
    }
    (y - t) * (y - t)
}

fn outer_offset_rows(
    #[constant] x: [f32; 3],
    #[shared] w1: [f32; 72],
    #[shared] w2: [f32; 600],
) -> f32 {
    let mut h1 = [0.0; 24];
    for j in 0..24 {
        h1[j] = (w1[j * 3] * x[0] + w1[j * 3 + 1] * x[1] + w1[j * 3 + 2] * x[2]).tanh();
    }
    let mut y = 0.0;
    for j in 1..25 {
        let mut s = w2[576 + j - 1] * x[0];
        for k in 0..24 {
            s += w2[(j - 1) * 24 + k] * h1[k];
        }
        y += s.tanh() * (j as f32) * 0.05;
    }
    y * y
}
