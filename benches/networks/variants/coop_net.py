#!/usr/bin/env python3
"""coop_net.py OUT.wgsl I H [WARPS]: blocked2.py's adjoint (register-blocked products of the
workgroup, every operand in workgroup memory, inputs loaded a chunk ahead) for any I-H-H-1
tanh network with the loss (y - t)^2 as networks.rs writes them: x: [f32; I], t, w1 (row j at
j * I, b1 at I * H), w2 (row j at j * H, b2 at H * H), w3 (b3 at H). H is 32 or 64 (a power of
two: the swizzles are XORs within a row), I at most 61.

Workgroup memory: W2 (H x H), the chunk's h1 and d_s2 (H rows of 64 elements). Lane l owns
the rows l + 32 r (r < H / 32), warp w the elements (64 / WARPS) w ..; d_W2 is tiled over the
threads and kept in registers; every other shared gradient is summed per thread over its
elements, then over the warps in turn into workgroup memory: bit-identical over runs.
Same bindings and outputs as the generated adjoint."""
import sys

import wgsl_text

out, I, H = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
WARPS = int(sys.argv[4]) if len(sys.argv) > 4 else 8
assert H in (32, 64) and I <= 61
T = 32 * WARPS
RA = H // 32            # rows a lane owns
G = H // 4              # vec4 groups of a W2 row
EW = 64 // WARPS        # elements a warp owns
CW = EW // 4            # their vec4 columns
NK = min(T // 16, H)    # d_W2 column blocks
NJ = T // NK            # d_W2 row blocks
JA, KB = H // NJ, H // NK
O2 = I * H + H          # w2
O3 = O2 + H * H + H     # w3
S = O3 + H + 1          # shared words
ROWS = max(H, 34)       # d_s2's rows: with d_y (row 32) and t (row 33) for H = 32
NI = I + 3              # per-row partial sums: d_w1's I columns, d_b1, d_b2, d_w3
XR = -(-64 * (I + 1) // T)
C = range(CW)
R = range(RA)

L = []
def w(s=''):
    L.append(s)

def row(r):
    return 'l' if r == 0 else '(l + %du)' % (32 * r)

def cell(row_expr, row_mod8, col_expr):
    return '%s * 16u + ((%s) ^ %s)' % (row_expr, col_expr, row_mod8)

w('// PROTOTYPE (hand-written, not the generator): benches/networks/variants/coop_net.py %s.' % ' '.join(sys.argv[2:]))
w('''@BIND@
// W2[j][k] at j * H + 4 * ((k / 4) ^ (j % (H / 4))) + k % 4.
var<workgroup> w2s: array<f32, @HH@>;
// Rows of 16 vec4s (64 elements), column c of row r at r * 16 + (c ^ (r % 8)).
var<workgroup> h1s: array<vec4<f32>, @H16@>;
var<workgroup> ds2s: array<vec4<f32>, @R16@>;

@TANH@
fn tanh4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(gf_tanh(v.x), gf_tanh(v.y), gf_tanh(v.z), gf_tanh(v.w));
}

fn sw(i: u32) -> f32 {
    return shared_args[i / 4u][i % 4u];
}
'''.replace('@HH@', str(H * H)).replace('@H16@', str(H * 16))
   .replace('@R16@', str(ROWS * 16)))

def store_x(arr):
    """The chunk's words (in xc) into rows 0..I of `arr`, t into row 33 of ds2s."""
    for r in range(XR):
        w('            {')
        w('                let q = lid + %du;' % (T * r))
        w('                let e = q / %du;' % (I + 1))
        w('                let f = q %% %du;' % (I + 1))
        w('                if (q < %du && f < %du) {' % (64 * (I + 1), I))
        w('                    %s[f * 16u + ((e / 4u) ^ (f %% 8u))][e %% 4u] = xc[%d];' % (arr, r))
        if arr == 'ds2s':
            w('                } else if (q < %du) {' % (64 * (I + 1)))
            w('                    ds2s[528u + e / 4u][e %% 4u] = xc[%d];' % r)
        w('                }')
        w('            }')

def prefetch(first):
    for r in range(XR):
        w('        {')
        w('            let q = min(lid + %du, %du);' % (T * r, 64 * (I + 1) - 1))
        w('            xr[%d] = args[min(%s + q / %du, n - 1u) * %du + q %% %du];' % (r, first, I + 1, I + 1, I + 1))
        w('        }')

w('@compute @workgroup_size(%d)' % T)
w('fn adjoint(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {')
w('''    let group = wid.x + wid.y * groups.x;
    let per_thread = params.per_thread;
    let n = params.n;
    let wp = lid / 32u;
    let l = lid % 32u;
    let l8 = l % 8u;
    let cw = wp * @CW@u;
    let jb = lid / @NK@u;
    let kb = lid % @NK@u;
    for (var q = lid; q < @HH@u; q += @T@u) {
        let j = q / @H@u;
        let k = q % @H@u;
        w2s[j * @H@u + 4u * ((k / 4u) ^ (j % @G@u)) + k % 4u] = sw(@O2@u + q);
    }'''.replace('@CW@', str(CW)).replace('@NK@', str(NK)).replace('@HH@', str(H * H))
        .replace('@T@', str(T)).replace('@H@', str(H)).replace('@G@', str(G)).replace('@O2@', str(O2)))
for r in R:
    w('    var w1_%d: array<f32, %d>;' % (r, I))
    w('    for (var k = 0u; k < %du; k++) { w1_%d[k] = sw(%s * %du + k); }' % (I, r, row(r), I))
    w('    let b1_%d = sw(%du + %s);' % (r, I * H, row(r)))
    w('    let b2_%d = sw(%du + %s);' % (r, O2 + H * H, row(r)))
    w('    let w3_%d = sw(%du + %s);' % (r, O3, row(r)))
    w('    var gw1_%d: array<f32, %d>;' % (r, I))
    w('    var gb1_%d = 0.0f;' % r)
    w('    var gb2_%d = 0.0f;' % r)
    w('    var gw3_%d = 0.0f;' % r)
w('    var gb3 = 0.0f;')
for a in range(JA):
    w('    var gw2_%d: array<f32, %d>;' % (a, KB))
w('    let base = group * per_thread * %du;' % T)
w('    var xr: array<f32, %d>;' % XR)
prefetch('base')
w('    for (var idx = 0u; idx < per_thread * %du; idx++) {' % (T // 64))
w('''        let first = base + idx * 64u;
        if (first >= n) {
            break;
        }
        workgroupBarrier();
        let xc = xr;''')
prefetch('first + 64u')
w('        {')
store_x('ds2s')
w('            workgroupBarrier();')
# h1 = tanh(W1 x + b1).
for r in R:
    for c in C:
        w('            var s%d_%d = vec4<f32>(b1_%d);' % (r, c, r))
w('            for (var k = 0u; k < %du; k++) {' % I)
for c in C:
    w('                let x%d = ds2s[%s];' % (c, cell('k', '(k % 8u)', 'cw + %du' % c)))
    for r in R:
        w('                s%d_%d += w1_%d[k] * x%d;' % (r, c, r, c))
w('            }')
for r in R:
    for c in C:
        w('            h1s[%s] = tanh4(s%d_%d);' % (cell(row(r), 'l8', 'cw + %du' % c), r, c))
w('            workgroupBarrier();')
# s2 = W2 h1 + b2.
for r in R:
    for c in C:
        w('            var f%d_%d = vec4<f32>(b2_%d);' % (r, c, r))
for m in range(G):
    w('            {')
    w('                let wbase = l * %du + 4u * (%du ^ (l %% %du));' % (H, m, G))
    for i in range(4):
        for r in R:
            w('                let w%d_%d = w2s[wbase + %du];' % (r, i, 32 * r * H + i))
    for i in range(4):
        k = 4 * m + i
        for c in C:
            w('                let h%d_%d = h1s[%du + ((cw + %du) ^ %du)];' % (i, c, k * 16, c, k % 8))
            for r in R:
                w('                f%d_%d += w%d_%d * h%d_%d;' % (r, c, r, i, i, c))
    w('            }')
for r in R:
    for c in C:
        w('            let t%d_%d = tanh4(f%d_%d);' % (r, c, r, c))
for c in C:
    w('            ds2s[%s] = %s;' % (cell('l', 'l8', 'cw + %du' % c), ' + '.join('w3_%d * t%d_%d' % (r, r, c) for r in R)))
w('            workgroupBarrier();')
w('''            if (lid < 64u) {
                let e = lid;
                var y = sw(@B3@u);
                for (var r = 0u; r < 32u; r++) {
                    y += ds2s[r * 16u + ((e / 4u) ^ (r % 8u))][e % 4u];
                }
                let d = y - ds2s[528u + e / 4u][e % 4u];
                let inb = first + e < n;
                if (inb) {
                    values[first + e] = d * d;
                }
                let dy = select(0.0f, d + d, inb);
                gb3 += dy;
                ds2s[512u + e / 4u][e % 4u] = dy;
            }
            workgroupBarrier();'''.replace('@B3@', str(O3 + H)))
for c in C:
    w('            let dy%d = ds2s[512u + cw + %du];' % (c, c))
for r in R:
    for c in C:
        w('            gw3_%d += dot(t%d_%d, dy%d);' % (r, r, c, c))
        w('            let g%d_%d = (vec4<f32>(1.0) - t%d_%d * t%d_%d) * (w3_%d * dy%d);' % (r, c, r, c, r, c, r, c))
        w('            gb2_%d += (g%d_%d.x + g%d_%d.y) + (g%d_%d.z + g%d_%d.w);' % ((r,) + (r, c) * 4))
w('            workgroupBarrier();')
for r in R:
    for c in C:
        w('            ds2s[%s] = g%d_%d;' % (cell(row(r), 'l8', 'cw + %du' % c), r, c))
w('            workgroupBarrier();')
# d_h1 = W2^T d_s2 for the lane's rows (input features).
for r in R:
    for c in C:
        w('            var d%d_%d = vec4<f32>(0.0);' % (r, c))
for j in range(H):
    w('            {')
    w('                let s = 4u * ((l / 4u) ^ %du) + l %% 4u;' % (j % G))
    for r in R:
        w('                let v%d = w2s[%du + %s];' % (r, j * H, 's' if r == 0 else '(s ^ %du)' % (32 * r)))
    for c in C:
        w('                let g%d = ds2s[%du + ((cw + %du) ^ %du)];' % (c, j * 16, c, j % 8))
        for r in R:
            w('                d%d_%d += v%d * g%d;' % (r, c, r, c))
    w('            }')
# d_W2 += d_s2 h1^T.
w('            for (var e4 = 0u; e4 < 16u; e4++) {')
for a in range(JA):
    w('                let p%d = ds2s[(jb + %du) * 16u + (e4 ^ (jb %% 8u))];' % (a, NJ * a))
for b in range(KB):
    w('                let q%d = h1s[(kb + %du) * 16u + (e4 ^ ((kb + %du) %% 8u))];' % (b, NK * b, NK * b))
for a in range(JA):
    for b in range(KB):
        w('                gw2_%d[%d] += dot(p%d, q%d);' % (a, b, a, b))
w('            }')
# d_s1 in registers.
for r in R:
    for c in C:
        w('            let hh%d_%d = h1s[%s];' % (r, c, cell(row(r), 'l8', 'cw + %du' % c)))
        w('            let e%d_%d = (vec4<f32>(1.0) - hh%d_%d * hh%d_%d) * d%d_%d;' % (r, c, r, c, r, c, r, c))
        w('            gb1_%d += (e%d_%d.x + e%d_%d.y) + (e%d_%d.z + e%d_%d.w);' % ((r,) + (r, c) * 4))
w('            workgroupBarrier();')
store_x('h1s')
w('            workgroupBarrier();')
w('            for (var k = 0u; k < %du; k++) {' % I)
for c in C:
    w('                let x%d = h1s[%s];' % (c, cell('k', '(k % 8u)', 'cw + %du' % c)))
for r in R:
    w('                gw1_%d[k] += %s;' % (r, ' + '.join('dot(e%d_%d, x%d)' % (r, c, c) for c in C)))
w('            }')
w('        }')
w('    }')
# The row of partial sums.
w('    let row = group * %du;' % S)
for a in range(JA):
    for b in range(KB):
        w('    shared_partials[row + %du + (jb + %du) * %du + kb + %du] = gw2_%d[%d];' % (O2, NJ * a, H, NK * b, a, b))
w('    // Per-row partials summed over the warps in turn: item it of row j at word it * H + j of h1s.')
w('    workgroupBarrier();')
w('    for (var v = 0u; v < %du; v++) {' % WARPS)
w('        if (wp == v) {')
def acc(it, j, val):
    w('            { let q = %du + %s; let old = select(0.0f, h1s[q / 4u][q %% 4u], v > 0u); h1s[q / 4u][q %% 4u] = old + %s; }' % (it * H, j, val))
for r in R:
    for k in range(I):
        acc(k, row(r), 'gw1_%d[%d]' % (r, k))
    acc(I, row(r), 'gb1_%d' % r)
    acc(I + 1, row(r), 'gb2_%d' % r)
    acc(I + 2, row(r), 'gw3_%d' % r)
w('        }')
w('        workgroupBarrier();')
w('    }')
w('''    if (lid < 64u) {
        ds2s[lid / 4u][lid % 4u] = gb3;
    }
    workgroupBarrier();''')
w('    for (var q = lid; q < %du; q += %du) {' % (NI * H, T))
w('''        let it = q / @H@u;
        let j = q % @H@u;
        var word = j * @I@u + it;
        if (it == @I@u) {
            word = @B1@u + j;
        } else if (it == @I1@u) {
            word = @B2@u + j;
        } else if (it == @I2@u) {
            word = @W3@u + j;
        }
        shared_partials[row + word] = h1s[q / 4u][q % 4u];
    }
    if (lid == 0u) {
        var s = 0.0f;
        for (var e = 0u; e < 64u; e++) {
            s += ds2s[e / 4u][e % 4u];
        }
        shared_partials[row + @B3@u] = s;
    }
}'''.replace('@H@', str(H)).replace('@I@', str(I)).replace('@I1@', str(I + 1)).replace('@I2@', str(I + 2))
    .replace('@B1@', str(I * H)).replace('@B2@', str(O2 + H * H)).replace('@W3@', str(O3)).replace('@B3@', str(O3 + H)))
text = '\n'.join(L) + '\n'
open(out, 'w').write(text.replace('@BIND@', wgsl_text.bindings(-(-S // 4))).replace('@TANH@', wgsl_text.gf_tanh()))
