// Hand-written: value of the 8-16-1 tanh network's loss and the gradient of the batch's sum
// in the 161 shared weights: per element, forward then backward in registers; per
// workgroup, 21 sums of 8 words (the 8 weights of one hidden unit at a time) to
// shared_partials; the generated second pass adds the workgroups' partials.
struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(4) var<storage, read> shared_args: array<f32>;
@group(0) @binding(5) var<storage, read_write> shared_partials: array<f32>;

@compute @workgroup_size(256)
fn adjoint(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = gid.x + gid.y * groups.x * 256u;
    let group = i / 256u;
    // Every thread reaches the barriers: threads past the end contribute zero.
    let in_batch = i < params.n;
    let e = min(i, params.n - 1u);
    var x: array<f32, 8>;
    for (var k = 0u; k < 8u; k++) {
        x[k] = args[e * 9u + k];
    }
    var h: array<f32, 16>;
    var y = shared_args[160u];
    for (var j = 0u; j < 16u; j++) {
        var s = shared_args[128u + j];
        for (var k = 0u; k < 8u; k++) {
            s = fma(shared_args[j * 8u + k], x[k], s);
        }
        h[j] = tanh_accurate(s);
        y = fma(shared_args[144u + j], h[j], y);
    }
    let r = y - args[e * 9u + 8u];
    if (in_batch) {
        values[i] = r * r;
    }
    let dy = select(0.0f, 2.0f * r, in_batch);
    var ds: array<f32, 16>;
    for (var j = 0u; j < 16u; j++) {
        ds[j] = dy * shared_args[144u + j] * (1.0f - h[j] * h[j]);
    }
    // w1[j * 8 + k]: ds[j] * x[k], one hidden unit per group of 8 words.
    for (var j = 0u; j < 16u; j++) {
        for (var k = 0u; k < 8u; k++) {
            stage[k * 256u + lid] = ds[j] * x[k];
        }
        reduce8(lid, group, 161u, j * 8u, 8u);
    }
    // b1: ds; w2: dy * h; b2: dy.
    for (var half = 0u; half < 2u; half++) {
        for (var k = 0u; k < 8u; k++) {
            stage[k * 256u + lid] = ds[half * 8u + k];
        }
        reduce8(lid, group, 161u, 128u + half * 8u, 8u);
    }
    for (var half = 0u; half < 2u; half++) {
        for (var k = 0u; k < 8u; k++) {
            stage[k * 256u + lid] = dy * h[half * 8u + k];
        }
        reduce8(lid, group, 161u, 144u + half * 8u, 8u);
    }
    stage[lid] = dy;
    reduce8(lid, group, 161u, 160u, 1u);
}
