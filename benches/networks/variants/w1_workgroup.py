#!/usr/bin/env python3
"""A generated 8-32-32-1 network adjoint reading W1 from workgroup memory instead of each
lane's registers, for GRADFUSE_CORPUS_VARIANTS (BENCHMARKS.md, "Workgroups a
multiprocessor"): the two rows of W1 a lane holds are 16 registers of the 176 the driver
gave the kernel on the H100, and at 168 or fewer three workgroups of 128 threads fit a
multiprocessor's 65,536 registers where two do now.

    python3 w1_workgroup.py in.wgsl out.wgsl [--tanh=rcp|cut]

W1 goes into `w1s`, rows of INPUTS + 1 words (an odd stride: the 16 lanes of a column
group read 16 rows' words in 16 banks; the other half-warp reads the same words), copied
in the prologue beside W2 (the chunk loop's first barrier orders the copy before its
reads).
"""
import re

from wide_tile import transform_main


def to_workgroup(src):
    held = re.search(r"    var w1_0: array<f32, (\d+)>;\n    for \(var k = 0u; k < \d+u; k\+\+\) "
                     r"\{ w1_0\[k\] = sw\((\d+)u \* \(lr\) \+ k\); \}\n", src)
    assert held, "a generated adjoint holding its lane's first row of W1 in w1_0"
    inputs = int(held.group(1))
    assert int(held.group(2)) == inputs, "W1 at shared word 0, rows of the inputs"
    second = re.search(r"    var w1_1: array<f32, \d+>;\n    for \(var k = 0u; k < \d+u; k\+\+\) "
                       r"\{ w1_1\[k\] = sw\(\d+u \* \(\(lr \+ (\d+)u\)\) \+ k\); \}\n", src)
    assert second, "the lane's second row of W1 in w1_1"
    half = int(second.group(1))
    rows, stride = 2 * half, inputs + 1
    src = src.replace(second.group(0), "").replace(held.group(0), "")
    decl = re.search(r"var<workgroup> w2s: [^\n]*\n", src)
    src = (src[: decl.end()]
           + f"// W1[j][k] at j * {stride} + k (rows padded to an odd stride).\n"
           + f"var<workgroup> w1s: array<f32, {rows * stride}>;\n" + src[decl.end():])
    copy = re.search(r"    for \(var q = lid; q < \d+u; q \+= (\d+)u\) \{\n        let j = q / \d+u;\n", src)
    assert copy, "the prologue's copy of W2"
    threads = copy.group(1)
    src = (src[: copy.start()]
           + f"    for (var q = lid; q < {rows * inputs}u; q += {threads}u) {{\n"
           + f"        w1s[q / {inputs}u * {stride}u + q % {inputs}u] = sw(q);\n    }}\n"
           + src[copy.start():])
    src = re.sub(r"\bw1_0\[k\]", f"w1s[lr * {stride}u + k]", src)
    src = re.sub(r"\bw1_1\[k\]", f"w1s[(lr + {half}u) * {stride}u + k]", src)
    assert not re.search(r"\bw1_[01]\b", src), "a read of W1 left"
    return src


if __name__ == "__main__":
    transform_main(to_workgroup)
