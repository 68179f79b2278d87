#!/usr/bin/env python3
"""blocked.py OUT.wgsl [WARPS] [CUT..]: a hand-written adjoint of the 8-64-64-1 network (corpus
function `net64` of networks.rs) whose layers are register-blocked matrix products of the
workgroup, the form a matrix product needs to approach the FMA rate (BENCHMARKS.md, "Layers of
the network": 4 x 4 tiles re-read from workgroup memory ran at 3-4 TFMA/s).

Chunks of 64 elements. Activations and their adjoints live in workgroup memory feature-major,
rows padded to 17 vec4s so that lanes reading different rows hit different banks. Weights are
read from the uniform buffer at warp-uniform addresses (one broadcast per warp, no copy):
  - forward products: warp w owns 64 / WARPS output features, lane l the elements l and l + 32,
    so a thread's tile is (64 / WARPS) features x 2 elements;
  - d_h1 = W2^T d_s2: the same, over input features;
  - d_W2 += d_s2 h1^T, summed over the chunk's elements as vec4 dot products: thread t owns
    rows jb + 16 a and columns kb + (64 / NK) b, kept in registers over the whole run;
  - d_W1 += d_s1 x^T likewise, d_b1 and d_b2 as row sums, d_w3 in registers per thread and
    reduced over lanes at the end. Every sum is in a fixed order: bit-identical over runs.
CUT names a product to leave out (f2, b1, b2), for timing its share (`-unchecked` variants).
Same bindings and outputs as the generated adjoint: values, and a row of shared_partials per
workgroup."""
import sys

import wgsl_text

out = sys.argv[1]
WARPS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
CUTS = set(sys.argv[3:])
T = 32 * WARPS          # threads
FW = 64 // WARPS        # features a warp owns in the forward products
NJ = 16                 # d_W2 row blocks (a thread owns rows jb + 16 a)
NK = T // NJ            # d_W2 column blocks
JA = 64 // NJ           # rows a thread owns
KB = 64 // NK           # columns a thread owns
KQ = T // 64            # d_W1 column groups
K1 = 8 // KQ            # d_W1 columns a thread owns
R = 17                  # vec4s per padded row of 64 elements

L = []
def w(s=''):
    L.append(s)

