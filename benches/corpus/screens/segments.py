#!/usr/bin/env python3
"""`shared_table_<T>`'s adjoint with its forward values recomputed a segment at a time, a
screen of the corpus's slowest kernel (BENCHMARKS.md, "shared_table_256's adjoint"):

    python3 segments.py <segment> dir/shared_table_256.adjoint.wgsl dir/shared_table_256.adjoint~seg16.wgsl

The generated kernel unrolls the table loop and keeps every `p` of its two elements for
the reverse pass (512 values alive beside the sums: spilled). This one keeps only each
segment's first `p` (a checkpoint), and before the reverse pass over a segment computes
the segment's `p` again from it (one FMA a trip), so that at most `segment` values of each
element are alive at once. The loop stays unrolled; the shared gradient goes through the
generated kernel's stream, word for word in the same order (255 down to 0). The function:

    s = sum_i table[i] * P_i,  P_0 = x,  P_{i+1} = P_i * y + 0.01 i,  value = tanh(s)
"""
import re
import sys


def trip_constant(i):
    """0.01 * i, an f32 literal."""
    return f"{i / 100:.2f}f"


def kernel(generated, t, segment, static=False, vec4=False, elements=2, distinct=False):
    head = generated[: generated.index("        let table_0 = ")]
    if vec4:
        head = vec4_stage(head)
    tail = generated[generated.index("        if (in_batch) {\n            values[i] = "):]
    e = ["", "_b", "_c", "_d"][:elements]
    if elements == 4:
        head = four_elements(head)
        tail = tail[: tail.index("        if (in_batch) {")] + "".join(
            element_stores(b, k) for k, b in enumerate(e)) + tail[tail.index("    }\n    // The last slots staged."):]
    out = [head.rstrip("\n")]
    for i in range(t):
        out.append(f"        let table_{i} = shared_args[{i // 4}u].{'xyzw'[i % 4]};")
    # A zero the driver cannot see is one (`per_thread` is far below 2^31): without it
    # the driver finds each recomputed value equal to the forward one and keeps that alive
    # instead, the generated kernel again (its SASS was the same, R252 and 335 spill stores).
    out.append("        let opaque_zero = bitcast<f32>(params.per_thread & 0x80000000u);")
    for b in e:
        out.append(f"        let seed{b} = select(0.0f, 1.0f, in_batch{b});")
    # Forward: the checkpoints P_{k * segment}, and s.
    for b in e:
        out.append(f"        var p{b} = x{b};")
        out.append(f"        var s{b} = 0.0f;")
    for i in range(t):
        for b in e:
            if i % segment == 0:
                out.append(f"        let cp_{i // segment}{b} = p{b};")
            out.append(f"        s{b} = s{b} + table_{i} * p{b};")
            out.append(f"        p{b} = y{b} * p{b} + {trip_constant(i)};")
    for b in e:
        out.append(f"        let value{b} = gf_tanh(s{b});")
        out.append(f"        let d_s{b} = seed{b} * (1.0f - value{b} * value{b});")
        out.append(f"        var d_p{b} = 0.0f;")
        out.append(f"        var d_y{b} = 0.0f;")
    # Reverse, a segment at a time: its P again from the checkpoint, then its trips.
    staged = 0
    for k in reversed(range(t // segment)):
        first = k * segment
        for b in e:
            out.append(f"        let q_{first}{b} = cp_{k}{b} + opaque_zero;")
            for i in range(first + 1, first + segment):
                out.append(f"        let q_{i}{b} = y{b} * q_{i - 1}{b} + {trip_constant(i - 1)};")
        for i in reversed(range(first, first + segment)):
            for b in e:
                out.append(f"        let d_table_{i}{b} = q_{i}{b} * d_s{b};")
                out.append(f"        d_y{b} = d_y{b} + q_{i}{b} * d_p{b};")
                out.append(f"        d_p{b} = table_{i} * d_s{b} + y{b} * d_p{b};")
            term = f"(d_table_{i} + d_table_{i}_b)"
            if elements == 4:
                term = f"({term} + (d_table_{i}_c + d_table_{i}_d))"
            if static:
                # The slot of each word written as a constant, and the stage summed after
                # every 32 (the tail's last call then finds nothing staged).
                slot = staged % 32
                out.append(f"        {stage_store(f'{slot}u', term, vec4)} stage_words[{slot}] = {i}u; // d/d table[{i}]")
                if slot == 31:
                    out.append("        gf_reduce_stage(lid, stage_words, 32u);")
            elif distinct:
                # Runs of 32 words, each one below the last: slot j of the run from word w
                # adds into word w - j, with no words array and no search for repeats.
                if staged % 32 == 0:
                    out.append(f"        if (stage_count > 0u) {{ gf_sum_run(lid, {(i + 32) % t}u); stage_count = 0u; }}")
                out.append(f"        {stage_store('stage_count', term, vec4)} stage_count++; // d/d table[{i}]")
            else:
                if staged % 32 == 0:
                    out.append("        if (stage_count > 0u) { gf_reduce_stage(lid, stage_words, stage_count); stage_count = 0u; }")
                out.append(f"        {stage_store('stage_count', term, vec4)} "
                           f"stage_words[stage_count] = {i}u; stage_count++; // d/d table[{i}]")
            staged += 1
    for b in e:
        out.append(f"        let d_x{b} = d_p{b};")
    body = "\n".join(out) + "\n"
    # The tail stores the generated kernel's names of the value.
    for b in e[: 2 if elements == 2 else 0]:
        name = re.search(rf"values\[i\] = (\w+{b});", tail).group(1)
        tail = tail.replace(f"values[i] = {name};", f"values[i] = value{b};")
    if distinct:
        tail = tail.replace("gf_reduce_stage(lid, stage_words, stage_count);", "gf_sum_run(lid, 31u);")
        body = body.replace("// Adds this workgroup's sums", SUM_RUN + "// Adds this workgroup's sums", 1)
    return body + tail


SUM_RUN = """// Adds this workgroup's sums of the stage's 32 slots to words first, first - 1, ..
fn gf_sum_run(lid: u32, first: u32) {
    gf_reduce_levels(lid);
    if (lid < 32u) {
        word_sums[first - lid] += gf_slot_sum(lid);
    }
    workgroupBarrier();
}

"""


def four_elements(head):
    """The generated head (two elements a thread, `i` and `i_b`) with four: `i_c`, `i_d`
    the same lane of the third and fourth runs."""
    head = head.replace("nth += 2u", "nth += 4u")
    more = []
    for k, b in ((2, "_c"), (3, "_d")):
        more += [
            f"        let i{b} = i + {256 * k}u;",
            f"        let in_batch{b} = nth + {k}u < per_thread && i{b} < params.n;",
            f"        let args{b}_0 = args[min(i{b}, params.n - 1u)];",
            f"        let x{b} = args{b}_0.x;",
            f"        let y{b} = args{b}_0.y;",
        ]
    at = head.index("        let y_b = args_b_0.y;\n") + len("        let y_b = args_b_0.y;\n")
    return head[:at] + "\n".join(more) + "\n" + head[at:]


def element_stores(b, k):
    """The value and gradient stores of element `b` (the `k`th of the thread's)."""
    return f"""        if (in_batch{b}) {{
            values[i{b}] = value{b};
            grads[i{b}] = vec2<f32>(d_x{b}, d_y{b});
        }}
"""


def stage_store(slot, term, vec4):
    """The store of this thread's `term` into stage slot `slot`."""
    if vec4:
        return f"reduce_stage[{slot} * 65u + lid / 4u][lid % 4u] = {term};"
    return f"reduce_stage[{slot} * 257u + lid] = {term};"


def vec4_stage(head):
    """The generated stage (32 slots of 257 words, read a word at a time) as 32 slots of
    260 words read as `vec4`s: a thread sums its 32 lanes of a slot in 8 loads, not 32. A
    warp's 8-lane phases of 16-byte loads fall in distinct banks (260 words = 1040 bytes,
    16 bytes past a multiple of 128)."""
    levels = head[head.index("fn gf_reduce_levels"): head.index("// Adds this workgroup's sums")]
    new_levels = """fn gf_reduce_levels(lid: u32) {
    workgroupBarrier();
    let k = lid % 32u;
    let s = lid / 32u;
    var acc = 0.0f;
    for (var j = 0u; j < 8u; j++) {
        let v = reduce_stage[k * 65u + s * 8u + j];
        acc += (v.x + v.y) + (v.z + v.w);
    }
    reduce_stage[k * 65u + s * 8u].x = acc;
    workgroupBarrier();
}

// Slot j's sum over the workgroup, from its 8 level sums.
fn gf_slot_sum(j: u32) -> f32 {
    let b = j * 65u;
    return ((reduce_stage[b].x + reduce_stage[b + 8u].x) + (reduce_stage[b + 16u].x + reduce_stage[b + 24u].x)) + ((reduce_stage[b + 32u].x + reduce_stage[b + 40u].x) + (reduce_stage[b + 48u].x + reduce_stage[b + 56u].x));
}

"""
    head = head.replace(levels, new_levels)
    return head.replace("var<workgroup> reduce_stage: array<f32, 8224>;",
                        "var<workgroup> reduce_stage: array<vec4<f32>, 2080>;")


if __name__ == "__main__":
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    segment, generated, dest = [a for a in sys.argv[1:] if not a.startswith("--")]
    with open(generated) as f:
        text = f.read()
    t = int(text.split("shared_table_")[1].split("(")[0])
    with open(dest, "w") as f:
        f.write(kernel(text, t, int(segment), "--static" in flags, "--vec4" in flags, 4 if "--four" in flags else 2,
                           "--distinct" in flags))
