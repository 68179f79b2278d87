"""Issue 11: the 8-32-32-1 and 8-64-64-1 adjoints with four consecutive rows a lane
(`quad`), written from the generated kernels.

The generated kernels give a lane two rows `lr` and `lr + H/2` of the chunk's product by
two `vec4` columns (8 elements). Then a step of `d_h1 = W2^T d_s2` reads the lane's two
weights `W2[j][lr]`, `W2[j][lr + H/2]` as two scalar loads, and the forward product reads
two rows' `vec4`s of 16 (32) different rows a warp. With rows `4a .. 4a + 3` a lane and one
`vec4` column (`a = lid / 16`, `eg = lid % 16`: 4 x 4 tiles) both read one `vec4` of `W2`
broadcast to sixteen lanes: `W2[4a + r][4b .. 4b + 3]` forward, `W2[j][4a .. 4a + 3]`
backward. Loads a chunk (a warp): 256 against 416 in the 8-64-64-1's layer 2, 128 against
208 in the 8-32-32-1's. The cost: sixteen column groups summed in turn after the run
(against eight), and each lane holds four rows of `W1` and `d_W1` (64 registers, not 32).
What the bench's `d_h1` cut measured (its two weight loads replaced by registers: 9% of the
8-64-64-1, BENCHMARKS.md "Two rows a lane") says loads are what to take out.

    python3 quad_rows.py GENERATED_DIR OUT_DIR

With `tpre` (and `quad_tpre`, `quad_ahead2`) the loss's target word `t` is loaded a chunk ahead with
the inputs, where the generated kernel reads it from `args` in the loss, between two
barriers: past 2^19 elements (37.7 MB of arguments at 2^20, where the H100's L2 holds 50)
both networks' launches take 13-20 µs more than their chunks would (BENCHMARKS.md, "The
columns' indices folded, measured"), as if from a read that went to DRAM.

With `ahead2` (on `tpre`) the inputs and the target are loaded two chunks ahead, not one:
the driver sinks the generated kernel's next-chunk loads from the top of the chunk loop to
its last phases (the 8-32-32-1's SASS: some 450 instructions and two barriers before the
chunk that uses them), which is short of a DRAM read.

`quad_w1g` (the 8-64-64-1 only) is `quad` with the lane's rows of `W1` read from storage
each chunk instead of held in 32 registers: the generated 8-64-64-1 holds 236 of the 255 a
thread may have, and `quad` adds 32 for `W1` and 32 for `d_W1`; if `quad` spills, this
shows it.

`xkeep` (the 8-32-32-1 only; `xkeep_tpre` with `tpre`) keeps the chunk's inputs in a
matrix of their own (`xs`, 8 rows of 16 `vec4`s swizzled, 2 KiB) from the first layer to
`d_W1`, where the generated kernel stores them again into `h1s` after `d_h1` (four stores
and two barriers a chunk: eight barriers become six). Its 2 KiB fit the 24,064 bytes of two
workgroups a multiprocessor only with the `d_y` row of `ds2s` (272 bytes) moved into
`W2`'s padding (`w2s[36 j + 32 ..]`, which no product reads): 24,064 bytes exactly.

GENERATED_DIR holds `net32.adjoint.wgsl` and `net64.adjoint.wgsl` from
`GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=dir` with
`GRADFUSE_CORPUS_EXTRA=benches/networks/variants/networks.rs`; OUT_DIR gets
`net{32,64}.adjoint~<variant>.wgsl` for `GRADFUSE_CORPUS_VARIANTS`, which checks each against
the generated kernel before timing it.
"""
import re
import sys


def once(g, old, new):
    """`g` with `old`, which must occur exactly once, replaced by `new`: a generator change
    that moves the text fails here instead of writing a kernel that is not the variant."""
    assert g.count(old) == 1, (old, g.count(old))
    return g.replace(old, new)


