#!/usr/bin/env python3
"""A generated 8-32-32-1 network adjoint with the chunk's inputs in a matrix of their own,
two of them that chunks take in turn, for GRADFUSE_CORPUS_VARIANTS (BENCHMARKS.md,
"Workgroups a multiprocessor"): three of the chunk loop's eight barriers go.

    python3 x_buffers.py in.wgsl out.wgsl [--tanh=rcp|cut]

The generated kernel stores a chunk's inputs into d_s2's matrix for the first layer's
sums, and at the end of the chunk again into h1's for d_W1 (a barrier for h1's last reads
before, one for the stores after), and opens each chunk with a barrier so that its inputs'
stores wait for the chunk before's last reads of d_s2. Here the inputs go once into `xs`,
at (idx % 2) * (inputs rows) so that chunk idx + 1's stores touch the buffer that chunk
idx - 1 read, behind chunk idx's barriers; `xs` takes 4.25 KiB.
"""
import re

from wide_tile import transform_main


def separate_inputs(src):
    store = re.compile(r"ds2s\[f \* (\d+)u \+ \(e / 4u\)\]\[e % 4u\] = xc\[")
    stride = int(store.search(src).group(1))
    inputs = int(re.search(r"let f = q % (\d+)u;", src).group(1))
    buf = inputs * stride
    decl = re.search(r"var<workgroup> ds2s: [^\n]*\n", src)
    src = (src[: decl.end()]
           + f"// The chunk's inputs, two buffers that chunks take in turn: input f of element e at\n"
           + f"// (idx % 2) * {buf} + f * {stride} + e / 4.\n"
           + f"var<workgroup> xs: array<vec4<f32>, {2 * buf}>;\n" + src[decl.end():])
    head = "        workgroupBarrier();\n        let xc = xr;\n"
    assert src.count(head) == 1, "the chunk loop's opening barrier"
    src = src.replace(head, f"        let xc = xr;\n        let xo = (idx % 2u) * {buf}u;\n")
    src = store.sub(lambda m: f"xs[xo + f * {stride}u + (e / 4u)][e % 4u] = xc[", src)
    # The end's second store into h1's matrix and its two barriers.
    again = re.search(r"        workgroupBarrier\(\);\n((        \{\n(            [^\n]*\n)+?        \}\n)+)"
                      r"        workgroupBarrier\(\);\n", src[src.index("let hh0_0"):])
    assert again and "h1s[f * " in again.group(1), "the inputs stored again into h1s"
    at = src.index("let hh0_0") + again.start()
    src = src[:at] + src[at + len(again.group(0)):]
    for m in ("ds2s", "h1s"):
        src = re.sub(rf"let x(\d) = {m}\[k \* {stride}u \+ \(cw \+ (\d)u\)\];",
                     rf"let x\1 = xs[xo + k * {stride}u + (cw + \2u)];", src)
    assert src.count("xs[xo + k * ") == 4, "the first layer's sums and d_W1 reading xs"
    assert "= xc[" in src and "h1s[f * " not in src
    return src


if __name__ == "__main__":
    transform_main(separate_inputs)
