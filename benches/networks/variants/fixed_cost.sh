#!/bin/bash
# Issue 11: where the 2^20 networks' fixed cost comes from. The 8-64-64-1 adjoint (132
# workgroups from 2^16 on) takes some 26 µs more than its chunks at 2^14 and 2^16, but 45 µs
# at 2^20 and 2^24 by the 2^24 chunk rate ("The division measured", BENCHMARKS.md): either
# a fixed part that grows with the size, or chunks slower at 2^20 than at 2^24. This times
# both networks' adjoints at every size from 2^14 to 2^24, twice, with the SM clock and
# the power logged every 50 ms, so that a chunk's time can be read off each pair of sizes
# and set beside the clock the launch ran at.
#
#   bash benches/networks/variants/tanh_landed.sh prepare      # here: the benches into .bench/t9
#   bash benches/networks/variants/fixed_cost.sh device        # there, carrying [".gl", ".bench/t9"]
#   (ROUNDS=1 for one round)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
V=benches/networks/variants

device() {
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GRADFUSE_REQUIRE_GPU=1
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu \
        --format=csv,noheader -lms 50 > "$OUT/clocks.csv" &
    local smi=$!
    for round in $(seq "${ROUNDS:-2}"); do
        echo "== round $round"
        date +%T.%N
        GRADFUSE_CORPUS_KINDS=adjoint GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_ONLY="net32 net64" \
            GRADFUSE_CORPUS_SIZES="14 15 16 17 18 19 20 21 22 23 24" timeout 200 .bench/t9/corpus --bench \
            > "$OUT/sizes_$round.md" 2>&1 || echo "exit $?"
        grep -E "^\| net" "$OUT/sizes_$round.md"
    done
    kill $smi
    # The clock while the kernels ran: the samples at full load.
    awk -F', ' '{print $2}' "$OUT/clocks.csv" | sort | uniq -c | sort -rn | head -5
}

"$@"
