#!/usr/bin/env python3
"""inline_shared.py in.wgsl out.wgsl: a generated kernel with its shared words read where
they are used instead of loaded into `let`s at the top of the kernel (every
`let NAME = shared_args[K].C;` dropped and NAME replaced by its read)."""
import re, sys
src = open(sys.argv[1]).read()
rx = re.compile(r'^ *let (\w+) = (shared_args\[\d+u\]\.[xyzw]);\n', re.M)
reads = dict((m.group(1), m.group(2)) for m in rx.finditer(src))
src = rx.sub('', src)
if reads:
    names = re.compile(r'\b(' + '|'.join(map(re.escape, sorted(reads, key=len, reverse=True))) + r')\b')
    src = names.sub(lambda m: reads[m.group(1)], src)
open(sys.argv[2], 'w').write(src)
print(len(reads), 'shared reads inlined')
