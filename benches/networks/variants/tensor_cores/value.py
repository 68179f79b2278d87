#!/usr/bin/env python3
"""The value kernel of an 8-H-H-1 tanh network (H = 32 or 64, `networks.rs`'s net32 and
net64) with both layers' products on tensor cores, written as a corpus variant of the
generated value kernel (whose header and `gf_tanh` it keeps):

    python3 value.py <H> dir/net<H>.forward.wgsl dir/net<H>.forward~coop.wgsl
    python3 value.py --emulate <H> dir/net<H>.forward.wgsl dir/net<H>.forward~emulated.wgsl

The second form writes each product as a loop over the same f16 halves in workgroup memory
(no cooperative matrices: lavapipe runs it), which checks everything in the kernel but the
matrices' own loads, stores and products.

A workgroup takes its 256 elements (the generated kernel's launch) in sub-chunks of
C = 2048 / H: every layer is then an H x C product of 8 tiles of 16 x 16, one a subgroup.
The weights are split into f16 halves in workgroup memory once, each sub-chunk's inputs
and activations as they are written: `hi` the top 11 bits of the significand (an integer
mask, which no compiler folds into the conversion), `lo` the exact rest scaled by 2^11 so
that it is a normal f16. A tile's product is `A_hi B_hi` into one f32 accumulator and
`A_hi B_lo + A_lo B_hi` into a second, scaled back when `tanh` reads them
(`split_error.py` says what each form costs in accuracy). Needs the runtime to enable
`EXPERIMENTAL_COOPERATIVE_MATRIX` and `SHADER_F16` (`runtime_switch.patch`); BENCHMARKS.md,
"Tensor cores through wgpu".
"""
import sys


def tree_sum(terms):
    """A pairwise sum, in a fixed order."""
    while len(terms) > 1:
        terms = [f"({a} + {b})" for a, b in zip(terms[::2], terms[1::2])]
    return terms[0]


# The WGSL of the f16 halves, which every tensor-core kernel here splits its operands into.
HALVES = """// f16 halves of v: the top 11 bits of its significand, and the rest scaled by 2^11.
fn hi16(v: f32) -> f16 {
    return f16(bitcast<f32>(bitcast<u32>(v) & 0xFFFFE000u));
}

fn lo16(v: f32) -> f16 {
    return f16((v - bitcast<f32>(bitcast<u32>(v) & 0xFFFFE000u)) * 2048.0);
}
"""


def staging(h, c, read):
    """The weights' halves into workgroup memory (`W1` padded to 16 columns) and the zero
    rows 8..15 of the inputs' tile; `read(k)` is the kernel's shared-word reader."""
    o2 = 9 * h
    return f"""    for (var idx = lid; idx < {h * h}u; idx += 256u) {{
        let w = {read}({o2}u + idx);
        w2h[idx] = hi16(w);
        w2l[idx] = lo16(w);
    }}
    for (var idx = lid; idx < {h * 16}u; idx += 256u) {{
        let j = idx / 16u;
        let k = idx % 16u;
        let w = select(0.0, {read}(j * 8u + min(k, 7u)), k < 8u);
        w1h[idx] = hi16(w);
        w1l[idx] = lo16(w);
    }}
    // Rows 8..15 of the inputs' tile stay zero: K is 16, the network has 8 inputs.
    for (var idx = {8 * c}u + lid; idx < {16 * c}u; idx += 256u) {{
        xh[idx] = f16(0.0);
        xl[idx] = f16(0.0);
    }}
"""