def between(g, start, end, from_pos=0):
    i = g.index(start, from_pos)
    j = g.index(end, i)
    return i, j


class Net:
    def __init__(self, h):
        self.h = h
        self.parts = h // 4
        self.dy_row = 544 if h == 32 else 512

    def cell(self, row, col):
        if self.h == 32:
            return f"({row}) * 17u + ({col})"
        return f"({row}) * 16u + (({col}) ^ (({row}) % 8u))"

    def w2(self, row, k4, c):
        """W2[row][4 k4 + c]; `k4` a WGSL expression of the vec4 block."""
        if self.h == 32:
            return f"w2s[({row}) * 36u + 4u * ({k4}) + {c}u]"
        return f"w2s[({row}) * 64u + 4u * (({k4}) ^ (({row}) % 16u)) + {c}u]"


def rows_decl(net, g):
    b1 = re.search(r"let b1_0 = sw\((\d+)u \+ lr\);", g).group(1)
    b2 = re.search(r"let b2_0 = sw\((\d+)u \+ lr\);", g).group(1)
    w3 = re.search(r"let w3_0 = sw\((\d+)u \+ lr\);", g).group(1)
    s = "    let a = lid / 16u;\n    let eg = lid % 16u;\n"
    for r in range(4):
        row = f"4u * a + {r}u"
        s += (f"    var w1_{r}: array<f32, 8>;\n"
              f"    for (var k = 0u; k < 8u; k++) {{ w1_{r}[k] = sw(8u * ({row}) + k); }}\n"
              f"    let b1_{r} = sw({b1}u + {row});\n    let b2_{r} = sw({b2}u + {row});\n"
              f"    let w3_{r} = sw({w3}u + {row});\n    var gw1_{r}: array<f32, 8>;\n"
              f"    var gb1_{r} = 0.0f;\n    var gb2_{r} = 0.0f;\n    var gw3_{r} = 0.0f;\n")
    return s


