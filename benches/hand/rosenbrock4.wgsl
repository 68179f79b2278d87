// Hand-written: value and gradient of the 4-dimensional Rosenbrock function.
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
    let a0 = x.y - x.x * x.x;
    let a1 = x.z - x.y * x.y;
    let a2 = x.w - x.z * x.z;
    let b0 = 1.0 - x.x;
    let b1 = 1.0 - x.y;
    let b2 = 1.0 - x.z;
    values[i] = 100.0 * (a0 * a0 + a1 * a1 + a2 * a2) + b0 * b0 + b1 * b1 + b2 * b2;
    grads[i] = vec4<f32>(
        -400.0 * x.x * a0 - 2.0 * b0,
        200.0 * a0 - 400.0 * x.y * a1 - 2.0 * b1,
        200.0 * a1 - 400.0 * x.z * a2 - 2.0 * b2,
        200.0 * a2,
    );
}
