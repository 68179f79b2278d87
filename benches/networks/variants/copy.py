#!/usr/bin/env python3
"""A network adjoint whose copy of `W2` into workgroup memory issues every load before any
store (`copy`), or leaves `W2` out (`nocopy`, a cut: wrong values, name the output
`...~<name>-unchecked.wgsl`).

    python3 copy.py in.wgsl out.wgsl copy|nocopy

The generated copy is `for (var q = lid; q < N; q += T) { ... w2s[..] = sw(..); }`, whose
trip count the driver cannot see is constant: if it keeps the loop, each thread waits for
one load at a time, N / T of them, before the chunk loop starts.
"""
import re
import sys

src, dst, mode = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(src).read()
pat = re.compile(
    r"    for \(var q = lid; q < (\d+)u; q \+= (\d+)u\) \{\n"
    r"        let j = q / (\d+)u;\n"
    r"        let k = q % (\d+)u;\n"
    r"        (w\w*s)\[(.*)\] = sw\((.*)\);\n"
    r"    \}\n"
)
m = pat.search(text)
if not m:
    sys.exit("no copy loop found")
total, step, width = int(m.group(1)), int(m.group(2)), int(m.group(3))
name, index, word = m.group(5), m.group(6), m.group(7)
trips = total // step
assert trips * step == total
if mode == "copy":
    body = f"    var cpy: array<f32, {trips}>;\n"
    body += f"    for (var i = 0u; i < {trips}u; i++) {{\n"
    body += f"        let q = lid + {step}u * i;\n"
    body += f"        let j = q / {width}u;\n        let k = q % {width}u;\n"
    body += f"        cpy[i] = sw({word});\n    }}\n"
    body += f"    for (var i = 0u; i < {trips}u; i++) {{\n"
    body += f"        let q = lid + {step}u * i;\n"
    body += f"        let j = q / {width}u;\n        let k = q % {width}u;\n"
    body += f"        {name}[{index}] = cpy[i];\n    }}\n"
elif mode == "nocopy":
    body = ""
else:
    sys.exit(f"unknown mode {mode}")
text = text[: m.start()] + body + text[m.end() :]
open(dst, "w").write(text)
