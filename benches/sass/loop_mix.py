#!/usr/bin/env python3
"""One loop of a kernel's SASS (written by sass.py): its instruction mix, and how far each
shared-memory load is from the first instruction that reads what it loaded.

    python3 benches/sass/loop_mix.py out/prefix_0.sass START END ELEMENTS

START and END are the loop's addresses as sass.py prints them (hex), ELEMENTS the batch
elements one trip of it serves (a network adjoint's chunk). A load used a few instructions
after it is issued stalls its warp for the load's latency unless other warps fill in; the
distance tells whether a slow kernel waits on its loads or on something else
(BENCHMARKS.md, "Four rows a lane").
"""
import collections
import re
import statistics
import sys

from sass import instructions

WIDTH = {".128": 4, ".64": 2}


def body(path, lo, hi):
    """The instructions at addresses lo..=hi: opcode, modifiers, operands."""
    text = open(path).read()
    return [(op, mods, rest.split(";")[0].strip())
            for at, op, mods, rest in instructions(text) if lo <= at <= hi]


def load_use(ins):
    """Instructions from each LDS to the first instruction whose sources read its result."""
    dists = []
    for i, (op, suffix, args) in enumerate(ins):
        if op != "LDS" or not args.startswith("R"):
            continue
        base = int(re.match(r"R(\d+)", args).group(1))
        width = next((w for s, w in WIDTH.items() if s in suffix), 1)
        regs = [f"R{base + k}" for k in range(width)]
        for j in range(i + 1, len(ins)):
            sources = ins[j][2].split(",", 1)[1] if "," in ins[j][2] else ""
            if any(re.search(rf"\b{r}\b", sources) for r in regs):
                dists.append(j - i)
                break
    return dists


def main():
    path, lo, hi, elements = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3], 16), int(sys.argv[4])
    ins = body(path, lo, hi)
    mix = collections.Counter(op for op, _, _ in ins)
    dists = load_use(ins)
    print(f"{path}: {len(ins)} instructions a trip, {len(ins) / elements:.1f} an element")
    print("  " + " ".join(f"{k}:{v}" for k, v in mix.most_common(14)))
    if dists:
        print(f"  LDS to first use: median {statistics.median(dists)}, "
              f"min {min(dists)}, under 8: {sum(d < 8 for d in dists)} of {len(dists)}")


if __name__ == "__main__":
    main()
