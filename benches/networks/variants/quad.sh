#!/bin/bash
# Issue 11: the networks' adjoints with four consecutive rows a lane (`quad`), the loss's
# target loaded a chunk ahead (`tpre`, `quad_tpre`) and the inputs and the target two
# chunks ahead (`ahead2`), against the generated kernels, in one call (quad_rows.py says
# what each is and why). Fifteen kernels at 2^20 and 2^24, two rounds: some 4-6 minutes.
#
#   bash benches/networks/variants/quad.sh prepare   # here: the corpus bench into .bench/cur, the variants into .bench/quadv
#   bash benches/networks/variants/quad.sh device    # there, carrying [".gl", ".bench/cur", ".bench/quadv"]
#   python3 benches/sass/sass.py $OUT/glc_quad.bin /tmp/sass/quad   # here, after: registers and loops
#
# prepare writes the generated kernels with GRADFUSE_CORPUS_WRITE_ONLY and checks every
# variant against them on lavapipe (a variant that disagrees is printed, and refused again
# on the device before it is timed).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
V=benches/networks/variants
export GRADFUSE_CORPUS_KINDS=adjoint GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_ONLY="net32 net64"

prepare() {
    bash $V/fixed_cost.sh prepare cur
    rm -rf .bench/gen .bench/quadv && mkdir -p .bench/gen .bench/quadv
    GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=.bench/gen .bench/cur/corpus --bench > /dev/null
    python3 $V/quad_rows.py .bench/gen .bench/quadv
    GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=.bench/quadv .bench/cur/corpus --bench 2>&1 \
        | grep -iE "disagree|rejected" || echo "every variant agrees with the generated kernel"
    rm -f .bench/quadv/net32.adjoint.wgsl .bench/quadv/net64.adjoint.wgsl
}

device() {
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GRADFUSE_REQUIRE_GPU=1
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    for round in 1 2; do
        echo "== round $round"
        GRADFUSE_CORPUS_VARIANTS=.bench/quadv GRADFUSE_CORPUS_SIZES="20 24" \
            timeout 240 .bench/cur/corpus --bench > "$OUT/quad_$round.md" 2>&1 || echo "exit $?"
        grep -E "^\| net|disagree|rejected" "$OUT/quad_$round.md"
    done
    # The driver's SASS of every kernel timed (one file: a call returns only so many).
    mkdir -p /tmp/glc
    __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/glc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
        GRADFUSE_CORPUS_VARIANTS=.bench/quadv GRADFUSE_CORPUS_SIZES="14" timeout 60 .bench/cur/corpus --bench \
        > /dev/null 2>&1 || echo "exit $?"
    cat /tmp/glc/GLCache/*/*/*.bin > "$OUT/glc_quad.bin"
}

"$@"
