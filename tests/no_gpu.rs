//! `Device::auto` without a GPU: the CPU fallback, or an error under GRADFUSE_REQUIRE_GPU=1.
//! A test binary of its own, because it changes the process environment: WGPU_BACKEND names
//! a backend this build does not have, so wgpu finds no adapter even on a machine with one.

use gradfuse::{Device, Error, differentiable};

#[differentiable]
pub fn square(x: f32) -> f32 {
    x * x
}

#[test]
fn auto_falls_back_to_the_cpu_or_fails_when_a_gpu_is_required() {
    // SAFETY: the only test of this binary, run before any other thread reads the variables.
    unsafe {
        std::env::set_var("WGPU_BACKEND", "gl");
        std::env::set_var(gradfuse::REQUIRE_GPU_ENV, "1");
    }
    assert!(matches!(Device::gpu(), Err(Error::NoAdapter(_))));
    match Device::auto() {
        Err(Error::GpuRequired(msg)) => assert!(!msg.is_empty()),
        other => panic!("GRADFUSE_REQUIRE_GPU=1 without a GPU must be an error, got {other:?}"),
    }
    // SAFETY: as above.
    unsafe { std::env::remove_var(gradfuse::REQUIRE_GPU_ENV) };
    let d = Device::auto().expect("the CPU fallback");
    assert!(!d.is_gpu());
    let (v, g) = square::kernel(&d)
        .value_and_grad(&[square::Args { x: 3.0 }])
        .unwrap();
    assert_eq!((v, g), (vec![9.0], vec![square::Grad { x: 6.0 }]));
}
