// Hand-written: the value of the 8-16-1 tanh network's loss, (y - target)^2, 9 words per
// element (x[8], target), the 161 weights shared by the batch (w1[128], b1[16], w2[16], b2).
struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
// The shared words in a uniform buffer, as the generated kernels read them (through the
// constant cache: the same words for every thread).
@group(0) @binding(4) var<uniform> shared_args: array<vec4<f32>, 41>;

fn sw(k: u32) -> f32 {
    return shared_args[k / 4u][k % 4u];
}

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= params.n) {
        return;
    }
    var x: array<f32, 8>;
    for (var k = 0u; k < 8u; k++) {
        x[k] = args[i * 9u + k];
    }
    var y = sw(160u);
    for (var j = 0u; j < 16u; j++) {
        var s = sw(128u + j);
        for (var k = 0u; k < 8u; k++) {
            s = fma(sw(j * 8u + k), x[k], s);
        }
        y = fma(sw(144u + j), tanh_accurate(s), y);
    }
    let r = y - args[i * 9u + 8u];
    values[i] = r * r;
}
