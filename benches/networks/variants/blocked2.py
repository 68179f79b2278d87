#!/usr/bin/env python3
"""blocked2.py OUT.wgsl [WARPS] [CUT..]: the 8-64-64-1 network's adjoint (corpus function `net64`
of networks.rs) as register-blocked matrix products of the workgroup, with every operand in
workgroup memory (blocked.py read the weights from the uniform buffer at warp-uniform
addresses: its forward product ran at 1.3 TFMA/s on the H100).

Workgroup memory holds exactly three 64 x 64 matrices (48 KiB, the device's limit): W2, the
chunk's h1 and the chunk's d_s2 (64 elements a chunk), each swizzled by 16-byte groups so that
lanes reading different rows hit different banks. The inputs x and the scratch of the
output's sums borrow the rows of whichever matrix is free at the time.
  - Forward products and d_h1 = W2^T d_s2: lane l owns the rows l and l + 32, warp w the
    chunk's elements (64 / WARPS) w ..: a tile of 2 rows x 64 / WARPS elements, the weights
    read by lane, the activations broadcast to the warp as vec4s.
  - d_W2 += d_s2 h1^T: vec4 dot products over the chunk's elements, thread t owning rows
    t / NK + 16 a and columns t % NK + NK b, kept in registers for the whole run.
  - d_W1, d_b1, d_b2, d_w3: each thread's partial sums over its elements, summed over the
    warps at the end in a fixed order (bit-identical over runs).
CUT names a product to leave out (f2, b1, b2), for timing its share (`-unchecked` variants).
Same bindings and outputs as the generated adjoint."""
import sys

import wgsl_text

