// Hand-written: value and gradient of the 16-way soft logic gate's loss: d/da and d/db per
// element, and the gradient of the batch's sum in the 16 shared logits. Each thread takes
// params.per_thread elements (runs of 256 per workgroup, as the runtime dispatches any
// kernel that reduces shared gradients) and adds up their logit gradients in a private
// array; then two sums of 8 words per workgroup (the generated second pass adds the
// workgroups' partials).
struct Params {
    n: u32,
    per_thread: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(3) var<storage, read_write> grads: array<vec2<f32>>;
// The shared words in a uniform buffer, as the generated kernels read them (through the
// constant cache: the same words for every thread).
@group(0) @binding(4) var<uniform> shared_args: array<vec4<f32>, 4>;
@group(0) @binding(5) var<storage, read_write> shared_partials: array<f32>;

fn sw(k: u32) -> f32 {
    return shared_args[k / 4u][k % 4u];
}

@compute @workgroup_size(256)
fn adjoint(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let group = wid.x + wid.y * groups.x;
    // The softmax of the logits is the same for every element: computed once.
    var m = sw(0u);
    for (var k = 1u; k < 16u; k++) {
        m = max(m, sw(k));
    }
    var e: array<f32, 16>;
    var z = 0.0f;
    for (var k = 0u; k < 16u; k++) {
        e[k] = exp(sw(k) - m);
        z += e[k];
    }
    var glogits: array<f32, 16>;
    for (var nth = 0u; nth < params.per_thread; nth++) {
        let first = (group * params.per_thread + nth) * 256u;
        if (first >= params.n) {
            break;
        }
        let i = first + lid;
        let in_batch = i < params.n;
        let el = min(i, params.n - 1u);
        let a = args[el * 3u];
        let b = args[el * 3u + 1u];
        let ops = gate_ops(a, b);
        var out = 0.0f;
        for (var k = 0u; k < 16u; k++) {
            out = fma(e[k], ops[k], out);
        }
        let g = out / z;
        let r = g - args[el * 3u + 2u];
        let dg = select(0.0f, 2.0f * r, in_batch);
        // d g / d logit k = p_k (ops_k - g); d g / d a = sum p_k d ops_k / d a.
        let da_ops = gate_ops_da(a, b);
        let db_ops = gate_ops_db(a, b);
        var da = 0.0f;
        var db = 0.0f;
        let scale = dg / z;
        for (var k = 0u; k < 16u; k++) {
            da = fma(e[k], da_ops[k], da);
            db = fma(e[k], db_ops[k], db);
            glogits[k] = fma(scale * e[k], ops[k] - g, glogits[k]);
        }
        if (in_batch) {
            values[i] = r * r;
            grads[i] = vec2<f32>(scale * da, scale * db);
        }
    }
    for (var half = 0u; half < 2u; half++) {
        for (var k = 0u; k < 8u; k++) {
            stage[k * 256u + lid] = glogits[half * 8u + k];
        }
        reduce8(lid, group, 16u, half * 8u, 8u);
    }
}
