#!/usr/bin/env python3
"""The 8-32-32-1 tanh network's cooperative adjoint over chunks of 128 elements, each lane
a tile of 4 rows by 8 elements, for GRADFUSE_CORPUS_VARIANTS (BENCHMARKS.md, "Chunks of 128
elements").

    python3 wide_tile.py in.wgsl out.wgsl [--tanh=rcp|cut] [--gen]

in.wgsl is the generated adjoint of benches/networks/variants/networks.rs's net32 (its
bindings, Params, gf_loss and helpers are kept). The generated kernel takes chunks of 64
elements, each lane 2 rows by 8 elements (2 weights and 2 vec4s read for 16 FMAs in the
products), eight barriers a chunk, the loss summed by half the workgroup. Here a chunk is
128 elements: 4 rows by 8 elements a lane (W2's rows read as vec4s of 4 columns, so 1 + 2
reads for 32 FMAs in the forward product), six barriers a chunk, every lane one element's
loss; x staged once a chunk in its own array (the generated kernel stages it twice), W1 read
from workgroup memory. 43 KiB of workgroup memory.

--tanh=rcp: gf_tanh's division as a reciprocal from inverseSqrt and one Newton step, its
argument clamped at 10 (no select at 9). --tanh=cut: tanh(x) = x / 2 (wrong values: name
the output ...-unchecked). --gen: the tanh change alone, on in.wgsl as generated.
"""
import sys

H, I, C, WG = 32, 8, 128, 128
R = 4  # rows a lane: rg + 8 i
RS = C // 4 + 1  # vec4s a row of h1s / ds2s / xs, one of padding
WSTRIDE = 36  # words a row of W2 in w2s (9 vec4s)

TANH_RCP = """// tanh as gf_tanh, the division 2 / (e + 1) as a reciprocal: inverseSqrt squared and one
// Newton step; |x| clamped at 10, where exp(2|x|) is finite and 1 - 2 / (e + 1) rounds to 1.
fn gf_tanh(x: f32) -> f32 {
    let ax = min(abs(x), 10.0);
    let d = exp2(ax * 2.8853900817779268) + 1.0;
    let r0 = inverseSqrt(d);
    let r1 = r0 * r0;
    let r = fma(fma(-d, r1, 1.0), r1, r1);
    let t = fma(-2.0, r, 1.0);
    let z = x * x;
    let p = ((((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z + 1.33314422036e-1) * z - 3.33332819422e-1) * z * x + x;
    return select(p, select(t, -t, x < 0.0), abs(x) >= 0.625);
}
"""

TANH_CUT = """// Not tanh: x / 2, to time the kernel without tanh's cost (wrong values).
fn gf_tanh(x: f32) -> f32 {
    return 0.5 * x;
}
"""


def swap_tanh(src, form):
    start = src.index("fn gf_tanh(")
    # the comment lines just above the function go with it
    cstart = src.rfind("\n\n", 0, start) + 2
    end = src.index("\n}\n", start) + 3
    new = {"rcp": TANH_RCP, "cut": TANH_CUT}[form]
    return src[:cstart] + new + src[end:]


def transform_main(transform):
    """The command line of a variant that rewrites a generated kernel: `in.wgsl out.wgsl
    [--tanh=rcp|cut]`, `transform` applied, then `--tanh`'s form of gf_tanh."""
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    out = transform(open(args[0]).read())
    tanh = next((x.split("=")[1] for x in sys.argv[1:] if x.startswith("--tanh=")), None)
    if tanh:
        out = swap_tanh(out, tanh)
    open(args[1], "w").write(out)


def header(src):
    """Everything of in.wgsl before its workgroup arrays, and its functions after them."""
    first_wg = src.index("var<workgroup>")
    head = src[:src.rfind("\n\n", 0, first_wg) + 2]
    funcs = src[src.index("\n//", src.rindex("var<workgroup>")) + 1:src.index("@compute")]
    return head + WG_ARRAYS + "\n" + funcs


