//! Launches of a few elements, whose kernels bind the mapped upload and staging buffers
//! themselves (no device buffers, no copies), against launches large enough to copy
//! through device buffers, and against the CPU device's reverse mode.

mod common;

use common::{device, rel_error};
use gradfuse::{Device, differentiable};

/// Several outputs (the value, a 3-word gradient), a per-element constant, and a shared
/// table summed over the batch by a second pass: every region of a launch set's layout.
#[differentiable]
pub fn weighted(p: [f32; 3], #[constant] x: [f32; 2], #[shared] w: [f32; 40]) -> f32 {
    let mut s = 0.0;
    for k in 0..20 {
        let t = (p[0] * x[0] + 0.1 * (k as f32)).sin();
        s += w[k] * t + w[k + 20] * p[1] * x[1] + 0.05 * p[2];
    }
    s * s
}

fn batch(n: usize) -> Vec<weighted::Args> {
    (0..n)
        .map(|k| {
            let t = ((k as u32).wrapping_mul(2_654_435_761) >> 8) as f32 / (1 << 24) as f32;
            weighted::Args {
                p: [t - 0.5, 0.25 + t, -t],
                x: [1.0 + t, 0.5 - t],
            }
        })
        .collect()
}

fn shared() -> weighted::Shared {
    let mut w = [0.0; 40];
    for (k, w) in w.iter_mut().enumerate() {
        *w = 0.3 - 0.017 * k as f32;
    }
    weighted::Shared { w }
}

/// Values, per-element gradients and the shared gradient of one launch, in f64.
fn launch(d: &Device, args: &[weighted::Args]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (v, g, s) = weighted::kernel(d)
        .value_and_grad(args, &shared())
        .expect("launch");
    let wide = |x: &[f32]| x.iter().map(|&x| x as f64).collect::<Vec<_>>();
    let grads: Vec<f32> = g.iter().flat_map(|g| g.p).collect();
    (wide(&v), wide(&grads), wide(&s.w))
}

#[test]
fn small_and_large_launches_agree_with_the_cpu() {
    let gpu = device();
    let cpu = Device::cpu();
    for n in [1, 37, 1000, 40_000] {
        let args = batch(n);
        let (v, g, s) = launch(gpu, &args);
        let (cv, cg, cs) = launch(&cpu, &args);
        let what = format!("{n} elements on {}", gpu.describe());
        assert!(rel_error(&v, &cv, 1.0) < 1e-5, "values, {what}");
        assert!(rel_error(&g, &cg, 1.0) < 1e-5, "gradients, {what}");
        assert!(rel_error(&s, &cs, 1.0) < 1e-4, "shared gradient, {what}");
    }
}

#[test]
fn a_small_launch_gives_the_elements_of_a_large_one() {
    let d = device();
    let large = batch(40_000);
    let (lv, lg, _) = launch(d, &large);
    for n in [1, 37, 1000] {
        let (v, g, _) = launch(d, &large[..n]);
        assert!(rel_error(&v, &lv[..n], 1.0) < 1e-6, "{n} values");
        assert!(rel_error(&g, &lg[..3 * n], 1.0) < 1e-6, "{n} gradients");
    }
}

#[test]
fn a_small_launch_binds_its_mapped_buffers() {
    let d = match Device::gpu() {
        Ok(d) => d,
        Err(e) if std::env::var(gradfuse::REQUIRE_GPU_ENV).is_ok_and(|v| v == "1") => {
            panic!("GRADFUSE_REQUIRE_GPU=1 and no GPU: {e}")
        }
        Err(e) => {
            println!("no GPU ({e}): the CPU device has no buffers to count");
            return;
        }
    };
    let buffers = |d: &Device| d.resource_counts().expect("a GPU device counts").buffers;
    let before = buffers(&d);
    launch(&d, &batch(5));
    let small = buffers(&d) - before;
    let before = buffers(&d);
    launch(&d, &batch(40_000));
    let large = buffers(&d) - before;
    // At most the upload and staging buffers and the shared gradient's partial sums; a
    // large launch adds the seven device buffers it copies through (the uniforms, the
    // arguments, two outputs, the shared words, the sums).
    assert!(small <= 3, "a small launch made {small} buffers");
    assert_eq!(large - small, 7, "a large launch made {large} buffers");
}
