// Hand-written: value and gradient of |q - p| - rest for 7 packed words (p, q, rest).
struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(3) var<storage, read_write> grads: array<f32>;

@compute @workgroup_size(256)
fn adjoint(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= params.n) {
        return;
    }
    let a = i * 7u;
    let d = vec3<f32>(args[a + 3u] - args[a], args[a + 4u] - args[a + 1u], args[a + 5u] - args[a + 2u]);
    let len = length(d);
    values[i] = len - args[a + 6u];
    let u = d / len;
    grads[a] = -u.x;
    grads[a + 1u] = -u.y;
    grads[a + 2u] = -u.z;
    grads[a + 3u] = u.x;
    grads[a + 4u] = u.y;
    grads[a + 5u] = u.z;
    grads[a + 6u] = -1.0;
}
