#!/usr/bin/env python3
"""wgvar.py in.wgsl out.wgsl: the shared words copied into workgroup memory once per
workgroup, the kernel's reads of them from there (a scratch variant, not the generator)."""
import re, sys
src = open(sys.argv[1]).read()
n = int(re.search(r'var<uniform> shared_args: array<vec4<f32>, (\d+)>;', src).group(1))
src = src.replace('var<uniform> shared_args: array<vec4<f32>, %d>;' % n,
                  'var<uniform> shared_args: array<vec4<f32>, %d>;\nvar<workgroup> wg_shared: array<vec4<f32>, %d>;' % (n, n))
src = src.replace('(gf_workgroup_bytes - 8192u) / 4u', '(gf_workgroup_bytes - 8192u - %du) / 4u' % (16 * n))
m = re.search(r'\n(@compute @workgroup_size\((\w+)\)\nfn (\w+)\((.*)\) \{\n)', src)
head, wg, name, params = m.group(1), m.group(2), m.group(3), m.group(4)
if 'local_invocation_index' not in params:
    params += ', @builtin(local_invocation_index) lid: u32'
wgn = '256u' if wg == '256' else wg
copy = ('    for (var c = lid; c < %du; c += %s) { wg_shared[c] = shared_args[c]; }\n'
        '    workgroupBarrier();\n') % (n, wgn)
body_start = m.end()
rest = src[body_start:].replace('shared_args[', 'wg_shared[')
src = src[:m.start(1)] + '@compute @workgroup_size(%s)\nfn %s(%s) {\n' % (wg, name, params) + copy + rest
open(sys.argv[2], 'w').write(src)
