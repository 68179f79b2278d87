#!/usr/bin/env python3
"""scalars.py OUTDIR: hand-written value kernels of the 8-64-64-1 network (corpus function
`net64` of networks.rs) that keep the first layer's activations in named scalars instead of
a function-scope array, to measure what the array's local-memory loads cost:
  net64.forward~scalars.wgsl   layer 1 unrolled into 64 scalars, layer 2 a loop over rows
                               (each row's 64 products unrolled), layer 3 fused into it
  net64.forward~scalars4.wgsl  the same, four rows per trip
  net64.forward~scalars_e2.wgsl  the first, two elements a thread (each weight read serves both)
  net64.forward~unrolled.wgsl  every layer unrolled (weights at constant offsets)
  net64.forward~unrolled_e2.wgsl the same, two elements a thread
Same bindings and outputs as the generated value kernel."""
import sys, os

HEAD = open(os.path.join(os.path.dirname(__file__), 'scalars_head.wgsl')).read()

def sw(w):
    return 'shared_args[%du].%s' % (w // 4, 'xyzw'[w % 4])

def layer1(e):
    out = []
    for j in range(64):
        terms = ' + '.join('%s * x%s_%d' % (sw(8 * j + k), e, k) for k in range(8))
        out.append('    let h1%s_%d = gf_tanh(%s + %s);' % (e, j, sw(512 + j), terms))
    return '\n'.join(out)

def row_dyn(r, jexpr, els):
    lines = ['        let base_%s = 144u + (%s) * 16u;' % (r, jexpr),
             '        let b_%s = shared_args[(4672u + (%s)) / 4u][(4672u + (%s)) %% 4u];' % (r, jexpr, jexpr),
             '        let o_%s = shared_args[(4736u + (%s)) / 4u][(4736u + (%s)) %% 4u];' % (r, jexpr, jexpr)]
    for e in els:
        lines.append('        var s%s_%s = b_%s;' % (e, r, r))
    for q in range(16):
        lines.append('        let w_%s_%d = shared_args[base_%s + %du];' % (r, q, r, q))
        for c in range(4):
            for e in els:
                lines.append('        s%s_%s += w_%s_%d.%s * h1%s_%d;' % (e, r, r, q, 'xyzw'[c], e, 4 * q + c))
    for e in els:
        lines.append('        y%s += o_%s * gf_tanh(s%s_%s);' % (e, r, e, r))
    return '\n'.join(lines)

def body(rows_per_trip, els):
    loop = '    for (var j = 0u; j < 64u; j += %du) {\n' % rows_per_trip
    loop += '\n'.join(row_dyn('r%d' % r, 'j + %du' % r, els) for r in range(rows_per_trip))
    return loop + '\n    }'

def unrolled(els):
    out = []
    for j in range(64):
        for e in els:
            terms = ' + '.join('%s * h1%s_%d' % (sw(576 + 64 * j + k), e, k) for k in range(64))
            out.append('    y%s += %s * gf_tanh(%s + %s);' % (e, sw(4736 + j), sw(4672 + j), terms))
    return '\n'.join(out)

def kernel(core, els):
    two = len(els) == 2
    src = HEAD + '''
@compute @workgroup_size(gf_workgroup_size)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * gf_workgroup_size;
    if (i >= params.n) {
        return;
    }
'''
    if two:
        # Thread i of even i takes elements i and i + 1; odd threads return.
        src += '''    if (i % 2u == 1u) {
        return;
    }
    let has_b = i + 1u < params.n;
    let ib = min(i + 1u, params.n - 1u);
'''
    for e, idx in zip(els, ['i', 'ib']):
        src += ''.join('    let x%s_%d = args[%s * 9u + %du];\n' % (e, k, idx, k) for k in range(8))
        src += '    let t%s = args[%s * 9u + 8u];\n' % (e, idx)
        src += layer1(e) + '\n'
        src += '    var y%s = shared_args[1200u].x;\n' % e
    src += core + '\n'
    src += '    let d = y - t;\n    values[i] = d * d;\n'
    if two:
        src += '    let db = yb - tb;\n    if (has_b) {\n        values[ib] = db * db;\n    }\n'
    return src + '}\n'

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def write(name, text):
    open(os.path.join(out, 'net64.forward~%s.wgsl' % name), 'w').write(text)
write('scalars', kernel(body(1, ['']), ['']))
write('scalars4', kernel(body(4, ['']), ['']))
write('scalars_e2', kernel(body(1, ['', 'b']), ['', 'b']))
write('unrolled', kernel(unrolled(['']), ['']))
write('unrolled_e2', kernel(unrolled(['', 'b']), ['', 'b']))
