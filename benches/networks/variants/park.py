#!/usr/bin/env python3
"""park.py in.wgsl out.wgsl: the outer sums' per-thread tile accumulators kept in a
function-memory array indexed at a run-time offset (so in local memory on NVIDIA) and
copied into registers only around each chunk loop that adds to them, so that they hold no
registers through the forward and reverse passes (a scratch variant, not the generator)."""
import re, sys

from blocks import block_end

src = open(sys.argv[1]).read()
tiles = re.findall(r'var (tile_\w+): array<vec4<f32>, (\d+)>;', src)
offs, total = {}, 0
for name, n in tiles:
    offs[name] = (total, int(n))
    total += int(n)
decl = re.search(r'var (tile_\w+): array<vec4<f32>, \d+>;', src)
src = src[:decl.start()] + ('var tile_park: array<vec4<f32>, %d>;\n    // Zero, but not to the compiler: the park stays in memory.\n    let pz = params.per_thread / 1048576u;\n    ' % total) + src[decl.start():]

def copies(names, load, indent):
    out = []
    for name in names:
        o, n = offs[name]
        for k in range(n):
            if load:
                out.append('%s%s[%d] = tile_park[pz + %du];' % (indent, name, k, o + k))
            else:
                out.append('%stile_park[pz + %du] = %s[%d];' % (indent, o + k, name, k))
    return '\n'.join(out) + '\n'

pos = 0
rx = re.compile(r'\n( *)for \(var chunk\w* = 0u;[^{]*\{')
while True:
    m = rx.search(src, pos)
    if not m:
        break
    end = block_end(src, m.end())
    body = src[m.start():end]
    names = [t for t, _ in tiles if re.search(r'\b%s\[' % t, body)]
    ind = m.group(1)
    before = '\n' + copies(names, True, ind).rstrip('\n')
    after = '\n' + copies(names, False, ind).rstrip('\n')
    src = src[:m.start()] + before + body + after + src[end:]
    pos = m.start() + len(before) + len(body) + len(after)
ep = src.index('    // The last slots staged.')
src = src[:ep] + copies([t for t, _ in tiles], True, '    ') + src[ep:]
open(sys.argv[2], 'w').write(src)