def kernel(h, generated, emulate=False):
    c = 2048 // h  # elements of a sub-chunk
    tiles_c = c // 16  # column tiles a layer
    parts = 256 // c  # threads summing an element's output row
    o2, b2, w3, b3 = 9 * h, 9 * h + h * h, 10 * h + h * h, 11 * h + h * h
    header = generated[: generated.index("// tanh to about 2 ulp")]
    header = header[header.index("struct Params") :]
    tanh = generated[generated.index("// tanh to about 2 ulp") : generated.index("// Threads per workgroup")]
    red = tree_sum([f"red[{p * c}u + lid]" for p in range(parts)])
    stage_at = f"jt * {16 * c}u + et * 16u"
    mma = """coopLoadT<coop_mat16x16<f16, {role}>>(&{arr}[{at}], {stride}u)"""

    def lines(indent, text):
        return "\n".join(indent + line for line in text)

    def init(acc, indent):
        """An accumulator pair set to zero."""
        if emulate:
            return lines(indent, [
                "for (var q = lid % 32u; q < 256u; q += 32u) {",
                f"    let at = {stage_at} + (q / 16u) * {c}u + q % 16u;",
                "    stage[at] = 0.0;",
                "    stage2[at] = 0.0;",
                "}",
            ])
        return lines(indent, [
            f"var {acc} = coopLoadT<coop_mat16x16<f32, C>>(&zero[0], 16u);",
            f"var {acc}x = {acc};",
        ])

    def product(acc, a, b, a_at, b_at, a_stride, b_stride, indent):
        """`A_hi B_hi` into the accumulator, `A_hi B_lo + A_lo B_hi` into its twin."""
        if emulate:
            return lines(indent, [
                "for (var q = lid % 32u; q < 256u; q += 32u) {",
                "    let r = q / 16u;",
                "    let col = q % 16u;",
                "    var hh = 0.0;",
                "    var cross = 0.0;",
                "    for (var k = 0u; k < 16u; k++) {",
                f"        let ia = {a_at} + r * {a_stride}u + k;",
                f"        let ib = {b_at} + k * {b_stride}u + col;",
                f"        hh += f32({a}h[ia]) * f32({b}h[ib]);",
                f"        cross += f32({a}h[ia]) * f32({b}l[ib]) + f32({a}l[ia]) * f32({b}h[ib]);",
                "    }",
                f"    let at = {stage_at} + r * {c}u + col;",
                "    stage[at] += hh;",
                "    stage2[at] += cross;",
                "}",
            ])
        return lines(indent, [
            f"let ah = {mma.format(role='A', arr=a + 'h', at=a_at, stride=a_stride)};",
            f"let al = {mma.format(role='A', arr=a + 'l', at=a_at, stride=a_stride)};",
            f"let bh = {mma.format(role='B', arr=b + 'h', at=b_at, stride=b_stride)};",
            f"let bl = {mma.format(role='B', arr=b + 'l', at=b_at, stride=b_stride)};",
            f"{acc} = coopMultiplyAdd(ah, bh, {acc});",
            f"{acc}x = coopMultiplyAdd(ah, bl, {acc}x);",
            f"{acc}x = coopMultiplyAdd(al, bh, {acc}x);",
        ])

    def store(acc, indent):
        """The accumulator pair into `stage` and `stage2` (where the emulation summed them)."""
        if emulate:
            return ""
        return lines(indent, [
            f"coopStoreT({acc}, &stage[{stage_at}], {c}u);",
            f"coopStoreT({acc}x, &stage2[{stage_at}], {c}u);",
        ])

    extension = "" if emulate else "enable wgpu_cooperative_matrix;\n"
    what = "emulated without them (each product a loop)" if emulate else "on tensor cores"
    return f"""// net{h}'s value kernel with both layers' products {what}: written
// by benches/networks/variants/tensor_cores/value.py, a screen, not generated.
enable f16;
{extension}
{header}var<workgroup> w2h: array<f16, {h * h}>;
var<workgroup> w2l: array<f16, {h * h}>;
var<workgroup> w1h: array<f16, {h * 16}>;
var<workgroup> w1l: array<f16, {h * 16}>;
var<workgroup> xh: array<f16, {16 * c}>;
var<workgroup> xl: array<f16, {16 * c}>;
var<workgroup> h1h: array<f16, 2048>;
var<workgroup> h1l: array<f16, 2048>;
var<workgroup> stage: array<f32, 2048>;
var<workgroup> stage2: array<f32, 2048>;
var<workgroup> zero: array<f32, 256>;
var<workgroup> red: array<f32, 256>;

{HALVES}
fn sh(k: u32) -> f32 {{
    return shared_args[k / 4u][k % 4u];
}}

{tanh}@compute @workgroup_size(256)
fn forward(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{
    let first = (wid.x + wid.y * groups.x) * 256u;
    if (first >= params.n) {{
        return;
    }}
{staging(h, c, 'sh')}    zero[lid] = 0.0;
    let sg = lid / 32u;
    let jt = sg / {tiles_c}u;
    let et = sg % {tiles_c}u;
    let e = lid % {c}u;
    let part = lid / {c}u;
    for (var chunk = 0u; chunk < {256 // c}u; chunk++) {{
        let base = first + chunk * {c}u;
        let i_in = min(base + e, params.n - 1u);
        for (var k = part; k < 8u; k += {parts}u) {{
            let xv = args[i_in * 9u + k];
            xh[k * {c}u + e] = hi16(xv);
            xl[k * {c}u + e] = lo16(xv);
        }}
        workgroupBarrier();
{init('acc', '        ')}
{product('acc', 'w1', 'x', 'jt * 256u', 'et * 16u', 16, c, '        ')}
{store('acc', '        ')}
        workgroupBarrier();
        for (var r = 0u; r < 8u; r++) {{
            let idx = lid + r * 256u;
            let j = idx / {c}u;
            let h = gf_tanh(stage[idx] + stage2[idx] * (1.0 / 2048.0) + sh({8 * h}u + j));
            h1h[idx] = hi16(h);
            h1l[idx] = lo16(h);
        }}
        workgroupBarrier();
{init('acc2', '        ')}
        for (var kb = 0u; kb < {h // 16}u; kb++) {{
{product('acc2', 'w2', 'h1', f'jt * {16 * h}u + kb * 16u', f'kb * {16 * c}u + et * 16u', h, c, '            ')}
        }}
{store('acc2', '        ')}
        workgroupBarrier();
        // Thread (part, e) sums rows 8 part .. 8 part + 7 of w3 . h2 for element e.
        var p = 0.0;
        for (var r = 0u; r < 8u; r++) {{
            let j = part * 8u + r;
            let at = j * {c}u + e;
            p += sh({w3}u + j) * gf_tanh(stage[at] + stage2[at] * (1.0 / 2048.0) + sh({b2}u + j));
        }}
        red[part * {c}u + e] = p;
        workgroupBarrier();
        if (lid < {c}u) {{
            let i = base + lid;
            let y = sh({b3}u) + {red};
            if (i < params.n) {{
                let t = args[i * 9u + 8u];
                values[i] = (y - t) * (y - t);
            }}
        }}
        workgroupBarrier();
    }}
}}
"""


if __name__ == "__main__":
    emulate = "--emulate" in sys.argv
    h, generated, out = [a for a in sys.argv[1:] if a != "--emulate"]
    h = int(h)
    assert h in (32, 64), "8-32-32-1 or 8-64-64-1"
    with open(generated) as f:
        text = kernel(h, f.read(), emulate)
    with open(out, "w") as f:
        f.write(text)
