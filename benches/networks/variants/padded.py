#!/usr/bin/env python3
"""The generated cooperative adjoint of an 8-32-32-1 tanh network with its chunk matrices
padded rather than swizzled, for GRADFUSE_CORPUS_VARIANTS (BENCHMARKS.md, "Padded rows").

    python3 padded.py in.wgsl out.wgsl [unroll] [w1s]

The generated kernel places vec4 column c of row r of h1s and ds2s at r * 16 + (c ^ (r % 8))
and W2[j][k] at j * 32 + 4 ((k / 4) ^ (j % 8)) + k % 4, so that lanes reading different
rows read different banks. Rows of 17 vec4s and of 36 words do the same for those reads
(the bank group of (r, c) is (r + c) % 8, and of W2's (j, k) (4 j + k / 4) % 8) while
every address a lane computes is one base plus a constant: the XOR of a lane's column
with each row's residue is a register per row, which the driver keeps (the H200's SASS
of the generated kernel holds 178 registers). `unroll`: d_W2's loop over the chunk's
element groups written out, its offsets then constants too. `w1s`: each lane's rows of W1
read from workgroup memory (W1 transposed, a lane's word of a column beside the next
lane's) rather than held in 16 registers.
"""
import re
import sys

RV, PAD = 16, 17
W, WPAD = 32, 36


def top_level_split(s, sep):
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        ch = s[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
        if depth == 0 and s[i:i + len(sep)] == sep:
            return s[:i], s[i + len(sep):]
    return None


def rewrite_index(inner):
    m = re.fullmatch(r"(\d+)u \+ \((.+) \^ (\d+)u\)", inner)
    if m and int(m.group(1)) % RV == 0:
        row = int(m.group(1)) // RV
        return f"{row * PAD}u + {m.group(2)}"
    parts = top_level_split(inner, f" * {RV}u + ")
    if parts:
        row, rest = parts
        if rest.startswith("(") and rest.endswith(")"):
            xs = top_level_split(rest[1:-1], " ^ ")
            if xs:
                return f"{row} * {PAD}u + {xs[0]}"
    return None


def matrices(src):
    out, i = [], 0
    pat = re.compile(r"\b(h1s|ds2s)\[")
    while True:
        m = pat.search(src, i)
        if not m:
            out.append(src[i:])
            break
        start = m.end()
        depth, j = 1, start
        while depth:
            if src[j] == "[":
                depth += 1
            elif src[j] == "]":
                depth -= 1
            j += 1
        inner = src[start:j - 1]
        new = rewrite_index(inner)
        out.append(src[i:start])
        out.append(new if new is not None else inner)
        out.append("]")
        i = j
    return "".join(out)


def main():
    src = open(sys.argv[1]).read()
    assert "let lr = lid % 16u;" in src, "an 8-32-32-1 kernel"
    src = src.replace("h1s: array<vec4<f32>, 512>", f"h1s: array<vec4<f32>, {32 * PAD}>")
    src = src.replace("ds2s: array<vec4<f32>, 528>", f"ds2s: array<vec4<f32>, {33 * PAD}>")
    src = src.replace("w2s: array<f32, 1024>", f"w2s: array<f32, {32 * WPAD}>")
    src = matrices(src)
    src = src.replace("ds2s[512u + ", f"ds2s[{32 * PAD}u + ")
    src = src.replace("w2s[j * 32u + 4u * ((k / 4u) ^ (j % 8u)) + k % 4u]", f"w2s[j * {WPAD}u + k]")
    src = re.sub(r"let wbase = lr \* 32u \+ 4u \* \((\d+)u \^ \(lr % 8u\)\);",
                 lambda m: f"let wbase = lr * {WPAD}u + {4 * int(m.group(1))}u;", src)
    src = re.sub(r"w2s\[wbase \+ (51\d)u\]", lambda m: f"w2s[wbase + {16 * WPAD + int(m.group(1)) - 512}u]", src)
    src = re.sub(r"let s = 4u \* \(\(lr / 4u\) \^ \d+u\) \+ lr % 4u;", "let s = lr;", src)
    src = re.sub(r"w2s\[(\d+)u \+ s\]", lambda m: f"w2s[{int(m.group(1)) // W * WPAD}u + s]", src)
    src = re.sub(r"w2s\[(\d+)u \+ \(s \^ 16u\)\]", lambda m: f"w2s[{int(m.group(1)) // W * WPAD + 16}u + s]", src)
    if "unroll" in sys.argv[3:]:
        m = re.search(r"        for \(var i4 = 0u; i4 < (\d+)u; i4\+\+\) \{\n(.*?)\n        \}\n", src, re.S)
        body = m.group(2)
        blocks = []
        for i4 in range(int(m.group(1))):
            blocks.append("        {\n" + body.replace("i4", f"{i4}u") + "\n        }")
        src = src[: m.start()] + "\n".join(blocks) + "\n" + src[m.end():]
    if "w1s" in sys.argv[3:]:
        src = src.replace("var<workgroup> w2s:", "var<workgroup> w1s: array<f32, 256>;\nvar<workgroup> w2s:", 1)
        src = src.replace("    var w1_0: array<f32, 8>;\n    for (var k = 0u; k < 8u; k++) { w1_0[k] = sw(8u * (lr) + k); }\n", "")
        src = src.replace("    var w1_1: array<f32, 8>;\n    for (var k = 0u; k < 8u; k++) { w1_1[k] = sw(8u * ((lr + 16u)) + k); }\n", "")
        src = src.replace("    for (var q = lid; q < 1024u; q += 128u) {",
                          "    for (var q = lid; q < 256u; q += 128u) {\n        w1s[(q / 32u) * 32u + q % 32u] = sw(8u * (q % 32u) + q / 32u);\n    }\n"
                          "    for (var q = lid; q < 1024u; q += 128u) {", 1)
        src = src.replace("w1_0[k] * x", "w1s[k * 32u + lr] * x").replace("w1_1[k] * x", "w1s[k * 32u + lr + 16u] * x")
        assert not re.search(r"\bw1_[01]\[", src)
    left = [l for l in src.split("\n") if re.search(r"(h1s|ds2s|w2s)\[[^]]*\^", l)]
    assert not left, left[:5]
    open(sys.argv[2], "w").write(src)


main()
