#!/usr/bin/env python3
"""coop_value.py OUT.wgsl: a hand-written value kernel of the 8-64-64-1 network (corpus function
`net64` of networks.rs) that computes its layers as matrix products of the workgroup: chunks of
64 elements, activations in workgroup memory feature-major, the weights copied there once per
workgroup (transposed: a thread's 4 rows in one vec4), each thread a 4 x 4 tile (4 rows, 4
elements) and every product's loop unrolled. Lanes of a warp read one or two weight vec4s
(broadcast) and 16 consecutive activation vec4s: no bank conflicts. The output layer is fused
into the second: each thread's 4 rows' terms, summed over the 16 row groups in a fixed order.
Same bindings and outputs as the generated value kernel (one workgroup of 256 threads per 256
elements)."""
import os, sys

def head():
    """The generated value kernel's parameters, bindings and `gf_tanh` (scalars_head.wgsl),
    without its workgroup-size override: this kernel's size is fixed."""
    text = open(os.path.join(os.path.dirname(__file__), 'scalars_head.wgsl')).read()
    return text[:text.index('// Threads per workgroup')] + '''fn tanh4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(gf_tanh(v.x), gf_tanh(v.y), gf_tanh(v.z), gf_tanh(v.w));
}
'''

def product(k_count, weights, acts):
    lines = []
    for k in range(k_count):
        lines.append('        {')
        lines.append('            let w = %s[%du + rg];' % (weights, k * 16))
        lines.append('            let a = %s[%du + eq];' % (acts, k * 16))
        for r, c in enumerate('xyzw'):
            lines.append('            acc%d += w.%s * a;' % (r, c))
        lines.append('        }')
    return '\n'.join(lines)

src = '// PROTOTYPE (hand-written, not the generator): benches/networks/variants/coop_value.py.\n' + head() + '''
// Weights transposed: w2t[k * 16 + g] = rows 4g..4g+4 of column k (w1t likewise, 8 columns).
var<workgroup> w2t: array<vec4<f32>, 1024>;
var<workgroup> w1t: array<vec4<f32>, 128>;
// A chunk's inputs and first activations, feature-major: [feature * 16 + element quad].
var<workgroup> xs: array<vec4<f32>, 128>;
var<workgroup> h1s: array<vec4<f32>, 1024>;
// Each row group's part of each element's output: [group * 16 + element quad].
var<workgroup> parts: array<vec4<f32>, 256>;
var<workgroup> ts: array<f32, 64>;

// Shared word `w` (w1 at 0, w2 at 576, w3 at 4736).
fn sw(w: u32) -> f32 {
    return shared_args[w / 4u][w % 4u];
}

@compute @workgroup_size(256)
fn forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let group = wid.x + wid.y * groups.x;
    let n = params.n;
    let run_first = group * 256u;
    if (run_first >= n) {
        return;
    }
    // The weights, transposed, once per workgroup.
    for (var q = lid; q < 1024u; q += 256u) {
        let k = q / 16u;
        let g = q % 16u;
        let r = 576u + 4u * g * 64u + k;
        w2t[q] = vec4<f32>(sw(r), sw(r + 64u), sw(r + 128u), sw(r + 192u));
    }
    if (lid < 128u) {
        let k = lid / 16u;
        let g = lid % 16u;
        let r = 4u * g * 8u + k;
        w1t[lid] = vec4<f32>(sw(r), sw(r + 8u), sw(r + 16u), sw(r + 24u));
    }
    // Thread: rows 4 rg .. 4 rg + 4, elements 4 eq .. 4 eq + 4 of a chunk.
    let rg = lid / 16u;
    let eq = lid % 16u;
    let b1 = vec4<f32>(sw(512u + 4u * rg), sw(513u + 4u * rg), sw(514u + 4u * rg), sw(515u + 4u * rg));
    let b2 = vec4<f32>(sw(4672u + 4u * rg), sw(4673u + 4u * rg), sw(4674u + 4u * rg), sw(4675u + 4u * rg));
    let o3 = vec4<f32>(sw(4736u + 4u * rg), sw(4737u + 4u * rg), sw(4738u + 4u * rg), sw(4739u + 4u * rg));
    for (var chunk = 0u; chunk < 4u; chunk++) {
        let first = run_first + chunk * 64u;
        if (first >= n) {
            break;
        }
        workgroupBarrier();
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
        var acc0 = vec4<f32>(b1.x);
        var acc1 = vec4<f32>(b1.y);
        var acc2 = vec4<f32>(b1.z);
        var acc3 = vec4<f32>(b1.w);
''' + product(8, 'w1t', 'xs') + '''
        h1s[(4u * rg) * 16u + eq] = tanh4(acc0);
        h1s[(4u * rg + 1u) * 16u + eq] = tanh4(acc1);
        h1s[(4u * rg + 2u) * 16u + eq] = tanh4(acc2);
        h1s[(4u * rg + 3u) * 16u + eq] = tanh4(acc3);
        workgroupBarrier();
        acc0 = vec4<f32>(b2.x);
        acc1 = vec4<f32>(b2.y);
        acc2 = vec4<f32>(b2.z);
        acc3 = vec4<f32>(b2.w);
''' + product(64, 'w2t', 'h1s') + '''
        parts[rg * 16u + eq] = ((o3.x * tanh4(acc0) + o3.y * tanh4(acc1)) + o3.z * tanh4(acc2)) + o3.w * tanh4(acc3);
        workgroupBarrier();
        if (lid < 64u) {
            let e = lid;
            var y = sw(4800u);
            for (var g = 0u; g < 16u; g++) {
                y += parts[g * 16u + e / 4u][e % 4u];
            }
            let d = y - ts[e];
            if (first + e < n) {
                values[first + e] = d * d;
            }
        }
    }
}
'''
open(sys.argv[1], 'w').write(src)
