#!/usr/bin/env python3
"""Variants of the generated cooperative adjoint of a two-layer 8-H-H-1 tanh network
(H = 32 or 64, one output, the loss reading the element's word 8), for
GRADFUSE_CORPUS_VARIANTS (BENCHMARKS.md, "d_h1 in tiles of four rows").

    python3 dh4.py in.wgsl out.wgsl feature[,feature..]

features:
  dh4    d_h1 = W2^T d_s2 as tiles of four consecutive rows by four elements, each step
         one row of W2's four words (a 16-byte group) and one vec4 of d_s2, where the
         generated kernel takes two rows H/2 apart by eight elements (two words of W2 and
         two vec4s a step); d_W1 and d_b1 follow the new tile (4 rows x 8 inputs a thread,
         summed over the 16 element groups at the end of the run)
  w2v    W2 in workgroup memory as vec4s (needs dh4): the forward product and d_h1 each
         read whole 16-byte groups with constant components
  tpre   the loss's target loaded a chunk ahead with the inputs
  nob    no barrier between d_y's reads and d_s2's stores (H = 32: d_y's row is not one
         of d_s2's)
  tanh9  tanh without its select at 9 (exp overflows to inf there: 1 - 2 / inf is 1)
  unroll d_W2's loop over the chunk's element groups written out
  tcut   tanh replaced by x / 2 (a cut: wrong values, the cost of tanh)
"""
import re
import sys


def hidden(src):
    m = re.search(r"let lr = lid % (\d+)u;", src)
    return 2 * int(m.group(1))


def dh4(src, h, vec):
    mb = h // 4
    sw = 8 if h == 32 else 16  # W2's swizzle: row j % sw
    decl = [f"    let m4 = lid % {mb}u;", f"    let eb4 = lid / {mb}u;"]
    for r in range(4):
        decl.append(f"    var gwq{r}: array<f32, 8>;")
        decl.append(f"    var gbq{r} = 0.0f;")
    src = re.sub(r"(    let kb = lid % \d+u;\n)", lambda m: m.group(1) + "\n".join(decl) + "\n", src, count=1)

    start = src.index("        var d0_0 = vec4<f32>(0.0);")
    end = re.search(r"\n        for \(var (i4|e4) = 0u;", src).start() + 1
    body = [f"        var dq{r} = vec4<f32>(0.0);" for r in range(4)]
    for k in range(h):
        body.append("        {")
        if vec:
            body.append(f"            let wk = w2s[{k * mb}u + (m4 ^ {k % sw}u)];")
            ws = [f"wk.{c}" for c in "xyzw"]
        else:
            body.append(f"            let wb = {k * h}u + 4u * (m4 ^ {k % sw}u);")
            for c in range(4):
                body.append(f"            let w{c} = w2s[wb + {c}u];")
            ws = [f"w{c}" for c in range(4)]
        body.append(f"            let g = ds2s[{k * 16}u + (eb4 ^ {k % 8}u)];")
        for r in range(4):
            body.append(f"            dq{r} += {ws[r]} * g;")
        body.append("        }")
    src = src[:start] + "\n".join(body) + "\n" + src[end:]

    start = src.index("        let hh0_0 = ")
    end = src.index("        workgroupBarrier();", start)
    body = []
    for r in range(4):
        row = f"(4u * m4 + {r}u)"
        body.append(f"        let hq{r} = h1s[{row} * 16u + (eb4 ^ ({row} % 8u))];")
        body.append(f"        let eq{r} = (vec4<f32>(1.0) - hq{r} * hq{r}) * dq{r};")
        body.append(f"        gbq{r} += (eq{r}.x + eq{r}.y) + (eq{r}.z + eq{r}.w);")
    src = src[:start] + "\n".join(body) + "\n" + src[end:]

    old = re.search(r"        for \(var k = 0u; k < 8u; k\+\+\) \{\n            let x0 = h1s.*?\n        \}\n", src, re.S)
    new = "        for (var k = 0u; k < 8u; k++) {\n            let xq = h1s[k * 16u + (eb4 ^ (k % 8u))];\n"
    for r in range(4):
        new += f"            gwq{r}[k] = dot_acc(eq{r}, xq, gwq{r}[k]);\n"
    new += "        }\n"
    src = src[: old.start()] + new + src[old.end():]

    src = "\n".join(
        l for l in src.split("\n") if not re.search(r"old \+ (gw1_[01]\[|gb1_[01];)", l)
    )
    loop = ["    for (var v = 0u; v < 16u; v++) {", "        if (eb4 == v) {"]
    for r in range(4):
        for it in range(9):
            val = f"gwq{r}[{it}]" if it < 8 else f"gbq{r}"
            loop.append(
                f"            {{ let q = {it * h}u + 4u * m4 + {r}u; let old = select(0.0f, h1s[q / 4u][q % 4u], v > 0u); "
                f"h1s[q / 4u][q % 4u] = old + {val}; }}"
            )
    loop += ["        }", "        workgroupBarrier();", "    }", ""]
    at = src.index("    for (var v = 0u; v < 8u; v++) {\n        if (cg == v)")
    src = src[:at] + "\n".join(loop) + src[at:]
    return src


