#!/usr/bin/env python3
"""vecvar.py in.wgsl out.wgsl: a shared vec4 read once (`let sv = shared_args[e];`) where
consecutive lines read its lanes one by one (a scratch variant, not the generator)."""
import re, sys
lines = open(sys.argv[1]).read().split('\n')
pat = re.compile(r'^(\s*)let (\w+) = (shared_args|wg_shared)\[(.*)\]\.([xyzw]);$')
out, seen, n = [], {}, 0
for line in lines:
    m = pat.match(line)
    if m:
        ind, name, buf, expr, lane = m.groups()
        key = (buf, expr, ind)
        if key not in seen:
            n += 1
            seen[key] = 'sv%d' % n
            out.append('%slet %s = %s[%s];' % (ind, seen[key], buf, expr))
        out.append('%slet %s = %s.%s;' % (ind, name, seen[key], lane))
    else:
        if '{' in line or '}' in line:
            seen = {}
        out.append(line)
open(sys.argv[2], 'w').write('\n'.join(out))