WG_ARRAYS = f"""// W2[j][k] at word j * {WSTRIDE} + k; W1[j][k] at word 8 j + k.
var<workgroup> w2s: array<vec4<f32>, {H * WSTRIDE // 4}>;
var<workgroup> w1s: array<vec4<f32>, {H * I // 4}>;
// Rows of {C // 4} vec4s ({C} elements) and one of padding: column c of row r at r * {RS} + c.
var<workgroup> h1s: array<vec4<f32>, {H * RS}>;
var<workgroup> ds2s: array<vec4<f32>, {H * RS}>;
var<workgroup> xs: array<vec4<f32>, {I * RS}>;
var<workgroup> dys: array<vec4<f32>, {C // 4}>;
"""


def rows(i):
    return f"(rg + {8 * i}u)"


def product(a, acc, bias, weights, inputs, scoped):
    """A layer's sums `acc{i}_{c} = bias + W . in` for the lane's 4 rows by 2 vec4s of
    elements: per step of four columns, a vec4 of W a row (`weights`: names, array, row
    stride in vec4s) and the inputs' rows broadcast (`inputs`: name, array, columns).
    `scoped`: each step in a block of its own, its names by step (layer 2), else unique
    names by column (layer 1)."""
    (wn, warr, wstride), (xn, xarr, cols) = weights, inputs
    ind = "            " if scoped else "        "
    for i in range(R):
        for c in range(2):
            a(f"        var {acc}{i}_{c} = vec4<f32>({bias}_{i});")
    for k4 in range(cols // 4):
        if scoped:
            a("        {")
        w = (lambda i: f"{wn}{i}") if scoped else (lambda i: f"{wn}{i}_{k4}")
        for i in range(R):
            a(f"{ind}let {w(i)} = {warr}[{rows(i)} * {wstride}u + {k4}u];")
        for kk in range(4):
            k = 4 * k4 + kk
            x = (lambda c: f"{xn}{kk}_{c}") if scoped else (lambda c: f"{xn}{k}_{c}")
            for c in range(2):
                a(f"{ind}let {x(c)} = {xarr}[{k * RS}u + cw + {c}u];")
                for i in range(R):
                    a(f"{ind}{acc}{i}_{c} += {w(i)}.{'xyzw'[kk]} * {x(c)};")
        if scoped:
            a("        }")


def kernel():
    o = []
    a = o.append
    a(f"@compute @workgroup_size({WG})")
    a("fn adjoint(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {")
    a("    let group = wid.x + wid.y * groups.x;")
    a("    let per_thread = params.per_thread;")
    a("    let n = params.n;")
    a("    let rg = lid % 8u;")
    a("    let cw = lid / 8u * 2u;")
    a("    let part = lid / 64u;")
    a("    let jb = lid % 64u / 8u;")
    a("    let kb = lid % 8u;")
    a(f"    for (var q = lid; q < {H * H}u; q += {WG}u) {{")
    a(f"        let j = q / {H}u;")
    a(f"        let k = q % {H}u;")
    a(f"        let w = j * {WSTRIDE}u + k;")
    a(f"        w2s[w / 4u][w % 4u] = sw({H * I + H}u + q);")
    a("    }")
    a(f"    for (var q = lid; q < {H * I}u; q += {WG}u) {{")
    a("        w1s[q / 4u][q % 4u] = sw(q);")
    a("    }")
    for i in range(R):
        a(f"    let b1_{i} = sw({H * I}u + {rows(i)});")
        a(f"    let b2_{i} = sw({H * I + H + H * H}u + {rows(i)});")
        a(f"    let w3_{i} = sw({H * I + 2 * H + H * H}u + {rows(i)});")
        a(f"    var gb1_{i} = 0.0f;")
        a(f"    var gb2_{i} = 0.0f;")
        a(f"    var gw3_{i} = 0.0f;")
        for f in range(I):
            a(f"    var gw1_{i}_{f} = 0.0f;")
    a("    var gb3 = 0.0f;")
    for p in range(4):
        for q in range(4):
            a(f"    var gw2_{p}_{q} = 0.0f;")
    a(f"    let base = group * per_thread * {C}u;")
    xm = C * I // WG
    for m in range(xm):
        a(f"    var xr{m} = 0.0f;")
    a("    if (base < n) {")
    for m in range(xm):
        a(f"        {{ let q = lid + {m * WG}u; xr{m} = args[min(base + q / {I}u, n - 1u) * {I + 1}u + q % {I}u]; }}")
    a("    }")
    a("    for (var idx = 0u; idx < per_thread; idx++) {")
    a(f"        let first = base + idx * {C}u;")
    a("        if (first >= n) {")
    a("            break;")
    a("        }")
    a("        workgroupBarrier();")
    for m in range(xm):
        a(f"        {{ let q = lid + {m * WG}u; let e = q / {I}u; xs[q % {I}u * {RS}u + e / 4u][e % 4u] = xr{m}; }}")
    for m in range(xm):
        a(f"        {{ let q = lid + {m * WG}u; xr{m} = args[min(first + {C}u + q / {I}u, n - 1u) * {I + 1}u + q % {I}u]; }}")
    a("        workgroupBarrier();")
    # layer 1
    product(a, "s", "b1", ("wa", "w1s", I // 4), ("x", "xs", I), False)
    for i in range(R):
        for c in range(2):
            a(f"        h1s[{rows(i)} * {RS}u + cw + {c}u] = tanh4(s{i}_{c});")
    a("        workgroupBarrier();")
    # layer 2
    product(a, "f", "b2", ("wv", "w2s", WSTRIDE // 4), ("h", "h1s", H), True)
    for i in range(R):
        for c in range(2):
            a(f"        let t{i}_{c} = tanh4(f{i}_{c});")
    for c in range(2):
        terms = " + ".join(f"w3_{i} * t{i}_{c}" for i in range(R))
        a(f"        ds2s[rg * {RS}u + cw + {c}u] = {terms};")
    a("        workgroupBarrier();")
    a("        {")
    a("            let e = lid;")
    a(f"            var y = sw({H * I + 3 * H + H * H}u);")
    for r in range(8):
        a(f"            y += ds2s[{r * RS}u + e / 4u][e % 4u];")
    a(f"            let loss = gf_loss(y, min(first + e, n - 1u) * {I + 1}u);")
    a("            let inb = first + e < n;")
    a("            if (inb) {")
    a("                values[first + e] = loss.x;")
    a("            }")
    a("            let dy = select(0.0f, loss.y, inb);")
    a("            gb3 += dy;")
    a("            dys[e / 4u][e % 4u] = dy;")
    a("        }")
    a("        workgroupBarrier();")
    for c in range(2):
        a(f"        let dy{c} = dys[cw + {c}u];")
    for i in range(R):
        for c in range(2):
            a(f"        gw3_{i} = dot_acc(t{i}_{c}, dy{c}, gw3_{i});")
            a(f"        let g{i}_{c} = (vec4<f32>(1.0) - t{i}_{c} * t{i}_{c}) * (w3_{i} * dy{c});")
            a(f"        gb2_{i} += (g{i}_{c}.x + g{i}_{c}.y) + (g{i}_{c}.z + g{i}_{c}.w);")
            a(f"        ds2s[{rows(i)} * {RS}u + cw + {c}u] = g{i}_{c};")
    a("        workgroupBarrier();")
    # W2^T G
    for i in range(R):
        for c in range(2):
            a(f"        var d{i}_{c} = vec4<f32>(0.0);")
    for k in range(H):
        a("        {")
        for i in range(R):
            a(f"            let v{i} = w2s[{k * WSTRIDE // 4 + 2 * i}u + rg / 4u][rg % 4u];")
        for c in range(2):
            a(f"            let g{c} = ds2s[{k * RS}u + cw + {c}u];")
            for i in range(R):
                a(f"            d{i}_{c} += v{i} * g{c};")
        a("        }")
    for i in range(R):
        for c in range(2):
            a(f"        let hh{i}_{c} = h1s[{rows(i)} * {RS}u + cw + {c}u];")
            a(f"        let e{i}_{c} = (vec4<f32>(1.0) - hh{i}_{c} * hh{i}_{c}) * d{i}_{c};")
            a(f"        gb1_{i} += (e{i}_{c}.x + e{i}_{c}.y) + (e{i}_{c}.z + e{i}_{c}.w);")
    # dW1
    for f in range(I):
        a(f"        let xx{f}_0 = xs[{f * RS}u + cw];")
        a(f"        let xx{f}_1 = xs[{f * RS}u + cw + 1u];")
        for i in range(R):
            a(f"        gw1_{i}_{f} = dot_acc(e{i}_1, xx{f}_1, dot_acc(e{i}_0, xx{f}_0, gw1_{i}_{f}));")
    # dW2: rows jb + 8 p of G by rows kb + 8 q of H1, over this part's half of the chunk
    for e4 in range(C // 8):
        a("        {")
        a(f"            let e4 = part * {C // 8}u + {e4}u;")
        for p in range(4):
            a(f"            let p{p} = ds2s[(jb + {8 * p}u) * {RS}u + e4];")
        for q in range(4):
            a(f"            let q{q} = h1s[(kb + {8 * q}u) * {RS}u + e4];")
        for p in range(4):
            for q in range(4):
                a(f"            gw2_{p}_{q} = dot_acc(p{p}, q{q}, gw2_{p}_{q});")
        a("        }")
    a("    }")
    # epilogue
    a(f"    let row = group * {H * I + H + H * H + H + H + 1}u;")
    a("    workgroupBarrier();")
    # d_W2's two halves: part 1's words through h1s, added to part 0's and written.
    def each_d_w2_word(body):
        for p in range(4):
            for q in range(4):
                a(f"        {{ let q = (jb + {8 * p}u) * {H}u + kb + {8 * q}u; {body(f'gw2_{p}_{q}')} }}")

    a("    if (part == 1u) {")
    each_d_w2_word(lambda g: f"h1s[q / 4u][q % 4u] = {g};")
    a("    }")
    a("    workgroupBarrier();")
    a("    if (part == 0u) {")
    each_d_w2_word(lambda g: f"{g} += h1s[q / 4u][q % 4u]; shared_partials[row + {H * I + H}u + q] = {g};")
    a("    }")
    a("    workgroupBarrier();")
    # Each lane's row sums over its elements, staged word o * 16 + lane group: o = f * 32 + j
    # (W1's gradient, in h1s), o = 32 * s + j for s = 0, 1, 2 (b1, b2, w3; in ds2s).
    a("    let cg = lid / 8u;")
    for i in range(R):
        for f in range(I):
            a(f"        {{ let q = ({f * H}u + {rows(i)}) * 16u + cg; h1s[q / 4u][q % 4u] = gw1_{i}_{f}; }}")
        for s, nm in enumerate(["gb1", "gb2", "gw3"]):
            a(f"        {{ let q = ({s * H}u + {rows(i)}) * 16u + cg; ds2s[q / 4u][q % 4u] = {nm}_{i}; }}")
    a("    dys[lid / 4u][lid % 4u] = gb3;")
    a("    workgroupBarrier();")
    a(f"    for (var o = lid; o < {H * I + 3 * H}u; o += {WG}u) {{")
    a("        var s = 0.0f;")
    a(f"        if (o < {H * I}u) {{")
    a("            for (var c = 0u; c < 16u; c++) { let q = o * 16u + c; s += h1s[q / 4u][q % 4u]; }")
    a(f"            shared_partials[row + {I}u * (o % {H}u) + o / {H}u] = s;")
    a("        } else {")
    a(f"            let u = o - {H * I}u;")
    a("            for (var c = 0u; c < 16u; c++) { let q = u * 16u + c; s += ds2s[q / 4u][q % 4u]; }")
    a(f"            let at = array<u32, 3>({H * I}u, {H * I + H + H * H}u, {H * I + 2 * H + H * H}u);")
    a(f"            shared_partials[row + at[u / {H}u] + u % {H}u] = s;")
    a("        }")
    a("    }")
    a("    if (lid == 0u) {")
    a("        var b3 = 0.0f;")
    a(f"        for (var e = 0u; e < {WG}u; e++) {{")
    a("            b3 += dys[e / 4u][e % 4u];")
    a("        }")
    a(f"        shared_partials[row + {H * I + 3 * H + H * H}u] = b3;")
    a("    }")
    a("}")
    return "\n".join(o) + "\n"


def main():
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    opts = [x for x in sys.argv[1:] if x.startswith("--")]
    src = open(args[0]).read()
    tanh = next((x.split("=")[1] for x in opts if x.startswith("--tanh=")), None)
    if "--gen" in opts:
        out = src
    else:
        assert "let lr = lid % 16u;" in src and "w2: [f32; 1056]" in src, "net32's generated adjoint"
        out = header(src) + kernel()
    if tanh:
        out = swap_tanh(out, tanh)
    open(args[1], "w").write(out)


if __name__ == "__main__":
    main()
