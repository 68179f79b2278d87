#!/usr/bin/env python3
"""unroll.py in.wgsl out.wgsl VAR [VAR...]: unrolls the loops whose counters are the VARs
(constant bounds), each trip as a block `{ let VAR = K; body }`."""
import re, sys
src = open(sys.argv[1]).read()
for var in sys.argv[3:]:
    pat = re.compile(r'for \(var ' + re.escape(var) + r'(?:: (\w+))? = (\d+)([iu]); ' + re.escape(var) +
                     r' (<|>=) (\d+)[iu]; ' + re.escape(var) + r'(\+\+|--)\) \{')
    m = pat.search(src)
    assert m, var
    start, i, depth = m.start(), m.end(), 1
    while depth:
        c = src[i]
        depth += (c == '{') - (c == '}')
        i += 1
    body = src[m.end():i - 1]
    assert 'break' not in body and 'continue' not in body, var
    a, sfx, op, b, step = int(m.group(2)), m.group(3), m.group(4), int(m.group(5)), m.group(6)
    trips = range(a, b) if op == '<' else range(a, b - 1, -1)
    ty = m.group(1) or ('i32' if sfx == 'i' else 'u32')
    out = '\n'.join('{ let %s: %s = %d%s;%s}' % (var, ty, k, sfx, body) for k in trips)
    src = src[:start] + out + src[i:]
open(sys.argv[2], 'w').write(src)
