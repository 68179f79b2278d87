#!/usr/bin/env python3
"""A generated kernel with more workgroup memory and nothing else changed, for
GRADFUSE_CORPUS_VARIANTS: does the driver hold fewer workgroups a multiprocessor past some
size (BENCHMARKS.md, "Four rows a lane")?

    python3 pad.py in.wgsl out.wgsl BYTES

declares one more workgroup array of BYTES (rounded up to a vec4) and touches it under
`n == 0`, which no launch has (the driver cannot drop an array a thread may read another's
write of); the values and gradients are the generated kernel's.
"""
import re
import sys


def main():
    src, out, extra = sys.argv[1], sys.argv[2], int(sys.argv[3])
    text = open(src).read()
    vec4s = -(-extra // 16)
    decls = list(re.finditer(r"var<workgroup> [^\n]*;\n", text))
    assert decls, "a kernel with workgroup memory"
    at = decls[-1].end()
    text = text[:at] + f"var<workgroup> gf_pad: array<vec4<f32>, {vec4s}>;\n" + text[at:]
    anchor = "    let n = params.n;\n"
    assert anchor in text
    touch = (f"    if (n == 0u) {{ gf_pad[lid % {vec4s}u] = vec4<f32>(f32(lid)); "
             f"values[lid] = gf_pad[(lid + 1u) % {vec4s}u].x; }}\n")
    text = text.replace(anchor, anchor + touch, 1)
    open(out, "w").write(text)


if __name__ == "__main__":
    main()
