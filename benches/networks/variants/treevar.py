#!/usr/bin/env python3
"""treevar.py in.wgsl out.wgsl [K]: every chain of 8 or more adds `let a_i = a_{i-1} + t_i;`
(each link used only by the next) summed in K interleaved partial sums, then paired
(a scratch variant, not the generator)."""
import re, sys
K = int(sys.argv[3]) if len(sys.argv) > 3 else 4
src = open(sys.argv[1]).read()
lines = src.split('\n')
pat = re.compile(r'^(\s*)let (\w+) = (\w+) \+ (\w+);$')
uses = {}
for w in re.findall(r'\b\w+\b', src):
    uses[w] = uses.get(w, 0) + 1
defs = {}
for n, line in enumerate(lines):
    m = pat.match(line)
    if m:
        defs[m.group(2)] = n
# chains: link n continues the link defining its left operand, if that one is used once
nxt, prev = {}, {}
for n, line in enumerate(lines):
    m = pat.match(line)
    if m and m.group(3) in defs and uses[m.group(3)] == 2:
        p = defs[m.group(3)]
        nxt[p] = n; prev[n] = p
chains = []
for n in sorted(defs.values()):
    if n in prev:
        continue
    c = [n]
    while c[-1] in nxt:
        c.append(nxt[c[-1]])
    if len(c) >= 8:
        chains.append(c)
for c in chains:
    ms = [pat.match(lines[n]) for n in c]
    ind, last = ms[0].group(1), ms[-1].group(2)
    terms = [ms[0].group(3)] + [m.group(4) for m in ms]
    acc = [None] * K
    emitted = {n: [] for n in c}
    for p, t in enumerate(terms):
        n = c[max(p - 1, 0)]
        r = p % K
        name = '%s_k%d_%d' % (last, r, p)
        emitted[n].append('%slet %s = %s;' % (ind, name, t if acc[r] is None else acc[r] + ' + ' + t))
        acc[r] = name
    parts = [a for a in acc if a]
    while len(parts) > 1:
        parts = ['(%s + %s)' % (parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    emitted[c[-1]].append('%slet %s = %s;' % (ind, last, parts[0]))
    for n in c:
        lines[n] = '\n'.join(emitted[n])
open(sys.argv[2], 'w').write('\n'.join(lines))
print(sys.argv[2], len(chains), 'chains')
