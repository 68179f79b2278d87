// net32's value kernel with both layers' products on tensor cores (cooperative matrices,
// f16 inputs split hi + lo by a mask, lo scaled by 2^11 into a second f32 accumulator): a screen, not generated.
enable f16;
enable wgpu_cooperative_matrix;

struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> args: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(4) var<uniform> shared_args: array<vec4<f32>, 345>;

var<workgroup> w2h: array<f16, 1024>;
var<workgroup> w2l: array<f16, 1024>;
var<workgroup> w1h: array<f16, 512>;
var<workgroup> w1l: array<f16, 512>;
var<workgroup> xh: array<f16, 1024>;
var<workgroup> xl: array<f16, 1024>;
var<workgroup> h1h: array<f16, 2048>;
var<workgroup> h1l: array<f16, 2048>;
var<workgroup> stage: array<f32, 2048>;
var<workgroup> stage2: array<f32, 2048>;
var<workgroup> zero: array<f32, 256>;
var<workgroup> red: array<f32, 256>;

// f16 halves of v: the top 11 bits of its significand, cut by a mask the compiler cannot
// fold, and the rest, scaled by 2^11 so that it is a normal f16.
fn hi16(v: f32) -> f16 {
    return f16(bitcast<f32>(bitcast<u32>(v) & 0xFFFFE000u));
}

fn lo16(v: f32) -> f16 {
    return f16((v - bitcast<f32>(bitcast<u32>(v) & 0xFFFFE000u)) * 2048.0);
}

fn sh(k: u32) -> f32 {
    return shared_args[k / 4u][k % 4u];
}

// tanh to about 2 ulp (Cephes' tanhf): a polynomial below 0.625, where
// 1 - 2 / (exp(2|x|) + 1) would cancel; drivers may use a 2^-11 approximation.
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



@compute @workgroup_size(256)
fn forward(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let first = (wid.x + wid.y * groups.x) * 256u;
    if (first >= params.n) {
        return;
    }
    for (var idx = lid; idx < 1024u; idx += 256u) {
        let w = sh(288u + idx);
        w2h[idx] = hi16(w);
        w2l[idx] = lo16(w);
    }
    for (var idx = lid; idx < 512u; idx += 256u) {
        let j = idx / 16u;
        let k = idx % 16u;
        let w = select(0.0, sh(j * 8u + min(k, 7u)), k < 8u);
        w1h[idx] = hi16(w);
        w1l[idx] = lo16(w);
    }
    // Rows 8..15 of the inputs' tile (16 x 64) stay zero.
    for (var idx = 512u + lid; idx < 1024u; idx += 256u) {
        xh[idx] = f16(0.0);
        xl[idx] = f16(0.0);
    }
    zero[lid] = 0.0;
    let sg = lid / 32u;
    let jt = sg / 4u;
    let et = sg % 4u;
    let e = lid % 64u;
    let part = lid / 64u;
    for (var c = 0u; c < 4u; c++) {
        let base = first + c * 64u;
        let i_in = min(base + e, params.n - 1u);
        for (var k = part; k < 8u; k += 4u) {
            let xv = args[i_in * 9u + k];
            xh[k * 64u + e] = hi16(xv);
            xl[k * 64u + e] = lo16(xv);
        }
        workgroupBarrier();
        var acc = coopLoadT<coop_mat16x16<f32, C>>(&zero[0], 16u);
        var accx = acc;
        {
            let ah = coopLoadT<coop_mat16x16<f16, A>>(&w1h[jt * 256u], 16u);
            let al = coopLoadT<coop_mat16x16<f16, A>>(&w1l[jt * 256u], 16u);
            let bh = coopLoadT<coop_mat16x16<f16, B>>(&xh[et * 16u], 64u);
            let bl = coopLoadT<coop_mat16x16<f16, B>>(&xl[et * 16u], 64u);
            acc = coopMultiplyAdd(ah, bh, acc);
            accx = coopMultiplyAdd(ah, bl, accx);
            accx = coopMultiplyAdd(al, bh, accx);
        }
        coopStoreT(acc, &stage[jt * 1024u + et * 16u], 64u);
        coopStoreT(accx, &stage2[jt * 1024u + et * 16u], 64u);
        workgroupBarrier();
        for (var r = 0u; r < 8u; r++) {
            let idx = lid + r * 256u;
            let j = idx / 64u;
            let h = gf_tanh(stage[idx] + stage2[idx] * (1.0 / 2048.0) + sh(256u + j));
            h1h[idx] = hi16(h);
            h1l[idx] = lo16(h);
        }
        workgroupBarrier();
        var acc2 = coopLoadT<coop_mat16x16<f32, C>>(&zero[0], 16u);
        var acc2x = acc2;
        for (var kb = 0u; kb < 2u; kb++) {
            let ah = coopLoadT<coop_mat16x16<f16, A>>(&w2h[jt * 512u + kb * 16u], 32u);
            let al = coopLoadT<coop_mat16x16<f16, A>>(&w2l[jt * 512u + kb * 16u], 32u);
            let bh = coopLoadT<coop_mat16x16<f16, B>>(&h1h[kb * 1024u + et * 16u], 64u);
            let bl = coopLoadT<coop_mat16x16<f16, B>>(&h1l[kb * 1024u + et * 16u], 64u);
            acc2 = coopMultiplyAdd(ah, bh, acc2);
            acc2x = coopMultiplyAdd(ah, bl, acc2x);
            acc2x = coopMultiplyAdd(al, bh, acc2x);
        }
        coopStoreT(acc2, &stage[jt * 1024u + et * 16u], 64u);
        coopStoreT(acc2x, &stage2[jt * 1024u + et * 16u], 64u);
        workgroupBarrier();
        // Thread (part, e) sums rows 8 part .. 8 part + 7 of w3 . h2 for element e.
        var p = 0.0;
        for (var r = 0u; r < 8u; r++) {
            let j = part * 8u + r;
            p += sh(1344u + j) * gf_tanh(stage[j * 64u + e] + stage2[j * 64u + e] * (1.0 / 2048.0) + sh(1312u + j));
        }
        red[part * 64u + e] = p;
        workgroupBarrier();
        if (lid < 64u) {
            let i = base + lid;
            let y = sh(1376u) + ((red[lid] + red[64u + lid]) + (red[128u + lid] + red[192u + lid]));
            if (i < params.n) {
                let t = args[i * 9u + 8u];
                values[i] = (y - t) * (y - t);
            }
        }
        workgroupBarrier();
    }
}