def forward(net, sum_block):
    h = net.h
    s = "".join(f"        var s{r} = vec4<f32>(b1_{r});\n" for r in range(4))
    s += "        for (var k = 0u; k < 8u; k++) {\n"
    s += f"            let x = ds2s[{net.cell('k', 'eg')}];\n"
    s += "".join(f"            s{r} += w1_{r}[k] * x;\n" for r in range(4))
    s += "        }\n"
    s += "".join(f"        h1s[{net.cell(f'4u * a + {r}u', 'eg')}] = tanh4(s{r});\n" for r in range(4))
    s += "        workgroupBarrier();\n"
    s += "".join(f"        var f{r} = vec4<f32>(b2_{r});\n" for r in range(4))
    for b in range(h // 4):
        s += "        {\n"
        for r in range(4):
            for c in range(4):
                s += f"            let wv{r}_{c} = {net.w2(f'4u * a + {r}u', f'{b}u', c)};\n"
        for c in range(4):
            s += f"            let h{c} = h1s[{net.cell(f'{4 * b + c}u', 'eg')}];\n"
            s += "".join(f"            f{r} += wv{r}_{c} * h{c};\n" for r in range(4))
        s += "        }\n"
    s += "".join(f"        let t{r} = tanh4(f{r});\n" for r in range(4))
    s += (f"        ds2s[{net.cell('a', 'eg')}] = "
          + " + ".join(f"w3_{r} * t{r}" for r in range(4)) + ";\n")
    s += "        workgroupBarrier();\n"
    s += sum_block
    s += "        workgroupBarrier();\n"
    s += f"        let dy = ds2s[{net.dy_row}u + eg];\n"
    for r in range(4):
        s += (f"        gw3_{r} = dot_acc(t{r}, dy, gw3_{r});\n"
              f"        let g{r} = (vec4<f32>(1.0) - t{r} * t{r}) * (w3_{r} * dy);\n"
              f"        gb2_{r} += (g{r}.x + g{r}.y) + (g{r}.z + g{r}.w);\n")
    if h == 64:
        # d_s2's rows overwrite the d_y row (32).
        s += "        workgroupBarrier();\n"
    s += "".join(f"        ds2s[{net.cell(f'4u * a + {r}u', 'eg')}] = g{r};\n" for r in range(4))
    s += "        workgroupBarrier();\n"
    return s


def backward_rows(net):
    s = "".join(f"        var d{r} = vec4<f32>(0.0);\n" for r in range(4))
    for j in range(net.h):
        s += "        {\n"
        for r in range(4):
            s += f"            let v{r} = {net.w2(f'{j}u', 'a', r)};\n"
        s += f"            let gj = ds2s[{net.cell(f'{j}u', 'eg')}];\n"
        s += "".join(f"            d{r} += v{r} * gj;\n" for r in range(4))
        s += "        }\n"
    return s


def prefetch_target(g):
    """The loss's `t` read a chunk ahead with the inputs, as the element's thread uses it."""
    g = once(g, "fn gf_loss(gf_y: f32, gf_row: u32) -> vec2<f32> {", "fn gf_loss(gf_y: f32, gf_t: f32) -> vec2<f32> {")
    g = once(g, "    let t = args[gf_row + 8u];\n", "    let t = gf_t;\n")
    # Every thread loads (those past the chunk's elements its last one's): a branch around
    # loads in the chunk loop once cost the 8-64-64-1 5%. As loss_words_ahead.patch writes it.
    g = once(g, "    for (var idx = lo; idx < hi; idx++) {\n",
            "    var tr = 0.0f;\n    if (base < n) {\n"
            "        tr = args[min(base + min(lid, 63u), n - 1u) * 9u + 8u];\n    }\n"
            "    for (var idx = lo; idx < hi; idx++) {\n")
    g = once(g, "        let xc = xr;\n",
            "        let xc = xr;\n        let tc = tr;\n"
            "        tr = args[min(first + 64u + min(lid, 63u), n - 1u) * 9u + 8u];\n")
    g = once(g, "gf_loss(y, min(first + e, n - 1u) * 9u)", "gf_loss(y, tc)")
    return g


def ahead2(g):
    """`tpre`'s kernel with the inputs and the target two chunks ahead."""
    loop = g.index("    for (var idx = lo; idx < hi; idx++) {\n")
    head, body = g[:loop], g[loop:]
    decl = re.search(r"    var xr: array<f32, (\d+)>;\n", head)
    i = head.index("    if (base < n) {\n", decl.end())
    j = head.index("\n    }\n", i) + len("\n    }\n")
    second = (head[i:j].replace("xr[", "xr2[").replace("min(base + q / 8u", "min(base + 64u + q / 8u"))
    head = head[:j] + second + head[j:]
    head = head.replace(decl.group(0), decl.group(0) + f"    var xr2: array<f32, {decl.group(1)}>;\n")
    head = head.replace("    var tr = 0.0f;\n", "    var tr = 0.0f;\n    var tr2 = 0.0f;\n")
    head = head.replace("        tr = args[min(base + min(lid, 63u), n - 1u) * 9u + 8u];\n",
                        "        tr = args[min(base + min(lid, 63u), n - 1u) * 9u + 8u];\n"
                        "        tr2 = args[min(base + 64u + min(lid, 63u), n - 1u) * 9u + 8u];\n")
    body = body.replace("        let xc = xr;\n", "        let xc = xr;\n        xr = xr2;\n", 1)
    body = body.replace("            xr[", "            xr2[").replace("min(first + 64u + q / 8u", "min(first + 128u + q / 8u")
    body = body.replace("        let tc = tr;\n        tr = args[min(first + 64u + min(lid",
                        "        let tc = tr;\n        tr = tr2;\n        tr2 = args[min(first + 128u + min(lid")
    g = head + body
    for want in ("xr = xr2;", "tr = tr2;", "tr2 = args[min(first + 128u", "xr2[0] = args[min(first + 128u", "min(base + 64u + q"):
        assert want in g, want
    return g


def w1_from_storage(g):
    """`quad`'s first layer with `W1` read from storage in the chunk loop, not registers."""
    for r in range(4):
        g = once(g, f"    var w1_{r}: array<f32, 8>;\n", "")
        g = once(g, f"    for (var k = 0u; k < 8u; k++) {{ w1_{r}[k] = sw(8u * (4u * a + {r}u) + k); }}\n", "")
        g = once(g, f"            s{r} += w1_{r}[k] * x;\n", f"            s{r} += sw(w1_at + {8 * r}u + k) * x;\n")
    # idx is never u32's largest: the driver cannot hoist the loads out of the loop.
    return once(g, "        for (var k = 0u; k < 8u; k++) {\n            let x = ds2s[",
                "        let w1_at = 32u * a + select(0u, 1u, idx == 0xffffffffu);\n"
                "        for (var k = 0u; k < 8u; k++) {\n            let x = ds2s[")


def keep_inputs(g):
    """The 8-32-32-1 with its inputs in `xs` through the chunk and `d_y` in `W2`'s padding."""
    def one(old, new):
        nonlocal g
        g = once(g, old, new)
    one("var<workgroup> ds2s: array<vec4<f32>, 561>;\n",
        "var<workgroup> ds2s: array<vec4<f32>, 544>;\n"
        "// The chunk's inputs, column c of row f at f * 16 + (c ^ f); d_y of element e at\n"
        "// w2s[(e / 4) * 36 + 32 + e % 4], in W2's padding.\n"
        "var<workgroup> xs: array<vec4<f32>, 128>;\n")
    for r in range(4):
        one(f"                ds2s[f * 17u + (e / 4u)][e % 4u] = xc[{r}];\n",
            f"                xs[f * 16u + ((e / 4u) ^ f)][e % 4u] = xc[{r}];\n")
    for c in range(2):
        one(f"            let x{c} = ds2s[k * 17u + (cw + {c}u)];\n",
            f"            let x{c} = xs[k * 16u + ((cw + {c}u) ^ k)];\n")
    one("            ds2s[544u + e / 4u][e % 4u] = dy;\n",
        "            w2s[(e / 4u) * 36u + 32u + e % 4u] = dy;\n")
    for c in range(2):
        one(f"        let dy{c} = ds2s[544u + cw + {c}u];\n",
            f"        let dy{c} = vec4<f32>(w2s[(cw + {c}u) * 36u + 32u], w2s[(cw + {c}u) * 36u + 33u], "
            f"w2s[(cw + {c}u) * 36u + 34u], w2s[(cw + {c}u) * 36u + 35u]);\n")
    # The inputs stored again into h1s for d_W1, and its two barriers: gone.
    i = g.index("        workgroupBarrier();\n        {\n            let q = lid + 0u;\n            let e = q / 8u;",
                g.index("let e1_1 = "))
    j = g.index("        for (var k = 0u; k < 8u; k++) {\n            let x0 = h1s[", i)
    g = g[:i] + g[j:]
    for c in range(2):
        one(f"            let x{c} = h1s[k * 17u + (cw + {c}u)];\n",
            f"            let x{c} = xs[k * 16u + ((cw + {c}u) ^ k)];\n")
    assert "ds2s[544u" not in g
    return g


def main(gen, out):
    for h in (32, 64):
        net = Net(h)
        g = open(f"{gen}/net{h}.adjoint.wgsl").read()
        open(f"{out}/net{h}.adjoint~tpre.wgsl", "w").write(prefetch_target(g))
        open(f"{out}/net{h}.adjoint~ahead2.wgsl", "w").write(ahead2(prefetch_target(g)))
        # The lane's rows: four consecutive ones.
        i, j = between(g, "    var w1_0: array<f32, 8>;\n", "    var gb3 = 0.0f;\n")
        g = g[:i] + rows_decl(net, g) + g[j:]
        # The chunk: layer 1 through d_s2.
        i = g.index("        var s0_0 = vec4<f32>(b1_0);\n")
        si, sj = between(g, "        if (lid < 64u) {\n            let e = lid;\n", "        workgroupBarrier();\n", i)
        sum_block = g[si:sj].replace(f"r < {h // 2}u", f"r < {net.parts}u")
        assert f"r < {net.parts}u" in sum_block
        j = g.index("        var d0_0 = vec4<f32>(0.0);\n", sj)
        g = g[:i] + forward(net, sum_block) + g[j:]
        # d_h1 = W2^T d_s2, then d_W2 as generated.
        i = g.index("        var d0_0 = vec4<f32>(0.0);\n")
        j = g.index("        {\n            let e4 = ", i)
        g = g[:i] + backward_rows(net) + g[j:]
        i = g.index("        let hh0_0 = ")
        j = g.index("        workgroupBarrier();\n", i)
        e = ""
        for r in range(4):
            e += (f"        let hh{r} = h1s[{net.cell(f'4u * a + {r}u', 'eg')}];\n"
                  f"        let e{r} = (vec4<f32>(1.0) - hh{r} * hh{r}) * d{r};\n"
                  f"        gb1_{r} += (e{r}.x + e{r}.y) + (e{r}.z + e{r}.w);\n")
        g = g[:i] + e + g[j:]
        i = g.index("        for (var k = 0u; k < 8u; k++) {\n            let x0 = h1s[")
        j = g.index("        }\n    }\n", i) + len("        }\n")
        w = "        for (var k = 0u; k < 8u; k++) {\n"
        w += f"            let x = h1s[{net.cell('k', 'eg')}];\n"
        w += "".join(f"            gw1_{r}[k] = dot_acc(e{r}, x, gw1_{r}[k]);\n" for r in range(4))
        w += "        }\n"
        g = g[:i] + w + g[j:]
        # The rows' sums over the sixteen column groups, in turn.
        i = g.index("    for (var v = 0u; v < 8u; v++) {\n        if (cg == v) {\n")
        j = g.index("        workgroupBarrier();\n    }\n", i) + len("        workgroupBarrier();\n    }\n")
        t = "    for (var v = 0u; v < 16u; v++) {\n        if (eg == v) {\n"
        for r in range(4):
            vals = [f"gw1_{r}[{k}]" for k in range(8)] + [f"gb1_{r}", f"gb2_{r}", f"gw3_{r}"]
            for it, val in enumerate(vals):
                t += (f"            {{ let q = {it * h}u + 4u * a + {r}u; let old = select(0.0f, "
                      f"h1s[q / 4u][q % 4u], v > 0u); h1s[q / 4u][q % 4u] = old + {val}; }}\n")
        t += "        }\n        workgroupBarrier();\n    }\n"
        g = g[:i] + t + g[j:]
        for gone in ("s0_0", "f0_0", "t0_0", "d0_0", "e0_0", "gw1_0[k] = dot_acc(e0_1"):
            assert gone not in g, gone
        open(f"{out}/net{h}.adjoint~quad.wgsl", "w").write(g)
        open(f"{out}/net{h}.adjoint~quad_tpre.wgsl", "w").write(prefetch_target(g))
        open(f"{out}/net{h}.adjoint~quad_ahead2.wgsl", "w").write(ahead2(prefetch_target(g)))
        if h == 64:
            open(f"{out}/net{h}.adjoint~quad_w1g.wgsl", "w").write(w1_from_storage(g))
    g = open(f"{gen}/net32.adjoint.wgsl").read()
    open(f"{out}/net32.adjoint~xkeep.wgsl", "w").write(keep_inputs(g))
    open(f"{out}/net32.adjoint~xkeep_tpre.wgsl", "w").write(prefetch_target(keep_inputs(g)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
