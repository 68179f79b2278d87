"""Cut variants of the networks' adjoints, for the GPU bench's variants table: where a
kernel's time goes. Each cut removes work and gives wrong shared gradients (timing only).

    # the adjoints as generated: .bench/gpu writes dir/<network>.wgsl where missing
    GRADFUSE_NET_SIZES=10 GRADFUSE_NET_VARIANTS=dir .bench/gpu --bench --quick
    python3 benches/networks/cuts.py dir
    # then on the device, carrying dir:
    GRADFUSE_NET_SIZES="20 24" GRADFUSE_NET_VARIANTS=dir .bench/gpu --bench

Cuts, each written as dir/<network>~<cut>.wgsl:
- cut_outer_sums: the chunk loops of the outer-product sums (staging, barriers, owners);
- cut_staging: only the chunk threads' copies into the stage;
- cut_owners: only the owners' adds;
- cut_stream: the streamed words' workgroup sums (gf_reduce_levels, gf_reduce_stage
  emptied);
- cut_both: cut_outer_sums and cut_stream.
"""
import os
import re
import sys


def cut_block(src, pattern):
    """Removes every block whose first line matches `pattern`, to its closing brace."""
    lines, out, i = src.split("\n"), [], 0
    while i < len(lines):
        if re.search(pattern, lines[i]):
            depth = 0
            while True:
                depth += lines[i].count("{") - lines[i].count("}")
                i += 1
                if depth <= 0:
                    break
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def empty_fn(src, name):
    """Empties the body of WGSL function `name` (it must return nothing)."""
    lines, out, i = src.split("\n"), [], 0
    while i < len(lines):
        if lines[i].startswith("fn %s(" % name):
            out.append(lines[i])
            depth = lines[i].count("{") - lines[i].count("}")
            i += 1
            while depth > 0:
                depth += lines[i].count("{") - lines[i].count("}")
                i += 1
            out.append("}")
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def no_stream(src):
    return empty_fn(empty_fn(src, "gf_reduce_levels"), "gf_reduce_stage")


def main(d):
    for name in sorted(os.listdir(d)):
        if "~" in name or not name.endswith(".wgsl"):
            continue
        net = name[: -len(".wgsl")]
        src = open(os.path.join(d, name)).read()
        lines = src.split("\n")
        staging = re.compile(
            r"\s*(for \(var \w+ = 0u; \w+ < \d+u; \w+\+\+\) \{ outer_stage\[|outer_stage\[at\w* \+ \d+u\] = )"
        )
        owners = re.compile(r"\+= select\(|acc\w* \+= outer_stage")
        cuts = {
            "cut_outer_sums": cut_block(src, r"for \(var chunk\w* = 0u"),
            "cut_staging": "\n".join(l for l in lines if not staging.match(l)),
            "cut_owners": "\n".join(l for l in lines if not owners.search(l)),
            "cut_stream": no_stream(src),
            "cut_both": no_stream(cut_block(src, r"for \(var chunk\w* = 0u")),
        }
        for cut, text in cuts.items():
            with open(os.path.join(d, f"{net}~{cut}.wgsl"), "w") as f:
                f.write(text)


if __name__ == "__main__":
    main(sys.argv[1])
