// Hand-written: value of the 8-16-1 tanh network's loss and the gradient of the batch's sum
// in the 161 shared weights. Each thread takes params.per_thread elements (runs of 256 per
// workgroup, as the runtime dispatches any kernel that reduces shared gradients): forward
// then backward in registers, the shared gradient added up in private arrays; then, once
// per workgroup, 21 sums of 8 words to shared_partials. The generated second pass adds
// the workgroups' partials.
struct Params {
    n: u32,
    per_thread: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
// The shared words in a uniform buffer, as the generated kernels read them (through the
// constant cache: the same words for every thread).
@group(0) @binding(4) var<uniform> shared_args: array<vec4<f32>, 41>;
@group(0) @binding(5) var<storage, read_write> shared_partials: array<f32>;

fn sw(k: u32) -> f32 {
    return shared_args[k / 4u][k % 4u];
}

@compute @workgroup_size(256)
fn adjoint(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let group = wid.x + wid.y * groups.x;
    var gw1: array<f32, 128>;
    var gb1: array<f32, 16>;
    var gw2: array<f32, 16>;
    var gb2 = 0.0f;
    for (var nth = 0u; nth < params.per_thread; nth++) {
        let first = (group * params.per_thread + nth) * 256u;
        if (first >= params.n) {
            break;
        }
        let i = first + lid;
        // Every thread reaches the barriers: threads past the end add zero.
        let in_batch = i < params.n;
        let e = min(i, params.n - 1u);
        var x: array<f32, 8>;
        for (var k = 0u; k < 8u; k++) {
            x[k] = args[e * 9u + k];
        }
        var h: array<f32, 16>;
        var y = sw(160u);
        for (var j = 0u; j < 16u; j++) {
            var s = sw(128u + j);
            for (var k = 0u; k < 8u; k++) {
                s = fma(sw(j * 8u + k), x[k], s);
            }
            h[j] = tanh_accurate(s);
            y = fma(sw(144u + j), h[j], y);
        }
        let r = y - args[e * 9u + 8u];
        if (in_batch) {
            values[i] = r * r;
        }
        let dy = select(0.0f, 2.0f * r, in_batch);
        for (var j = 0u; j < 16u; j++) {
            let ds = dy * sw(144u + j) * (1.0f - h[j] * h[j]);
            for (var k = 0u; k < 8u; k++) {
                gw1[j * 8u + k] = fma(ds, x[k], gw1[j * 8u + k]);
            }
            gb1[j] += ds;
            gw2[j] = fma(dy, h[j], gw2[j]);
        }
        gb2 += dy;
    }
    // w1[j * 8 + k], one hidden unit per sum of 8 words; b1; w2; b2.
    for (var j = 0u; j < 16u; j++) {
        for (var k = 0u; k < 8u; k++) {
            stage[k * 256u + lid] = gw1[j * 8u + k];
        }
        reduce8(lid, group, 161u, j * 8u, 8u);
    }
    for (var half = 0u; half < 2u; half++) {
        for (var k = 0u; k < 8u; k++) {
            stage[k * 256u + lid] = gb1[half * 8u + k];
        }
        reduce8(lid, group, 161u, 128u + half * 8u, 8u);
    }
    for (var half = 0u; half < 2u; half++) {
        for (var k = 0u; k < 8u; k++) {
            stage[k * 256u + lid] = gw2[half * 8u + k];
        }
        reduce8(lid, group, 161u, 144u + half * 8u, 8u);
    }
    stage[lid] = gb2;
    reduce8(lid, group, 161u, 160u, 1u);
}
