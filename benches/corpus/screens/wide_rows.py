#!/usr/bin/env python3
"""Variants of the corpus's wide-row kernels, written from the kernels the corpus bench
writes, to screen what holds them under 70% of their roofline (BENCHMARKS.md, "Rows mapped
through `tanh`").

    GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=dir .bench/corpus --bench
    python3 benches/corpus/screens/wide_rows.py dir [--all]

writes dir/<function>.<kernel>~<name>.wgsl, which the bench times beside the generated
kernel once they agree on 3,000 elements. With `--all`, `bft`, `v4` and `bft_v4` for every
kernel they apply to; without, `array_64`'s adjoint and tangent in these forms:

- `w128`: the generated kernel at a fixed 128 threads (the control for the others);
- `round`: every element of the workgroup stages its gradient in one round (128 x 65 words,
  33 KiB, past the 16 KiB WebGPU guarantees), one barrier pair instead of one per 32;
- `bft`: `tanh` without branches (`ops::WGSL_TANH_BRANCH_FREE`);
- `v4`: the row read as 16-byte loads from its aligned start, each word chosen by the row's
  offset (three selects a word), 17 loads instead of 65 (33 instead of 65 for the tangent's
  8-byte loads);
- combinations of these.
"""
import pathlib
import re
import sys


def branch_free_tanh():
    """`ops::WGSL_TANH_BRANCH_FREE`, read from the generator's source."""
    ops = pathlib.Path(__file__).resolve().parents[3] / "shaders-gen/src/ops.rs"
    literal = re.search(r'pub const WGSL_TANH_BRANCH_FREE: &str = "(.*)";', ops.read_text()).group(1)
    return literal.replace("\\n", "\n").replace('\\"', '"') + "\n"


def fixed_size(src, size):
    src = re.sub(r"override gf_workgroup_size: u32 = \d+;", f"const gf_workgroup_size: u32 = {size}u;", src)
    return src.replace("@workgroup_size(gf_workgroup_size)", f"@workgroup_size({size})")


def branch_free(src):
    start = src.index("fn gf_tanh(")
    end = src.index("\n}\n", start) + 3
    return src[:start] + branch_free_tanh() + src[end:]


def one_round(src, words, size):
    src = re.sub(r"var<workgroup> out_stage: array<f32, \d+>;", f"var<workgroup> out_stage: array<f32, {size * words}>;", src)
    return re.sub(r"let (\w+)_per_round = min\(\d+u, gf_workgroup_size\);", r"let \1_per_round = gf_workgroup_size;", src)


SHIFT = """
// Words o .. o + 3 of the eight words a, b.
fn gf_shift4(a: vec4<f32>, b: vec4<f32>, o: u32) -> vec4<f32> {
    let s1 = vec4<f32>(a.yzw, b.x);
    let s2 = vec4<f32>(a.zw, b.xy);
    let s3 = vec4<f32>(a.w, b.xyz);
    return select(select(a, s1, o == 1u), select(s2, s3, o == 3u), o >= 2u);
}
"""


def vec4_scalar_rows(src, words):
    """`args: array<f32>` rows of `words` words read as `vec4`s from their aligned start."""
    src = src.replace("var<storage, read> args: array<f32>;", "var<storage, read> args: array<vec4<f32>>;")
    src = src.replace("\n@compute", SHIFT + "\n@compute", 1)
    loads = re.findall(r"    let (\w+) = args\[in_base(?: \+ (\d+)u)?\];\n", src)
    assert len(loads) == words, len(loads)
    quads = (max(int(k or 0) for _, k in loads) + 4) // 4 + 1
    lines = ["    let row_q = in_base / 4u;", "    let row_o = in_base % 4u;"]
    for j in range(quads):
        lines.append(f"    let row_r{j} = args[min(row_q + {j}u, arrayLength(&args) - 1u)];")
    for j in range(quads - 1):
        lines.append(f"    let row_w{j} = gf_shift4(row_r{j}, row_r{j + 1}, row_o);")
    picks = {name: f"row_w{int(k or 0) // 4}.{'xyzw'[int(k or 0) % 4]}" for name, k in loads}
    return replace_loads(src, loads, lines, picks)


