#!/usr/bin/env python3
"""How far an 8-H-H-1 tanh network's value moves when its products take f16 operands.

The corpus bench holds a variant to the generated kernel within 1e-4 of each value (at
least 1) on its own inputs (`benches/ceilings`' `inputs`, shared words `0.6 (w - 1.25)`).
This evaluates the network in f64 on the same inputs with every product of a weight and an
input or activation taken as

    hilo: w_hi x_hi + w_hi x_lo + w_lo x_hi   (hi = f16(v), lo = f16(v - hi))
    hi:   w_hi x_hi                           (the lo parts lost)

and prints the largest difference from the exact value as the bench measures it:

    python3 benches/networks/variants/tensor_cores/split_error.py 32   # or 64

Pure Python (struct's 'e' format is IEEE f16 with subnormals), a few seconds.
"""
import math
import struct
import sys

ELEMENTS = 200


def f16(x):
    return struct.unpack("e", struct.pack("e", x))[0]


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def inputs(n, words):
    """The corpus bench's inputs: a xorshift stream in [0.5, 2)."""
    s, mask, out = 0x2545F4914F6CDD1D, (1 << 64) - 1, []
    for _ in range(n * words):
        s ^= (s << 13) & mask
        s ^= s >> 7
        s ^= (s << 17) & mask
        out.append(f32(0.5 + 1.5 * ((s >> 40) / float(1 << 24))))
    return out


def main(h):
    words = 8 * h + h + h * h + h + h + 1
    shared = [f32(0.6 * (w - 1.25)) for w in inputs(1, words)]
    args = inputs(ELEMENTS, 9)
    o2 = 9 * h
    o3 = o2 + h * h + h

    def split(v, mode):
        hi = f16(v)
        return hi, (f16(v - hi) if mode == "hilo" else 0.0)

    def dot(ws, xs, mode):
        if mode == "exact":
            return sum(w * x for w, x in zip(ws, xs))
        acc = 0.0
        for w, x in zip(ws, xs):
            (wh, wl), (xh, xl) = split(w, mode), split(x, mode)
            acc += wh * xh + wh * xl + wl * xh
        return acc

    def value(e, mode):
        x, t = args[e * 9 : e * 9 + 8], args[e * 9 + 8]
        h1 = [math.tanh(dot(shared[j * 8 : j * 8 + 8], x, mode) + shared[8 * h + j]) for j in range(h)]
        h2 = [
            math.tanh(dot(shared[o2 + j * h : o2 + j * h + h], h1, mode) + shared[o2 + h * h + j])
            for j in range(h)
        ]
        y = shared[o3 + h] + sum(shared[o3 + k] * h2[k] for k in range(h))
        return (y - t) ** 2

    for mode in ["hilo", "hi"]:
        worst = 0.0
        for e in range(ELEMENTS):
            a, b = value(e, "exact"), value(e, mode)
            worst = max(worst, abs(a - b) / max(abs(a), 1.0))
        print(f"8-{h}-{h}-1, {mode}: {worst:.2e}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 32)
