// Hand-written: value and gradient of sin(x0) exp(x1) + ln(x2) sqrt(x3), vec4 loads and stores.
struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(3) var<storage, read_write> grads: array<vec4<f32>>;

@compute @workgroup_size(256)
fn adjoint(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= params.n) {
        return;
    }
    let x = args[i];
    let s = sin(x.x);
    let e = exp(x.y);
    let l = log(x.z);
    let r = sqrt(x.w);
    values[i] = s * e + l * r;
    grads[i] = vec4<f32>(cos(x.x) * e, s * e, r / x.z, 0.5 * l / r);
}
