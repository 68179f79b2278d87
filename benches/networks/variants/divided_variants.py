"""Variants of the generated 8-32-32-1 and 8-64-64-1 adjoints for divided.sh: `tanh`
without its select at 9 (`tanh9`: exp(2|x|) is past 6.6e7 there, and 2 / (e + 1) rounds
1 - it to the correctly rounded tanh, 1 from 9.011 on), its sign copied by bits
(`tanhbits`: t >= 0 wherever it is selected), both (`tanh9bits`), and the prologue's copy of
W2 into workgroup memory with every load first (`loadsfirst`: the copy loop waits on each
load in turn otherwise).

    python3 divided_variants.py GENERATED_DIR OUT_DIR

(For kernels generated before `tanh9` landed, 2026-12-07's fourth session: since then the
generated `tanh` has no select at 9 to take out.)
"""
import sys

SELECT_9 = "    let t = select(e, 1.0, !(ax < 9.0));\n"
SIGN = "    return select(p, select(t, -t, x < 0.0), ax >= 0.625);\n"
SIGN_BITS = ("    return select(p, bitcast<f32>(bitcast<u32>(t) | (bitcast<u32>(x) & 0x80000000u)),"
             " ax >= 0.625);\n")
# (width, words copied, threads, W2's first shared word, the store's left side)
COPIES = {
    32: (1024, 128, 288, "w2s[j * 36u + k]"),
    64: (4096, 256, 576, "w2s[j * 64u + 4u * ((k / 4u) ^ (j % 16u)) + k % 4u]"),
}


def loads_first(g, n):
    total, t, off, store = COPIES[n]
    start = g.index(f"    for (var q = lid; q < {total}u; q += {t}u) {{")
    end = g.index("    }\n", start) + 6
    it = total // t
    new = (f"    var wtmp: array<f32, {it}>;\n"
           f"    for (var i = 0u; i < {it}u; i++) {{ wtmp[i] = sw({off}u + lid + i * {t}u); }}\n"
           f"    for (var i = 0u; i < {it}u; i++) {{\n        let q = lid + i * {t}u;\n"
           f"        let j = q / {n}u;\n        let k = q % {n}u;\n        {store} = wtmp[i];\n    }}\n")
    return g[:start] + new + g[end:]


def main(gen, out):
    for n in (32, 64):
        g = open(f"{gen}/net{n}.adjoint.wgsl").read()
        assert SELECT_9 in g and SIGN in g
        variants = {
            "tanh9": g.replace(SELECT_9, "    let t = e;\n"),
            "tanhbits": g.replace(SIGN, SIGN_BITS),
            "tanh9bits": g.replace(SELECT_9, "    let t = e;\n").replace(SIGN, SIGN_BITS),
            "loadsfirst": loads_first(g, n),
        }
        for name, src in variants.items():
            open(f"{out}/net{n}.adjoint~{name}.wgsl", "w").write(src)


if __name__ == "__main__":
    main(*sys.argv[1:3])