w('// PROTOTYPE (hand-written, not the generator): benches/networks/variants/blocked.py %s.' % ' '.join(sys.argv[2:]))
w('''@BIND@
// Feature-major rows of a chunk's 64 elements, 17 vec4s a row (one of padding).
var<workgroup> xs: array<vec4<f32>, %d>;    // 8 inputs
var<workgroup> h1s: array<vec4<f32>, %d>;   // h1, then d_s1
var<workgroup> ds2s: array<vec4<f32>, %d>;  // d_s2; at the end, the d_w3 partials
var<workgroup> ts: array<f32, 64>;
var<workgroup> parts: array<f32, %d>;       // each warp's part of each element's output

@TANH@
fn tanh2(v: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(gf_tanh(v.x), gf_tanh(v.y));
}

// Shared word `i` (w1 at 0, b1 at 512, w2 at 576, b2 at 4672, w3 at 4736, b3 at 4800).
fn sw(i: u32) -> f32 {
    return shared_args[i / 4u][i %% 4u];
}
''' % (8 * R, 64 * R, max(64 * R, T * FW // 4 + 1), WARPS * 64))

def lanes(arr, row):
    """The lane's two elements (l, l + 32) of row `row` of `arr`, as a vec2."""
    return 'vec2<f32>(%s[%s * 17u + lq][lr], %s[%s * 17u + lq + 8u][lr])' % (arr, row, arr, row)

def store_lanes(arr, row, v):
    w('            %s[%s * 17u + lq][lr] = %s.x;' % (arr, row, v))
    w('            %s[%s * 17u + lq + 8u][lr] = %s.y;' % (arr, row, v))

w('@compute @workgroup_size(%d)' % T)
w('fn adjoint(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {')
w('''    let group = wid.x + wid.y * groups.x;
    let per_thread = params.per_thread;
    let n = params.n;
    let wp = lid / 32u;
    let l = lid %% 32u;
    let lq = l / 4u;
    let lr = l %% 4u;
    let f0 = wp * %du;          // first feature of this warp's forward tiles
    let jb = lid / %du;         // d_W2 row block
    let kb = lid %% %du;         // d_W2 column block
    let j1 = lid %% 64u;         // d_W1 row
    let kq = lid / 64u;         // d_W1 column group''' % (FW, NK, NK))
for a in range(JA):
    w('    var gw2_%d: array<f32, %d>;' % (a, KB))
w('    var gw1: array<f32, %d>;' % K1)
w('    var gw3: array<f32, %d>;' % FW)
w('    var gb1 = 0.0f;')
w('    var gb2 = 0.0f;')
w('    var gb3 = 0.0f;')
w('    for (var nth = 0u; nth < per_thread; nth++) {')
w('        let run_first = (group * per_thread + nth) * %du;' % T)
w('        for (var chunk = 0u; chunk < %du; chunk++) {' % (T // 64))
w('''            let first = run_first + chunk * 64u;
            if (first >= n) {
                break;
            }
            workgroupBarrier();
            for (var q = lid; q < 576u; q += %du) {
                let e = q / 9u;
                let f = q %% 9u;
                let v = args[min(first + e, n - 1u) * 9u + f];
                if (f < 8u) {
                    xs[f * 17u + e / 4u][e %% 4u] = v;
                } else {
                    ts[e] = v;
                }
            }
            workgroupBarrier();''' % T)
# Layer 1.
w('            // h1 = tanh(W1 x + b1): this warp\'s features, this lane\'s two elements.')
for k in range(8):
    w('            let x%d = %s;' % (k, lanes('xs', '%du' % k)))
for jj in range(FW):
    j = 'f0 + %du' % jj
    w('            {')
    w('                let wa = shared_args[2u * (%s)];' % j)
    w('                let wb = shared_args[2u * (%s) + 1u];' % j)
    w('                var s = vec2<f32>(sw(512u + %s));' % j)
    for k, c in enumerate(['wa.x', 'wa.y', 'wa.z', 'wa.w', 'wb.x', 'wb.y', 'wb.z', 'wb.w']):
        w('                s += %s * x%d;' % (c, k))
    w('                let h = tanh2(s);')
    w('                h1s[(%s) * 17u + lq][lr] = h.x;' % j)
    w('                h1s[(%s) * 17u + lq + 8u][lr] = h.y;' % j)
    w('            }')
w('            workgroupBarrier();')
# Layer 2.
w('            // s2 = W2 h1 + b2 over k, 4 at a time; W2 rows read as vec4s.')
for jj in range(FW):
    w('            var a%d = vec2<f32>(sw(4672u + f0 + %du));' % (jj, jj))
if 'f2' not in CUTS:
    w('            for (var k4 = 0u; k4 < 16u; k4++) {')
    for i in range(4):
        w('                let h%d = %s;' % (i, lanes('h1s', '(4u * k4 + %du)' % i)))
    for jj in range(FW):
        w('                {')
        w('                    let wv = shared_args[144u + (f0 + %du) * 16u + k4];' % jj)
        w('                    a%d += wv.x * h0 + wv.y * h1 + wv.z * h2 + wv.w * h3;' % jj)
        w('                }')
    w('            }')
w('            var part = vec2<f32>(0.0);')
for jj in range(FW):
    w('            let t%d = tanh2(a%d);' % (jj, jj))
    w('            part += sw(4736u + f0 + %du) * t%d;' % (jj, jj))
w('            parts[wp * 64u + l] = part.x;')
w('            parts[wp * 64u + l + 32u] = part.y;')
w('            workgroupBarrier();')
# Output and seeds.
def ysum(e):
    terms = ['parts[%du + %s]' % (64 * i, e) for i in range(WARPS)]
    acc = terms[0]
    for t in terms[1:]:
        acc = '(%s + %s)' % (acc, t)
    return acc
w('            let y = vec2<f32>(%s, %s) + vec2<f32>(sw(4800u));' % (ysum('l'), ysum('l + 32u')))
w('''            let d = y - vec2<f32>(ts[l], ts[l + 32u]);
            let inb = vec2<bool>(first + l < n, first + l + 32u < n);
            if (wp == 0u) {
                if (inb.x) {
                    values[first + l] = d.x * d.x;
                }
                if (inb.y) {
                    values[first + l + 32u] = d.y * d.y;
                }
            }
            let dy = select(vec2<f32>(0.0), d + d, inb);
            gb3 += dy.x + dy.y;''')
for jj in range(FW):
    w('            gw3[%d] += dot(t%d, dy);' % (jj, jj))
    w('            {')
    w('                let g = (vec2<f32>(1.0) - t%d * t%d) * (sw(4736u + f0 + %du) * dy);' % (jj, jj, jj))
    store_lanes('ds2s', '(f0 + %du)' % jj, 'g')
    w('            }')
w('            workgroupBarrier();')
# Backward products.
w('            // d_h1 = W2^T d_s2: this warp\'s input features, this lane\'s elements.')
for kk in range(FW):
    w('            var b%d = vec2<f32>(0.0);' % kk)
if 'b1' not in CUTS:
    w('            for (var j = 0u; j < 64u; j++) {')
    w('                let g = %s;' % lanes('ds2s', 'j'))
    for q in range(FW // 4):
        w('                {')
        w('                    let wv = shared_args[144u + j * 16u + f0 / 4u + %du];' % q)
        for c, comp in enumerate('xyzw'):
            w('                    b%d += wv.%s * g;' % (4 * q + c, comp))
        w('                }')
    w('            }')
w('            // d_W2 += d_s2 h1^T over the chunk; d_b2 as row sums.')
if 'b2' not in CUTS:
    w('            for (var e4 = 0u; e4 < 16u; e4++) {')
    for a in range(JA):
        w('                let g%d = ds2s[(jb + %du) * 17u + e4];' % (a, 16 * a))
    for b in range(KB):
        w('                let c%d = h1s[(kb + %du) * 17u + e4];' % (b, NK * b))
    for a in range(JA):
        for b in range(KB):
            w('                gw2_%d[%d] += dot(g%d, c%d);' % (a, b, a, b))
    w('            }')
w('''            if (lid < 64u) {
                var s = vec4<f32>(0.0);
                for (var e4 = 0u; e4 < 16u; e4++) {
                    s += ds2s[lid * 17u + e4];
                }
                gb2 += (s.x + s.y) + (s.z + s.w);
            }
            workgroupBarrier();''')
w('            // d_s1 = (1 - h1^2) d_h1, in place of h1.')
for kk in range(FW):
    w('            {')
    w('                let h = %s;' % lanes('h1s', '(f0 + %du)' % kk))
    w('                let g = (vec2<f32>(1.0) - h * h) * b%d;' % kk)
    store_lanes('h1s', '(f0 + %du)' % kk, 'g')
    w('            }')
w('            workgroupBarrier();')
w('            // d_W1 += d_s1 x^T; d_b1 as row sums.')
w('            {')
w('                var s = vec4<f32>(0.0);')
w('                for (var e4 = 0u; e4 < 16u; e4++) {')
w('                    let g = h1s[j1 * 17u + e4];')
w('                    s += g;')
for b in range(K1):
    w('                    gw1[%d] += dot(g, xs[(%du * kq + %du) * 17u + e4]);' % (b, K1, b))
w('                }')
w('                gb1 += (s.x + s.y) + (s.z + s.w);')
w('            }')
w('        }')
w('    }')
# The row of partial sums.
w('    let row = group * 4801u;')
for a in range(JA):
    for b in range(KB):
        w('    shared_partials[row + 576u + (jb + %du) * 64u + kb + %du] = gw2_%d[%d];' % (16 * a, NK * b, a, b))
for b in range(K1):
    w('    shared_partials[row + j1 * 8u + %du * kq + %du] = gw1[%d];' % (K1, b, b))
w('''    if (lid < 64u) {
        shared_partials[row + 512u + lid] = gb1;
        shared_partials[row + 4672u + lid] = gb2;
    }
    // d_w3: each thread's partials over its elements, summed over the warp's lanes in order.
    workgroupBarrier();''')
for jj in range(FW):
    w('    ds2s[(f0 + %du) * 8u + l / 4u][l %% 4u] = gw3[%d];' % (jj, jj))
w('''    if (wp == 0u) {
        parts[l] = gb3;
    }
    workgroupBarrier();
    if (lid < 64u) {
        var s = vec4<f32>(0.0);
        for (var q = 0u; q < 8u; q++) {
            s += ds2s[lid * 8u + q];
        }
        shared_partials[row + 4736u + lid] = (s.x + s.y) + (s.z + s.w);
    } else if (lid == 64u) {
        var s = 0.0f;
        for (var q = 0u; q < 32u; q++) {
            s += parts[q];
        }
        shared_partials[row + 4800u] = s;
    }
}''')
text = '\n'.join(L) + '\n'
open(out, 'w').write(text.replace('@BIND@', wgsl_text.bindings(1201)).replace('@TANH@', wgsl_text.gf_tanh()))
