// Hand-written: value of sin(x0) exp(x1) + ln(x2) sqrt(x3), vec4 loads.
struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= params.n) {
        return;
    }
    let x = args[i];
    values[i] = sin(x.x) * exp(x.y) + log(x.z) * sqrt(x.w);
}