out = sys.argv[1]
WARPS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
CUTS = set(a for a in sys.argv[3:] if '=' not in a)
# uf=N: the forward product's loop takes N of its 16 steps (of 4 inputs) an iteration;
# ub=N: d_h1's takes N of its 64 (16 and 64: unrolled whole).
OPTS = dict(a.split('=') for a in sys.argv[3:] if '=' in a)
UF = int(OPTS.get('uf', 16))
UB = int(OPTS.get('ub', 64))
# pf=1: each chunk's input words are loaded into registers during the chunk before it (the
# loads' latency hidden by its products), t kept in workgroup memory beside x.
PF = OPTS.get('pf') == '1'
XR = -(-576 // (32 * (int(sys.argv[2]) if len(sys.argv) > 2 else 8)))
T = 32 * WARPS
EW = 64 // WARPS        # elements a warp owns
CW = EW // 4            # their vec4 columns
NK = min(T // 16, 64)   # d_W2 column blocks
NJ = T // NK            # d_W2 row blocks
JA = 64 // NJ
KB = 64 // NK

L = []
def w(s=''):
    L.append(s)

w('// PROTOTYPE (hand-written, not the generator): benches/networks/variants/blocked2.py %s.' % ' '.join(sys.argv[2:]))
w('''@BIND@
// W2[j][k] at j * 64 + 4 * ((k / 4) ^ (j % 16)) + k % 4.
var<workgroup> w2s: array<f32, 4096>;
// Rows of 16 vec4s, column c of row r at r * 16 + (c ^ (r % 8)): h1 (and x for d_W1), d_s2
// (and x for h1, the output's partial sums, d_y).
var<workgroup> h1s: array<vec4<f32>, 1024>;
var<workgroup> ds2s: array<vec4<f32>, 1024>;

@TANH@
fn tanh4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(gf_tanh(v.x), gf_tanh(v.y), gf_tanh(v.z), gf_tanh(v.w));
}

// Shared word `i` (w1 at 0, b1 at 512, w2 at 576, b2 at 4672, w3 at 4736, b3 at 4800).
fn sw(i: u32) -> f32 {
    return shared_args[i / 4u][i % 4u];
}
''')

def cell(row_expr, row_mod8, col_expr):
    return '%s * 16u + ((%s) ^ %s)' % (row_expr, col_expr, row_mod8)

C = range(CW)

def load_x(arr):
    """The chunk's inputs x[k][e] into rows 0..8 of `arr` (with pf=1, from the registers, and
    t into row 33 of ds2s)."""
    if PF:
        for r in range(XR):
            w('            {')
            w('                let q = lid + %du;' % (T * r))
            w('                let e = q / 9u;')
            w('                let f = q % 9u;')
            w('                if (q < 576u && f < 8u) {')
            w('                    %s[f * 16u + ((e / 4u) ^ f)][e %% 4u] = xc[%d];' % (arr, r))
            if arr == 'ds2s':
                w('                } else if (q < 576u) {')
                w('                    ds2s[528u + e / 4u][e %% 4u] = xc[%d];' % r)
            w('                }')
            w('            }')
        return
    w('            for (var q = lid; q < 576u; q += %du) {' % T)
    w('                let e = q / 9u;')
    w('                let f = q % 9u;')
    w('                if (f < 8u) {')
    w('                    %s[f * 16u + ((e / 4u) ^ f)][e %% 4u] = args[min(first + e, n - 1u) * 9u + f];' % arr)
    w('                }')
    w('            }')
w('@compute @workgroup_size(%d)' % T)
w('fn adjoint(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {')
w('''    let group = wid.x + wid.y * groups.x;
    let per_thread = params.per_thread;
    let n = params.n;
    let wp = lid / 32u;
    let l = lid %% 32u;
    let l8 = l %% 8u;
    let cw = wp * %du;       // the warp's first vec4 column
    let jb = lid / %du;
    let kb = lid %% %du;
    for (var q = lid; q < 4096u; q += %du) {
        let j = q / 64u;
        let k = q %% 64u;
        w2s[j * 64u + 4u * ((k / 4u) ^ (j %% 16u)) + k %% 4u] = sw(576u + q);
    }''' % (CW, NK, NK, T))
for r in 'ab':
    row = 'l' if r == 'a' else 'l + 32u'
    w('    var w1%s: array<f32, 8>;' % r)
    w('    for (var k = 0u; k < 8u; k++) { w1%s[k] = sw((%s) * 8u + k); }' % (r, row))
    w('    let b1%s = sw(512u + %s);' % (r, row))
    w('    let b2%s = sw(4672u + %s);' % (r, row))
    w('    let w3%s = sw(4736u + %s);' % (r, row))
    w('    var gw1%s: array<f32, 8>;' % r)
    w('    var gb1%s = 0.0f;' % r)
    w('    var gb2%s = 0.0f;' % r)
    w('    var gw3%s = 0.0f;' % r)
w('    var gb3 = 0.0f;')
for a in range(JA):
    w('    var gw2_%d: array<f32, %d>;' % (a, KB))
def prefetch(first):
    for r in range(XR):
        w('        {')
        w('            let q = min(lid + %du, 575u);' % (T * r))
        w('            xr[%d] = args[min(%s + q / 9u, n - 1u) * 9u + q %% 9u];' % (r, first))
        w('        }')
if PF:
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
else:
    w('    for (var nth = 0u; nth < per_thread; nth++) {')
    w('        let run_first = (group * per_thread + nth) * %du;' % T)
    w('        for (var chunk = 0u; chunk < %du; chunk++) {' % (T // 64))
    w('''            let first = run_first + chunk * 64u;
            if (first >= n) {
                break;
            }
            workgroupBarrier();
''')
load_x('ds2s')
w('            workgroupBarrier();')
# F1
for r in 'ab':
    for c in C:
        w('            var s%s%d = vec4<f32>(b1%s);' % (r, c, r))
w('            for (var k = 0u; k < 8u; k++) {')
for c in C:
    w('                let x%d = ds2s[%s];' % (c, cell('k', 'k', 'cw + %du' % c)))
    for r in 'ab':
        w('                s%s%d += w1%s[k] * x%d;' % (r, c, r, c))
w('            }')
for c in C:
    w('            h1s[%s] = tanh4(sa%d);' % (cell('l', 'l8', 'cw + %du' % c), c))
    w('            h1s[%s] = tanh4(sb%d);' % (cell('(l + 32u)', 'l8', 'cw + %du' % c), c))
w('            workgroupBarrier();')
# F2
for r in 'ab':
    for c in C:
        w('            var f%s%d = vec4<f32>(b2%s);' % (r, c, r))
if 'f2' not in CUTS:
    if UF < 16:
        w('            for (var mo = 0u; mo < 16u; mo += %du) {' % UF)
    for m in range(16 if UF == 16 else UF):
        me = '%du' % m if UF == 16 else '(mo + %du)' % m
        w('            {')
        w('                let base = l * 64u + 4u * (%s ^ (l %% 16u));' % me)
        for i in range(4):
            w('                let wa%d = w2s[base + %du];' % (i, i))
            w('                let wb%d = w2s[base + %du];' % (i, 2048 + i))
        for i in range(4):
            if UF == 16:
                k = 4 * m + i
                row, rm = '%du' % (k * 16), '%du' % (k % 8)
            else:
                row, rm = '(4u * %s + %du) * 16u' % (me, i), '((4u * %s + %du) %% 8u)' % (me, i)
            for c in C:
                w('                let h%d_%d = h1s[%s + ((cw + %du) ^ %s)];' % (i, c, row, c, rm))
                w('                fa%d += wa%d * h%d_%d;' % (c, i, i, c))
                w('                fb%d += wb%d * h%d_%d;' % (c, i, i, c))
        w('            }')
    if UF < 16:
        w('            }')
for r in 'ab':
    for c in C:
        w('            let t%s%d = tanh4(f%s%d);' % (r, c, r, c))
# Output partial sums into ds2s rows 0..32 (x there is spent).
for c in C:
    w('            ds2s[%s] = w3a * ta%d + w3b * tb%d;' % (cell('l', 'l8', 'cw + %du' % c), c, c))
w('            workgroupBarrier();')
w('''            if (lid < 64u) {
                let e = lid;
                var y = sw(4800u);
                for (var r = 0u; r < 32u; r++) {
                    y += ds2s[r * 16u + ((e / 4u) ^ (r % 8u))][e % 4u];
                }
                let d = y - @T@;
                let inb = first + e < n;
                if (inb) {
                    values[first + e] = d * d;
                }
                let dy = select(0.0f, d + d, inb);
                gb3 += dy;
                ds2s[512u + e / 4u][e % 4u] = dy;
            }
            workgroupBarrier();'''.replace('@T@', 'ds2s[528u + e / 4u][e % 4u]' if PF else 'args[min(first + e, n - 1u) * 9u + 8u]'))
for c in C:
    w('            let dy%d = ds2s[512u + cw + %du];' % (c, c))
for r in 'ab':
    for c in C:
        w('            gw3%s += dot(t%s%d, dy%d);' % (r, r, c, c))
        w('            let g%s%d = (vec4<f32>(1.0) - t%s%d * t%s%d) * (w3%s * dy%d);' % (r, c, r, c, r, c, r, c))
        w('            gb2%s += (g%s%d.x + g%s%d.y) + (g%s%d.z + g%s%d.w);' % ((r,) + (r, c) * 4))
w('            workgroupBarrier();')
for c in C:
    w('            ds2s[%s] = ga%d;' % (cell('l', 'l8', 'cw + %du' % c), c))
    w('            ds2s[%s] = gb%d;' % (cell('(l + 32u)', 'l8', 'cw + %du' % c), c))
w('            workgroupBarrier();')
# B1: d_h1 for rows (input features) l, l + 32.
for r in 'ab':
    for c in C:
        w('            var d%s%d = vec4<f32>(0.0);' % (r, c))
if 'b1' not in CUTS:
    if UB < 64:
        w('            for (var jo = 0u; jo < 64u; jo += %du) {' % UB)
    for j in range(64 if UB == 64 else UB):
        je = '%du' % j if UB == 64 else '(jo + %du)' % j
        j16, j64, j8, jrow = (('%du' % (j % 16), '%du + ' % (j * 64), '%du' % (j % 8), '%du + ' % (j * 16))
                              if UB == 64 else ('(%s %% 16u)' % je, '%s * 64u + ' % je, '(%s %% 8u)' % je, '%s * 16u + ' % je))
        w('            {')
        w('                let s = 4u * ((l / 4u) ^ %s) + l %% 4u;' % j16)
        w('                let va = w2s[%ss];' % j64)
        w('                let vb = w2s[%s(s ^ 32u)];' % j64)
        for c in C:
            w('                let g%d = ds2s[%s((cw + %du) ^ %s)];' % (c, jrow, c, j8))
            w('                da%d += va * g%d;' % (c, c))
            w('                db%d += vb * g%d;' % (c, c))
        w('            }')
    if UB < 64:
        w('            }')
# B2: d_W2.
if 'b2' not in CUTS:
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
for r, row in (('a', 'l'), ('b', '(l + 32u)')):
    for c in C:
        w('            let hh%s%d = h1s[%s];' % (r, c, cell(row, 'l8', 'cw + %du' % c)))
        w('            let e%s%d = (vec4<f32>(1.0) - hh%s%d * hh%s%d) * d%s%d;' % (r, c, r, c, r, c, r, c))
        w('            gb1%s += (e%s%d.x + e%s%d.y) + (e%s%d.z + e%s%d.w);' % ((r,) + (r, c) * 4))
w('            workgroupBarrier();')
load_x('h1s')
w('            workgroupBarrier();')
w('            for (var k = 0u; k < 8u; k++) {')
for c in C:
    w('                let x%d = h1s[%s];' % (c, cell('k', 'k', 'cw + %du' % c)))
for r in 'ab':
    w('                gw1%s[k] += %s;' % (r, ' + '.join('dot(e%s%d, x%d)' % (r, c, c) for c in C)))
w('            }')
w('        }')
w('    }')
# The row of partial sums.
w('    let row = group * 4801u;')
for a in range(JA):
    for b in range(KB):
        w('    shared_partials[row + 576u + (jb + %du) * 64u + kb + %du] = gw2_%d[%d];' % (NJ * a, NK * b, a, b))
w('''    // Per-row partials of each warp: item it (d_w1 columns 0..8, d_b1, d_b2, d_w3) of row j
    // from warp wp at word (it * 64 + j) * WARPS + wp of h1s (items 0..8) or ds2s (the
    // rest, from item 8); d_y's partials after them.
    workgroupBarrier();''')
def scratch_store(it, j, v):
    arr, it = ('h1s', it) if it < 8 else ('ds2s', it - 8)
    w('    { let s = (%du * 64u + %s) * %du + wp; %s[s / 4u][s %% 4u] = %s; }' % (it, j, WARPS, arr, v))
for r, row in (('a', 'l'), ('b', '(l + 32u)')):
    for k in range(8):
        scratch_store(k, row, 'gw1%s[%d]' % (r, k))
    scratch_store(8, row, 'gb1' + r)
    scratch_store(9, row, 'gb2' + r)
    scratch_store(10, row, 'gw3' + r)
w('''    if (lid < 64u) {
        ds2s[1024u - 16u + lid / 4u][lid % 4u] = gb3;
    }
    workgroupBarrier();''')
w('    for (var q = lid; q < 704u; q += %du) {' % T)
w('        let it = q / 64u;')
w('        let j = q % 64u;')
w('        var s = 0.0f;')
w('        for (var v = 0u; v < %du; v++) {' % WARPS)
w('            let x = q * %du + v;' % WARPS)
w('''            if (it < 8u) {
                s += h1s[x / 4u][x %% 4u];
            } else {
                let y = x - %du;
                s += ds2s[y / 4u][y %% 4u];
            }''' % (512 * WARPS))
w('        }')
w('''        var word = j * 8u + it;
        if (it == 8u) {
            word = 512u + j;
        } else if (it == 9u) {
            word = 4672u + j;
        } else if (it == 10u) {
            word = 4736u + j;
        }
        shared_partials[row + word] = s;
    }
    if (lid == 0u) {
        var s = 0.0f;
        for (var e = 0u; e < 64u; e++) {
            s += ds2s[1024u - 16u + e / 4u][e % 4u];
        }
        shared_partials[row + 4800u] = s;
    }
}''')
text = '\n'.join(L) + '\n'
open(out, 'w').write(text.replace('@BIND@', wgsl_text.bindings(1201)).replace('@TANH@', wgsl_text.gf_tanh()))
