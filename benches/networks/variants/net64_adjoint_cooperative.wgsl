// PROTOTYPE (hand-written, not the generator): the 8-64-64-1 network's adjoint with its
// layers computed by the whole workgroup as tiled matrix products over chunks of 64
// elements, activations in workgroup memory. Same bindings and outputs as the generated
// adjoint (values, and each workgroup's row of shared_partials).

struct Params {
    n: u32,
    per_thread: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(4) var<uniform> shared_args: array<vec4<f32>, 1201>;
@group(0) @binding(5) var<storage, read_write> shared_partials: array<f32>;

// Feature-major tiles of a chunk of 64 elements: [feature][element / 4] as vec4s.
var<workgroup> xs: array<vec4<f32>, 128>;   // 8 x 64
var<workgroup> h1s: array<vec4<f32>, 1024>; // 64 x 64: h1, then d_s1
var<workgroup> h2s: array<vec4<f32>, 1024>; // 64 x 64: h2, then d_s2
var<workgroup> ts: array<f32, 64>;
var<workgroup> dys: array<f32, 64>;

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

fn tanh4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(gf_tanh(v.x), gf_tanh(v.y), gf_tanh(v.z), gf_tanh(v.w));
}

// Shared word `w` (w1 at 0, w2 at 576, w3 at 4736).
fn sw(w: u32) -> f32 {
    return shared_args[w / 4u][w % 4u];
}

