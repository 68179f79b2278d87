// Hand-written: the value of the 16-way soft logic gate's loss, (g - target)^2 with g the
// softmax(logits)-weighted mix of the 16 relaxed functions of (a, b); 3 words per element
// (a, b, target), the 16 logits shared by the batch.
struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
// The shared words in a uniform buffer, as the generated kernels read them (through the
// constant cache: the same words for every thread).
@group(0) @binding(4) var<uniform> shared_args: array<vec4<f32>, 4>;

fn sw(k: u32) -> f32 {
    return shared_args[k / 4u][k % 4u];
}

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= params.n) {
        return;
    }
    let a = args[i * 3u];
    let b = args[i * 3u + 1u];
    let ops = gate_ops(a, b);
    var m = sw(0u);
    for (var k = 1u; k < 16u; k++) {
        m = max(m, sw(k));
    }
    var z = 0.0f;
    var out = 0.0f;
    for (var k = 0u; k < 16u; k++) {
        let e = exp(sw(k) - m);
        z += e;
        out = fma(e, ops[k], out);
    }
    let r = out / z - args[i * 3u + 2u];
    values[i] = r * r;
}
