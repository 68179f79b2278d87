#!/bin/bash
# Issue 11: where, in bytes, the NVIDIA Vulkan driver stops holding two workgroups of the
# generated 8-32-32-1 adjoint a multiprocessor (BENCHMARKS.md, "Workgroups a
# multiprocessor": 22,288 bytes ran two, 26,640 and 29,968 one).
#
#   bash benches/networks/variants/limit.sh prepare   # here, after occupancy.sh prepare
#   bash benches/networks/variants/limit.sh device    # there, carrying [".gl", ".bench"]
#
# prepare writes the generated adjoint with one more workgroup array (pad.py) to totals
# of 23,040 to 26,112 bytes, each checked against the generated kernel on lavapipe;
# 23,552 is two workgroups of it and 1 KiB reserved each in 48 KiB. device times them at
# 2^20, then the 8-64-64-1 (one workgroup a multiprocessor) with its reducing launch at
# 132 workgroups, one wave of the H100 SXM's 132 multiprocessors, against the 512 landed
# (.bench/corpus_x: reduce_groups_switch.patch; its 8-64-64-1 is the generated kernel).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
V=benches/networks/variants
OUT_DIR=.bench/limit
export GRADFUSE_CORPUS_KINDS=adjoint GRADFUSE_CORPUS_EXTRA=$V/networks.rs

prepare() {
    rm -rf "$OUT_DIR" /tmp/limit_gen && mkdir -p "$OUT_DIR" /tmp/limit_gen
    GRADFUSE_CORPUS_ONLY=net32 GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=/tmp/limit_gen \
        .bench/corpus --bench > /dev/null
    local g32=/tmp/limit_gen/net32.adjoint.wgsl
    local base
    base=$(python3 - "$g32" <<'PY'
import re, sys
sizes = {"f32": 4, "vec4<f32>": 16}
text = open(sys.argv[1]).read()
print(sum(sizes[t] * int(n) for t, n in re.findall(r"var<workgroup> \w+: array<([^,]+), (\d+)>;", text)))
PY
)
    [ "$base" = 22288 ] || { echo "the generated kernel takes $base bytes, not 22288"; exit 1; }
    for total in 23040 23552 23568 24064 25088 26112; do
        python3 $V/pad.py $g32 "$OUT_DIR/net32.adjoint~total$total.wgsl" $((total - base))
    done
    rm -rf /tmp/limit_check && cp -r "$OUT_DIR" /tmp/limit_check
    GRADFUSE_CORPUS_ONLY=net32 GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=/tmp/limit_check \
        .bench/corpus --bench > /dev/null 2> /tmp/limit_check.err
    if grep rejected /tmp/limit_check.err; then exit 1; fi
    ls "$OUT_DIR"
}

device() {
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GRADFUSE_REQUIRE_GPU=1
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    GRADFUSE_CORPUS_ONLY=net32 GRADFUSE_CORPUS_VARIANTS=$OUT_DIR GRADFUSE_CORPUS_SIZES="20" timeout 200 \
        .bench/corpus --bench > "$OUT/limit.md" 2> "$OUT/limit.err" || echo "bench exit $?"
    grep -E "^\| net" "$OUT/limit.md" || tail -5 "$OUT/limit.err"
    for g in 512 132; do
        GRADFUSE_CORPUS_ONLY=net64 GRADFUSE_X_REDUCE_GROUPS=$g GRADFUSE_CORPUS_SIZES="20 24" timeout 100 \
            .bench/corpus_x --bench > "$OUT/net64_$g.md" 2> "$OUT/net64_$g.err" || echo "bench exit $?"
        grep -E "^\| net" "$OUT/net64_$g.md" || tail -5 "$OUT/net64_$g.err"
    done
}

"${1:?prepare or device}"
