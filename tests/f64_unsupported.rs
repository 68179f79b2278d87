//! An f64 kernel on a GPU without 64-bit floats in shaders (simulated with
//! `GRADFUSE_DISABLE_F64`, which this binary sets before opening its device: a process of
//! its own, so no other test's device is affected): a `gradfuse::Error::Unsupported` that
//! names the kernel and the way out, nothing launched, and the CPU versions and f32
//! kernels unaffected.

use gradfuse::{DISABLE_F64_ENV, Device, Error, differentiable};

#[differentiable]
pub fn sq64(x: f64, y: f64) -> f64 {
    (x * y).exp() + y
}

#[differentiable]
pub fn sq32(x: f32, y: f32) -> f32 {
    (x * y).exp() + y
}

#[test]
fn f64_launches_say_the_adapter_lacks_f64() {
    // SAFETY: set before any thread of this test binary reads the environment.
    unsafe { std::env::set_var(DISABLE_F64_ENV, "1") };
    let d = match Device::gpu() {
        Ok(d) => d,
        Err(e) if std::env::var(gradfuse::REQUIRE_GPU_ENV).is_ok() => panic!("no GPU: {e}"),
        Err(e) => {
            eprintln!("no GPU ({e}): nothing to test");
            return;
        }
    };
    assert!(!d.has_f64());
    let args = vec![sq64::Args { x: 0.5, y: 2.0 }; 10];
    match sq64::kernel(&d).value_and_grad(&args) {
        Err(Error::Unsupported(msg)) => {
            assert!(msg.contains("sq64::adjoint"), "names the kernel: {msg}");
            assert!(msg.contains("SHADER_F64"), "names the feature: {msg}");
            assert!(msg.contains("Device::cpu()"), "says the way out: {msg}");
        }
        other => panic!("expected Error::Unsupported, got {:?}", other.map(|_| ())),
    }
    // The CPU device runs it, and f32 kernels still run on the GPU.
    let (v, _) = sq64::kernel(&Device::cpu())
        .value_and_grad(&args)
        .expect("CPU");
    assert_eq!(v[0], sq64(0.5, 2.0));
    let a32 = vec![sq32::Args { x: 0.5, y: 2.0 }; 10];
    let (v32, _) = sq32::kernel(&d)
        .value_and_grad(&a32)
        .expect("f32 on the GPU");
    assert!((v32[0] - sq32(0.5, 2.0)).abs() < 1e-5);
}