def w2v(src, h):
    mb = h // 4
    sw = 8 if h == 32 else 16
    src = src.replace(f"var<workgroup> w2s: array<f32, {h * h}>;", f"var<workgroup> w2s: array<vec4<f32>, {h * h // 4}>;")
    src = src.replace(
        f"w2s[j * {h}u + 4u * ((k / 4u) ^ (j % {sw}u)) + k % 4u] =",
        f"w2s[j * {mb}u + ((k / 4u) ^ (j % {sw}u))][k % 4u] =",
    )

    def block(m):
        b = m.group(1)
        return (
            f"let wq0 = w2s[lr * {mb}u + ({b}u ^ (lr % {sw}u))];\n"
            f"            let wq1 = w2s[(lr + {h // 2}u) * {mb}u + ({b}u ^ (lr % {sw}u))];"
        )

    src = re.sub(rf"let wbase = lr \* {h}u \+ 4u \* \((\d+)u \^ \(lr % {sw}u\)\);", block, src)
    far = h * h // 2
    for c in range(4):
        src = src.replace(f"w2s[wbase + {c}u]", f"wq0.{'xyzw'[c]}")
        src = src.replace(f"w2s[wbase + {far + c}u]", f"wq1.{'xyzw'[c]}")
    assert "wbase" not in src, "a forward block not rewritten"
    return src


def tpre(src):
    src = src.replace("fn gf_loss(gf_y: f32, gf_row: u32) -> vec2<f32> {", "fn gf_loss(gf_y: f32, gf_row: u32, gf_t: f32) -> vec2<f32> {")
    src = src.replace("    let t = args[gf_row + 8u];", "    let t = gf_t;")
    src = re.sub(r"(    var xr: array<f32, \d+>;\n)", r"\1    var tr = 0.0f;\n", src, count=1)
    src = src.replace("    if (base < n) {\n", "    if (base < n) {\n        tr = args[min(base + lid % 64u, n - 1u) * 9u + 8u];\n", 1)
    src = src.replace(
        "        let xc = xr;\n",
        "        let xc = xr;\n        let tc = tr;\n        tr = args[min(first + 64u + lid % 64u, n - 1u) * 9u + 8u];\n",
        1,
    )
    src = src.replace("gf_loss(y, min(first + e, n - 1u) * 9u)", "gf_loss(y, min(first + e, n - 1u) * 9u, tc)")
    return src


def nob(src):
    m = re.search(r"        workgroupBarrier\(\);\n(        ds2s\[lr \* 1[67]u \+ [^\n]*\] = g0_0;)", src)
    assert m
    return src[: m.start()] + m.group(1) + src[m.end():]


def tanh9(src):
    src = src.replace("    let t = select(e, 1.0, !(ax < 9.0));\n", "")
    return src.replace("select(t, -t, x < 0.0)", "select(e, -e, x < 0.0)")


def tcut(src):
    return re.sub(r"fn tanh4\(v: vec4<f32>\) -> vec4<f32> \{\n    return .*?;\n\}", "fn tanh4(v: vec4<f32>) -> vec4<f32> {\n    return v * 0.5;\n}", src, flags=re.S)


def unroll(src):
    m = re.search(r"        for \(var (i4|e4) = 0u; (?:i4|e4) < (\d+)u; (?:i4|e4)\+\+\) \{\n(.*?)\n        \}\n", src, re.S)
    var, trips, body = m.group(1), int(m.group(2)), m.group(3)
    blocks = ["        {\n" + re.sub(rf"\b{var}\b", f"{t}u", body) + "\n        }" for t in range(trips)]
    return src[: m.start()] + "\n".join(blocks) + "\n" + src[m.end():]


def main():
    src = open(sys.argv[1]).read()
    h = hidden(src)
    feats = sys.argv[3].split(",")
    if "dh4" in feats:
        src = dh4(src, h, "w2v" in feats)
    if "w2v" in feats:
        src = w2v(src, h)
    for f, fn in [("unroll", unroll), ("tpre", tpre), ("nob", nob), ("tanh9", tanh9), ("tcut", tcut)]:
        if f in feats:
            src = fn(src)
    open(sys.argv[2], "w").write(src)


main()
