// Every supported construct of the straight-line language, and the generated API used
// with the types users rely on.
use gradfuse::{Device, Dual, differentiable};

#[differentiable]
pub fn everything(x: f32, p: [f32; 3], w: [f32; 2]) -> f32 {
    let a = p[0] * x + p[1] - p[2] / 2.0;
    let b: f32 = -a + 1.5f32;
    let v = [a, b, x];
    let z: [f32; 2] = [0.25; 2];
    let t = v[0].sin() + v[1].cos() * v[2].tan() + z[1];
    let u = (0.5 * x).asin() + (0.25 * x).acos() + x.atan() + x.atan2(b);
    let h = x.sinh() + x.cosh() + x.tanh();
    let e = x.exp() + x.exp2() + (x * x + 1.0).ln() + (x * x + 1.0).log2() + (x * x + 2.0).log10();
    let r = (x * x + 1.0).sqrt() + (x + 3.0).recip() + x.powi(3) + (x * x + 1.0).powf(w[0]);
    let n = x.abs() + x.signum() + x.min(b) + x.max(b) + x.clamp(-1.0, 1.0);
    let k = x.floor() + x.ceil() + x.round() + x.mul_add(w[1], b) + x.hypot(b);
    let s = f32::sin(x) + std::f32::consts::PI + core::f32::consts::E;
    t + u + h + e + r + n + k + s
}

mod nested {
    use gradfuse::differentiable;

    #[differentiable]
    pub(crate) fn private_in_module(x: f32) -> f32 {
        x * x
    }
}

fn main() {
    // The function itself.
    let _: f32 = everything(0.5, [1.0, 2.0, 3.0], [0.5, 0.25]);
    // Args and Grad are Pod, with fields named after the parameters.
    let args = everything::Args { x: 0.5, p: [1.0, 2.0, 3.0], w: [0.5, 0.25] };
    let _bytes: &[u8] = bytemuck::bytes_of(&args);
    let (_v, g): (f32, everything::Grad) = everything::value_and_grad(&args);
    let _: [f32; 3] = g.p;
    let (_v, _d): (f32, f32) = everything::jvp(&args, &g);
    // eval for f32, f64 and duals.
    let _: f32 = everything::eval(0.5f32, [1.0; 3], [0.5; 2]);
    let _: f64 = everything::eval(0.5f64, [1.0; 3], [0.5; 2]);
    let d = everything::eval(
        Dual::<f64, 6>::variable(0.5, 0),
        [Dual::constant(1.0); 3],
        [Dual::constant(0.5); 2],
    );
    let _: [f64; 6] = d.tangent();
    let _: &str = everything::WGSL_FORWARD;
    let _: &str = everything::WGSL_ADJOINT;
    let device = Device::cpu();
    let _: Result<Vec<f32>, gradfuse::Error> = everything::kernel(&device).value(&[args]);
    let _: Result<(Vec<f32>, Vec<everything::Grad>), gradfuse::Error> =
        everything::kernel(&device).value_and_grad(&[args]);
    let _ = nested::private_in_module::value_and_grad(&nested::private_in_module::Args { x: 1.0 });
}
