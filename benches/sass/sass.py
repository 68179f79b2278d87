#!/usr/bin/env python3
"""The SASS the NVIDIA Vulkan driver compiled for our kernels, read off its shader cache.

The H200's driver has no VK_KHR_pipeline_executable_properties, so `.bench/registers`
reports nothing there. But the driver caches what it compiles: run a bench on the device
with

    export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/glc \
        __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
    ... .bench/corpus --bench ...
    cp /tmp/glc/GLCache/*/*/*.bin $OUT/

and here (pip install zstandard triton: Triton's wheel carries nvdisasm)

    python3 benches/sass/sass.py cache.bin out/prefix [min_bytes]

writes out/prefix_<n>.sass for each cached program of at least min_bytes (60000 by
default: the networks' adjoints; the corpus's small kernels are far smaller), in the
order the driver compiled them, and prints each one's instructions, highest register,
barriers, shared loads, FFMAs, MUFUs and local-memory loads and stores, and its loops
(backward branches: start, end, instructions a trip).

The cache file is a sequence of zstd frames; a compiled program's frame starts with
"NVDANVVMNVuc" and holds the raw sm_90 instructions somewhere inside. They are found from
the EXIT instruction's encoding (16-byte instructions, so the code is aligned to it) and
the longest run before it that nvdisasm decodes. A heuristic: check the first
instructions (S2R of the thread id) when something looks off.
"""
import collections
import re
import subprocess
import sys

EXIT = bytes.fromhex("4d79000000000000")


def nvdisasm():
    import os
    import triton

    return os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/nvdisasm")


def frames(path):
    import zstandard

    b = open(path, "rb").read()
    d = zstandard.ZstdDecompressor()
    out, i = [], 0
    while (j := b.find(b"\x28\xb5\x2f\xfd", i)) >= 0:
        try:
            out.append(d.decompressobj().decompress(b[j:]))
        except zstandard.ZstdError:
            pass
        i = j + 4
    return out


def decodes(nd, code):
    open("/tmp/gf_sass_window.bin", "wb").write(code)
    r = subprocess.run([nd, "-b", "SM90", "/tmp/gf_sass_window.bin"], capture_output=True, text=True)
    return r.returncode == 0, r.stdout


def disassemble(nd, blob):
    hits, i = [], 0
    while (k := blob.find(EXIT, i)) >= 0:
        hits.append(k)
        i = k + 1
    if not hits:
        return None
    end, start, step = max(hits) + 16, hits[0], 4096
    while step >= 16:
        if start - step >= 0 and decodes(nd, blob[start - step:end])[0]:
            start -= step
        else:
            step //= 2
    return decodes(nd, blob[start:end])[1]


INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)([A-Z0-9_.]*)(.*)")


def instructions(text):
    """Each instruction of nvdisasm's text: its address, opcode, modifiers (".U.128") and
    operands (what follows, up to the line's end)."""
    out = []
    for line in text.split("\n"):
        m = INSTRUCTION.match(line)
        if m:
            out.append((int(m.group(1), 16), m.group(2), m.group(3), m.group(4)))
    return out


def summary(text):
    ins = [(at, op, rest) for at, op, _, rest in instructions(text)]
    ops = collections.Counter(op for _, op, _ in ins)
    regs = max([int(r) for r in re.findall(r"\bR(\d+)\b", text)] + [0])
    loops = []
    for at, op, rest in ins:
        t = re.search(r"0x([0-9a-f]+)", rest) if op == "BRA" else None
        if t and int(t.group(1), 16) < at:
            loops.append((hex(int(t.group(1), 16)), hex(at), (at - int(t.group(1), 16)) // 16 + 1))
    keys = ["BAR", "LDS", "FFMA", "MUFU", "LDL", "STL"]
    return f"{len(ins)} instructions, R{regs} highest, " + ", ".join(f"{k} {ops[k]}" for k in keys) + f"; loops {loops}"


def main():
    nd = nvdisasm()
    least = int(sys.argv[3]) if len(sys.argv) > 3 else 60000
    n = 0
    for blob in frames(sys.argv[1]):
        if len(blob) < least or not blob.startswith(b"NVDANVVMNVuc"):
            continue
        text = disassemble(nd, blob)
        if text is None:
            continue
        open(f"{sys.argv[2]}_{n}.sass", "w").write(text)
        print(n, len(blob), summary(text))
        n += 1


if __name__ == "__main__":
    main()
