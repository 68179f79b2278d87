#!/bin/bash
# Issue 11: where the 2^20 networks' fixed cost comes from, and the 8-64-64-1's chunk.
#
# The 8-64-64-1 adjoint (132 workgroups from 2^16 on) takes some 26 µs more than its chunks
# at 2^14 and 2^16, but 43 µs at 2^20 by the 2^24 chunk rate ("The division measured",
# BENCHMARKS.md): a fixed part that grows with the size, chunks slower at 2^20 than at 2^16
# (the clock), or the slowest workgroup's sum of chunk times. This times both networks'
# adjoints at every size from 2^14 to 2^24 with each corpus bench in $BENCHES (folders of
# .bench, alternated, two rounds), with the SM clock and the power logged every 50 ms, and
# keeps the driver's shader cache of each bench's 8-64-64-1 adjoint for benches/sass/sass.py.
#
#   bash benches/networks/variants/fixed_cost.sh prepare NAME    # here: the corpus bench at this checkout into .bench/NAME
#   BENCHES="t9 fold" bash benches/networks/variants/fixed_cost.sh device   # there, carrying [".gl", ".bench/t9", ".bench/fold"]
#   (ROUNDS=1 for one round; .bench/t9 is tanh_landed.sh's, built at c1a4061, before the
#   columns' indices were folded into one set of XORs, 2026-12-07's fourth session)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
V=benches/networks/variants

prepare() {
    mkdir -p ".bench/${1:?a name}"
    local corpus
    corpus=$(cargo bench --bench corpus --no-run 2>&1 | grep -oE "target/release/deps/corpus-[0-9a-f]+" | head -1)
    cp "$corpus" ".bench/$1/corpus" && strip ".bench/$1/corpus"
}

device() {
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GRADFUSE_REQUIRE_GPU=1
    export GRADFUSE_CORPUS_KINDS=adjoint GRADFUSE_CORPUS_EXTRA=$V/networks.rs
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu \
        --format=csv,noheader -lms 50 > "$OUT/clocks.csv" &
    local smi=$!
    for round in $(seq "${ROUNDS:-2}"); do
        for b in ${BENCHES:-t9}; do
            echo "== $b, round $round"
            date +%T.%N
            GRADFUSE_CORPUS_ONLY="net32 net64" GRADFUSE_CORPUS_SIZES="14 15 16 17 18 19 20 21 22 23 24" \
                timeout 200 ".bench/$b/corpus" --bench > "$OUT/sizes_${b}_$round.md" 2>&1 || echo "exit $?"
            grep -E "^\| net" "$OUT/sizes_${b}_$round.md"
        done
    done
    kill $smi
    # The clock while the kernels ran: the samples at full load.
    awk -F', ' '{print $2}' "$OUT/clocks.csv" | sort | uniq -c | sort -rn | head -5
    for b in ${BENCHES:-t9}; do
        mkdir -p "/tmp/glc_$b" "$OUT/glc_$b"
        __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH="/tmp/glc_$b" __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
            GRADFUSE_CORPUS_ONLY="net64" GRADFUSE_CORPUS_SIZES="14" timeout 60 ".bench/$b/corpus" --bench \
            > /dev/null 2>&1 || echo "exit $?"
        cp /tmp/glc_"$b"/GLCache/*/*/*.bin "$OUT/glc_$b/" || true
    done
}

"$@"
