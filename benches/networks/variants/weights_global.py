#!/usr/bin/env python3
"""A generated network adjoint reading W2 from the storage buffer (through L1) instead of a
copy in workgroup memory, for GRADFUSE_CORPUS_VARIANTS (BENCHMARKS.md, "Four rows a
lane"): 4.5 KiB less workgroup memory for the 8-32-32-1 (22 -> 17.7 KiB), 16 KiB less for
the 8-64-64-1 (48 -> 32 KiB), so that more workgroups may share a multiprocessor.

    python3 weights_global.py in.wgsl out.wgsl [--tanh=rcp|cut]

in.wgsl is the generated adjoint of benches/networks/variants/networks.rs's net32 (rows
padded: W2[j][k] at j * 36 + k) or net64 (swizzled: W2[j][k] at j * 64 + 4 * ((k / 4) ^
(j % 16)) + k % 4). The prologue's copy and the array go; each read of W2 becomes a read of
shared_args at W2's offset, the lane's base and the same constant step (a forward step's
four words are one row's consecutive words; W^T d_s's reads consecutive lanes' words).
--tanh as wide_tile.py's.
"""
import re

from wide_tile import transform_main


def to_storage(src):
    m = re.search(r"// W2\[j\]\[k\] at [^\n]*\nvar<workgroup> w2s: array<f32, (\d+)>;\n", src)
    assert m, "a generated two-layer network adjoint with W2 in w2s"
    src = src[: m.start()] + src[m.end():]
    fill = re.search(r"    for \(var q = lid; q < (\d+)u; q \+= (\d+)u\) \{\n        let j = q / (\d+)u;\n"
                     r"        let k = q % \d+u;\n        w2s\[[^\n]*\] = sw\((\d+)u \+ [^\n]*\n    \}\n", src)
    assert fill, "the prologue's copy of W2"
    h, off = int(fill.group(3)), int(fill.group(4))
    src = src[: fill.start()] + src[fill.end():]
    if h == 32:
        row = 36

        def step(c):  # a padded offset, a multiple of rows plus a column under 36
            return (c // row) * h + c % row

        src = re.sub(r"let wbase = lr \* 36u \+ (\d+)u;",
                     lambda m: f"let wbase = {off}u + lr * {h}u + {m.group(1)}u;", src)
        src = re.sub(r"w2s\[wbase \+ (\d+)u\]",
                     lambda m: f"shared_args[wbase + {step(int(m.group(1)))}u]", src)
        src = re.sub(r"w2s\[(\d+)u \+ lr\]",
                     lambda m: f"shared_args[{off + step(int(m.group(1)))}u + lr]", src)
    else:
        assert h == 64
        src = re.sub(r"let wbase = lr \* 64u \+ 4u \* \((\d+)u \^ \(lr % 16u\)\);",
                     lambda m: f"let wbase = {off}u + lr * 64u + 4u * {m.group(1)}u;", src)
        src = re.sub(r"w2s\[wbase \+ (\d+)u\]", r"shared_args[wbase + \1u]", src)
        # W^T d_s: w2s[64 j + s] is W2[j][lr], (s ^ 32) is W2[j][lr + 32]
        src = re.sub(r"w2s\[(\d+)u \+ s\]", lambda m: f"shared_args[{off + int(m.group(1))}u + lr]", src)
        src = re.sub(r"w2s\[(\d+)u \+ \(s \^ 32u\)\]",
                     lambda m: f"shared_args[{off + int(m.group(1)) + 32}u + lr]", src)
        src = re.sub(r"\n            let s = 4u \* \(\(lr / 4u\) \^ \d+u\) \+ lr % 4u;", "", src)
    assert "w2s" not in src, "a read of W2 left: " + src[src.index("w2s") - 80: src.index("w2s") + 40]
    return src


if __name__ == "__main__":
    transform_main(to_storage)
