"""Variants of the generated network adjoints (issue 11, 2026-12-07 second session).
python3 xform.py KIND in.wgsl out.wgsl, KIND a comma list of:
  ysum  the output rows' parts summed by every thread, a part of the rows each, then the
        quarters (halves at 32 rows) by the element's thread: one barrier more, a chain of
        8 adds instead of 32 (16)
  cx    (cw + c) ^ m read as (cw ^ (m & 6)) + (c ^ (m & 1)) from four lets (cw even)
"""
import re, sys

kinds, src, dst = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
s = open(src).read()

if "cx" in kinds:
    def rep(m):
        c, k = int(m.group(1)), int(m.group(2))
        return f"(cx{k >> 1} + {c ^ (k & 1)}u)"
    s, n = re.subn(r"\(\(cw \+ ([01])u\) \^ ([0-7])u\)", rep, s)
    assert n > 0
    s = s.replace("    let cw = cg * 2u;\n",
                  "    let cw = cg * 2u;\n    let cx0 = cw;\n    let cx1 = cw ^ 2u;\n    let cx2 = cw ^ 4u;\n    let cx3 = cw ^ 6u;\n", 1)

if "ysum" in kinds:
    m = re.search(r"        if \(lid < 64u\) \{\n            let e = lid;\n            var y = sw\((\d+)u\);\n"
                  r"            for \(var r = 0u; r < (\d+)u; r\+\+\) \{\n"
                  r"                y \+= ds2s\[r \* (\d+)u \+ \(\(e / 4u\) \^ \(r % 8u\)\)\]\[e % 4u\];\n"
                  r"            \}\n", s)
    padded = False
    if not m:
        m = re.search(r"        if \(lid < 64u\) \{\n            let e = lid;\n            var y = sw\((\d+)u\);\n"
                      r"            for \(var r = 0u; r < (\d+)u; r\+\+\) \{\n"
                      r"                y \+= ds2s\[r \* (\d+)u \+ \(e / 4u\)\]\[e % 4u\];\n"
                      r"            \}\n", s)
        padded = True
    assert m, "no output sum"
    bias, parts, stride = int(m.group(1)), int(m.group(2)), int(m.group(3))
    threads = int(re.search(r"@workgroup_size\((\d+)\)", s).group(1))
    pieces = threads // 64          # each thread sums parts / pieces rows for element lid % 64
    per = parts // pieces
    # the pieces' sums go to rows past the d_y row (row 32 at 64 rows: vec4 index 32 * stride)
    dy_row = int(re.search(r"ds2s\[(\d+)u \+ e / 4u\]\[e % 4u\] = dy;", s).group(1))
    # rows past the parts' where they end before the d_y row (32 rows), else past d_y's
    scratch = parts * stride if parts * stride + 32 <= dy_row else dy_row + 2 * stride
    body = []
    body.append("        {\n            let e = lid % 64u;\n            let q = lid / 64u;\n")
    body.append(f"            let rb = q * {per * stride}u;\n")
    terms = []
    for i in range(per):
        cell = f"(e / 4u)" if padded else f"((e / 4u) ^ {i % 8}u)"
        terms.append(f"ds2s[rb + {i * stride}u + {cell}][e % 4u]")
    body.append("            var p = " + terms[0] + ";\n")
    for t in terms[1:]:
        body.append(f"            p += {t};\n")
    body.append(f"            ds2s[{scratch}u + q * 16u + e / 4u][e % 4u] = p;\n        }}\n        workgroupBarrier();\n")
    qs = [f"ds2s[{scratch}u + {16 * q}u + e / 4u][e % 4u]" for q in range(pieces)]
    if pieces == 4:
        tot = f"({qs[0]} + {qs[1]}) + ({qs[2]} + {qs[3]})"
    else:
        tot = f"{qs[0]} + {qs[1]}"
    new = ("".join(body) + "        if (lid < 64u) {\n            let e = lid;\n"
           f"            var y = sw({bias}u);\n            y += {tot};\n")
    assert per * pieces == parts and 16 * pieces <= 64
    s = s[:m.start()] + new + s[m.end():]

open(dst, "w").write(s)