def vec4_pair_rows(src, pairs):
    """`args: array<vec2<f32>>` rows of `pairs` pairs read as `vec4`s from their aligned start."""
    src = src.replace("var<storage, read> args: array<vec2<f32>>;", "var<storage, read> args: array<vec4<f32>>;")
    loads = re.findall(r"    let (args_\d+) = args\[in_base(?: \+ (\d+)u)?\];\n", src)
    assert len(loads) == pairs, len(loads)
    quads = (max(int(k or 0) for _, k in loads) + 2) // 2 + 1
    lines = ["    let row_q = in_base / 2u;", "    let row_odd = in_base % 2u == 1u;"]
    for j in range(quads):
        lines.append(f"    let row_r{j} = args[min(row_q + {j}u, arrayLength(&args) - 1u)];")
    picks = {}
    for name, k in loads:
        k = int(k or 0)
        even = f"row_r{k // 2}.{'xy' if k % 2 == 0 else 'zw'}"
        odd = f"row_r{(k + 1) // 2}.{'xy' if (k + 1) % 2 == 0 else 'zw'}"
        picks[name] = f"select({even}, {odd}, row_odd)"
    return replace_loads(src, loads, lines, picks)


def replace_loads(src, loads, prologue, picks):
    """Each row load `let name = args[in_base + k];` replaced by `picks[name]`, the
    `prologue` (the aligned loads) before the first."""
    first = src.index("    let " + loads[0][0] + " = args[")
    src = src[:first] + "\n".join(prologue) + "\n" + src[first:]
    for name, k in loads:
        at = f" + {k}u" if k else ""
        line = f"    let {name} = args[in_base{at}];\n"
        assert line in src, line
        src = src.replace(line, f"    let {name} = {picks[name]};\n")
    return src


def screen(d):
    """Every kernel of `d` that calls the branching `gf_tanh` gets `~bft`; every kernel that
    reads its rows word by word (or pair by pair) at `in_base`, 8 words or more, gets `~v4`;
    kernels with both, `~bft_v4` too."""
    out = {}
    for path in sorted(d.glob("*.wgsl")):
        if "~" in path.name:
            continue
        stem = path.name[: -len(".wgsl")]
        src = path.read_text()
        bft = "if (ax >= 0.625)" in src
        v4 = None
        reads = sum(1 for line in src.splitlines() if "args[" in line and not line.lstrip().startswith("//"))
        scalar = re.findall(r"    let (\w+) = args\[in_base(?: \+ (\d+)u)?\];\n", src)
        if "var<storage, read> args: array<f32>;" in src and len(scalar) >= 8 and reads == len(scalar):
            v4 = lambda s, n=len(scalar): vec4_scalar_rows(s, n)
        if "var<storage, read> args: array<vec2<f32>>;" in src and len(scalar) >= 4 and reads == len(scalar):
            v4 = lambda s, n=len(scalar): vec4_pair_rows(s, n)
        if bft:
            out[f"{stem}~bft"] = branch_free(src)
        if v4:
            out[f"{stem}~v4"] = v4(src)
        if bft and v4:
            out[f"{stem}~bft_v4"] = v4(branch_free(src))
    return out


def array_64(d):
    """The first screen's variants of `array_64`'s adjoint and tangent."""
    out = {}
    adj = (d / "array_64.adjoint.wgsl").read_text()
    base = fixed_size(adj, 128)
    out["array_64.adjoint~w128"] = base
    out["array_64.adjoint~round"] = one_round(base, 65, 128)
    out["array_64.adjoint~bft"] = branch_free(base)
    out["array_64.adjoint~v4"] = vec4_scalar_rows(base, 65)
    out["array_64.adjoint~round_bft"] = branch_free(one_round(base, 65, 128))
    out["array_64.adjoint~round_bft_v4"] = vec4_scalar_rows(branch_free(one_round(base, 65, 128)), 65)
    tan = (d / "array_64.tangent.wgsl").read_text()
    base = fixed_size(tan, 32)
    out["array_64.tangent~w32"] = base
    out["array_64.tangent~bft"] = branch_free(base)
    out["array_64.tangent~v4"] = vec4_pair_rows(base, 65)
    out["array_64.tangent~bft_v4"] = vec4_pair_rows(branch_free(base), 65)
    out["array_64.tangent~w64_bft_v4"] = vec4_pair_rows(branch_free(fixed_size(tan, 64)), 65)
    return out


def main():
    d = pathlib.Path(sys.argv[1])
    out = screen(d) if "--all" in sys.argv else array_64(d)
    for name, src in out.items():
        (d / f"{name}.wgsl").write_text(src)
        print(name)


main()