@compute @workgroup_size(256)
fn adjoint(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let group = wid.x + wid.y * groups.x;
    let per_thread = params.per_thread;
    let n = params.n;
    // Tile of this thread: rows 4 * tr .. + 4, element quad tq (or columns 4 * tq .. + 4).
    let tr = lid / 16u;
    let tq = lid % 16u;
    // Sums this thread owns: d w2 rows 4tr.., columns 4tq.. (one vec4 per row);
    var g_w2: array<vec4<f32>, 4>;
    // d w1 (row lid / 4, columns 2 (lid % 4) + 0, 1);
    var g_w1 = vec2<f32>(0.0);
    // lid < 64: d b1[lid], d b2[lid], d w3[lid]; lid == 64: d b3.
    var g_b1 = 0.0f;
    var g_b2 = 0.0f;
    var g_w3 = 0.0f;
    for (var nth = 0u; nth < per_thread; nth++) {
        let run_first = (group * per_thread + nth) * 256u;
        if (run_first >= n) {
            break;
        }
        for (var chunk = 0u; chunk < 4u; chunk++) {
            let first = run_first + chunk * 64u;
            if (first >= n) {
                break;
            }
            workgroupBarrier();
            // The chunk's arguments, feature-major.
            for (var w = lid; w < 576u; w += 256u) {
                let e = w / 9u;
                let f = w % 9u;
                let v = args[min(first + e, n - 1u) * 9u + f];
                if (f < 8u) {
                    xs[f * 16u + e / 4u][e % 4u] = v;
                } else {
                    ts[e] = v;
                }
            }
            workgroupBarrier();
            // Layer 1: h1[j][e] = tanh(b1[j] + sum_k w1[8j + k] x[k][e]).
            for (var r = 0u; r < 4u; r++) {
                let j = 4u * tr + r;
                var acc = vec4<f32>(sw(512u + j));
                let wa = shared_args[2u * j];
                let wb = shared_args[2u * j + 1u];
                acc += wa.x * xs[0u * 16u + tq];
                acc += wa.y * xs[1u * 16u + tq];
                acc += wa.z * xs[2u * 16u + tq];
                acc += wa.w * xs[3u * 16u + tq];
                acc += wb.x * xs[4u * 16u + tq];
                acc += wb.y * xs[5u * 16u + tq];
                acc += wb.z * xs[6u * 16u + tq];
                acc += wb.w * xs[7u * 16u + tq];
                h1s[j * 16u + tq] = tanh4(acc);
            }
            workgroupBarrier();
            // Layer 2: h2[j][e] = tanh(b2[j] + sum_k w2[64j + k] h1[k][e]).
            var a0 = vec4<f32>(sw(4672u + 4u * tr));
            var a1 = vec4<f32>(sw(4672u + 4u * tr + 1u));
            var a2 = vec4<f32>(sw(4672u + 4u * tr + 2u));
            var a3 = vec4<f32>(sw(4672u + 4u * tr + 3u));
            for (var k = 0u; k < 64u; k += 4u) {
                let h0 = h1s[k * 16u + tq];
                let h1 = h1s[(k + 1u) * 16u + tq];
                let h2 = h1s[(k + 2u) * 16u + tq];
                let h3 = h1s[(k + 3u) * 16u + tq];
                let base = 144u + (4u * tr) * 16u + k / 4u;
                let w0 = shared_args[base];
                let w1 = shared_args[base + 16u];
                let w2 = shared_args[base + 32u];
                let w3 = shared_args[base + 48u];
                a0 += w0.x * h0; a0 += w0.y * h1; a0 += w0.z * h2; a0 += w0.w * h3;
                a1 += w1.x * h0; a1 += w1.y * h1; a1 += w1.z * h2; a1 += w1.w * h3;
                a2 += w2.x * h0; a2 += w2.y * h1; a2 += w2.z * h2; a2 += w2.w * h3;
                a3 += w3.x * h0; a3 += w3.y * h1; a3 += w3.z * h2; a3 += w3.w * h3;
            }
            h2s[(4u * tr) * 16u + tq] = tanh4(a0);
            h2s[(4u * tr + 1u) * 16u + tq] = tanh4(a1);
            h2s[(4u * tr + 2u) * 16u + tq] = tanh4(a2);
            h2s[(4u * tr + 3u) * 16u + tq] = tanh4(a3);
            workgroupBarrier();
            // The output, the loss and its seed, one thread an element.
            if (lid < 64u) {
                let e = lid;
                var y = sw(4800u);
                for (var j = 0u; j < 64u; j++) {
                    y += sw(4736u + j) * h2s[j * 16u + e / 4u][e % 4u];
                }
                let i = first + e;
                let in_batch = i < n;
                let d = y - ts[e];
                if (in_batch) {
                    values[i] = d * d;
                }
                let dd = select(0.0f, 1.0f, in_batch) * d;
                dys[e] = dd + dd;
            }
            workgroupBarrier();
            let dy4 = vec4<f32>(dys[4u * tq], dys[4u * tq + 1u], dys[4u * tq + 2u], dys[4u * tq + 3u]);
            // d w3[j] = sum_e h2[j][e] d_y[e]; d b3 = sum_e d_y[e].
            if (lid < 64u) {
                for (var q = 0u; q < 16u; q++) {
                    let d = vec4<f32>(dys[4u * q], dys[4u * q + 1u], dys[4u * q + 2u], dys[4u * q + 3u]);
                    g_w3 += dot(h2s[lid * 16u + q], d);
                }
            } else if (lid == 64u) {
                for (var e = 0u; e < 64u; e++) {
                    g_w3 += dys[e];
                }
            }
            workgroupBarrier();
            // d_s2[j][e] = (1 - h2^2) w3[j] d_y[e], in place of h2.
            for (var r = 0u; r < 4u; r++) {
                let j = 4u * tr + r;
                let h = h2s[j * 16u + tq];
                h2s[j * 16u + tq] = (vec4<f32>(1.0) - h * h) * (sw(4736u + j) * dy4);
            }
            workgroupBarrier();
            // d w2[j][k] += sum_e d_s2[j][e] h1[k][e] (rows 4tr.., columns 4tq..); d b2.
            for (var q = 0u; q < 16u; q++) {
                let d0 = h2s[(4u * tr) * 16u + q];
                let d1 = h2s[(4u * tr + 1u) * 16u + q];
                let d2 = h2s[(4u * tr + 2u) * 16u + q];
                let d3 = h2s[(4u * tr + 3u) * 16u + q];
                let c0 = h1s[(4u * tq) * 16u + q];
                let c1 = h1s[(4u * tq + 1u) * 16u + q];
                let c2 = h1s[(4u * tq + 2u) * 16u + q];
                let c3 = h1s[(4u * tq + 3u) * 16u + q];
                g_w2[0] += vec4<f32>(dot(d0, c0), dot(d0, c1), dot(d0, c2), dot(d0, c3));
                g_w2[1] += vec4<f32>(dot(d1, c0), dot(d1, c1), dot(d1, c2), dot(d1, c3));
                g_w2[2] += vec4<f32>(dot(d2, c0), dot(d2, c1), dot(d2, c2), dot(d2, c3));
                g_w2[3] += vec4<f32>(dot(d3, c0), dot(d3, c1), dot(d3, c2), dot(d3, c3));
            }
            if (lid < 64u) {
                for (var q = 0u; q < 16u; q++) {
                    g_b2 += dot(h2s[lid * 16u + q], vec4<f32>(1.0));
                }
            }
            // d_h1[k][e] = sum_j w2[64j + k] d_s2[j][e] (columns 4tr.., element quad tq).
            var b0 = vec4<f32>(0.0);
            var b1 = vec4<f32>(0.0);
            var b2 = vec4<f32>(0.0);
            var b3 = vec4<f32>(0.0);
            for (var jj = 0u; jj < 64u; jj++) {
                let j = 63u - jj;
                let w = shared_args[144u + j * 16u + tr];
                let d = h2s[j * 16u + tq];
                b0 += w.x * d; b1 += w.y * d; b2 += w.z * d; b3 += w.w * d;
            }
            workgroupBarrier();
            // d_s1 = (1 - h1^2) d_h1, in place of h1.
            {
                let k = 4u * tr;
                let h0 = h1s[k * 16u + tq];
                let h1 = h1s[(k + 1u) * 16u + tq];
                let h2 = h1s[(k + 2u) * 16u + tq];
                let h3 = h1s[(k + 3u) * 16u + tq];
                h1s[k * 16u + tq] = (vec4<f32>(1.0) - h0 * h0) * b0;
                h1s[(k + 1u) * 16u + tq] = (vec4<f32>(1.0) - h1 * h1) * b1;
                h1s[(k + 2u) * 16u + tq] = (vec4<f32>(1.0) - h2 * h2) * b2;
                h1s[(k + 3u) * 16u + tq] = (vec4<f32>(1.0) - h3 * h3) * b3;
            }
            workgroupBarrier();
            // d w1[j][k] += sum_e d_s1[j][e] x[k][e]; d b1.
            {
                let j = lid / 4u;
                let k = 2u * (lid % 4u);
                for (var q = 0u; q < 16u; q++) {
                    let d = h1s[j * 16u + q];
                    g_w1 += vec2<f32>(dot(d, xs[k * 16u + q]), dot(d, xs[(k + 1u) * 16u + q]));
                }
            }
            if (lid < 64u) {
                for (var q = 0u; q < 16u; q++) {
                    g_b1 += dot(h1s[lid * 16u + q], vec4<f32>(1.0));
                }
            }
        }
    }
    // This workgroup's row: every word stored by the one thread that owns it.
    let row = group * 4801u;
    for (var r = 0u; r < 4u; r++) {
        for (var c = 0u; c < 4u; c++) {
            shared_partials[row + 576u + (4u * tr + r) * 64u + 4u * tq + c] = g_w2[r][c];
        }
    }
    shared_partials[row + (lid / 4u) * 8u + 2u * (lid % 4u)] = g_w1.x;
    shared_partials[row + (lid / 4u) * 8u + 2u * (lid % 4u) + 1u] = g_w1.y;
    if (lid < 64u) {
        shared_partials[row + 512u + lid] = g_b1;
        shared_partials[row + 4672u + lid] = g_b2;
        shared_partials[row + 4736u + lid] = g_w3;
    } else if (lid == 64u) {
        shared_partials[row + 4800u] = g_w3;
    }
}
