#!/usr/bin/env python3
"""cut.py in.wgsl out.wgsl MODE PATTERN [MODE PATTERN...]: cuts of a generated kernel for
timing where its time goes (corpus variants named `-unchecked`: the outputs change).
MODE `loop` removes every `for` loop whose header matches the regex PATTERN; `body` keeps
such loops but empties their bodies."""
import re, sys

from blocks import block_end

src = open(sys.argv[1]).read()
args = sys.argv[3:]
for mode, pat in zip(args[::2], args[1::2]):
    rx = re.compile(r'for \(' + pat + r'[^{]*\{')
    pos, hits = 0, 0
    while True:
        m = rx.search(src, pos)
        if not m:
            break
        end = block_end(src, m.end())
        hits += 1
        if mode == 'loop':
            src = src[:m.start()] + src[end:]
            pos = m.start()
        else:
            src = src[:m.end()] + '}' + src[end:]
            pos = m.end()
    assert hits, pat
open(sys.argv[2], 'w').write(src)
