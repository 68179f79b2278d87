struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(4) var<uniform> shared_args: array<vec4<f32>, 1201>;

// tanh to about 2 ulp (Cephes' tanhf): a polynomial below 0.625, where
// 1 - 2 / (exp(2|x|) + 1) would cancel; drivers may use a 2^-11 approximation.
fn gf_tanh(x: f32) -> f32 {
    let ax = abs(x);
    if (ax >= 0.625) {
        if (!(ax < 9.0)) {
            return select(1.0, -1.0, x < 0.0);
        }
        let t = 1.0 - 2.0 / (exp(2.0 * ax) + 1.0);
        return select(t, -t, x < 0.0);
    }
    let z = x * x;
    return ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;
}

// Threads per workgroup: the runtime times the kernel at several sizes on the
// device and keeps the fastest (a register-heavy kernel keeps more warps busy in
// smaller workgroups); every size gives the same results.
override gf_workgroup_size: u32 = 256;

