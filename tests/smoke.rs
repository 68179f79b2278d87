use gradfuse::differentiable;

#[differentiable]
pub fn rosen(x: f32, p: [f32; 3]) -> f32 {
    let a = p[0] - x;
    let b = p[1] - x * x;
    a * a + 100.0 * b * b + p[2].sin() * x.exp()
}

#[test]
fn smoke() {
    println!("{}", rosen::WGSL_ADJOINT);
    let args = rosen::Args {
        x: 0.5,
        p: [1.0, 2.0, 0.3],
    };
    let (v, g) = rosen::value_and_grad(&args);
    println!("{v} {g:?} {}", rosen(0.5, [1.0, 2.0, 0.3]));
    let dev = gradfuse::Device::gpu().unwrap();
    println!("{}", dev.describe());
    let (vs, gs) = rosen::kernel(&dev).value_and_grad(&[args; 3]).unwrap();
    println!("{vs:?} {gs:?}");
}
