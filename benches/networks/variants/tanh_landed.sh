#!/bin/bash
# Issue 11: `tanh` without its select at 9 as landed (c1a4061), against the bench before it
# (the chunk division, 3d82550, in .bench/div from divided.sh), in one call: the networks'
# adjoints at 2^20 and 2^24, every corpus function that calls `tanh` in every kind at 2^20,
# `value_and_grad` through the runtime, and the driver's SASS of the 8-32-32-1 adjoint
# (its shader cache, for benches/sass/sass.py here).
#
#   bash benches/networks/variants/tanh_landed.sh prepare   # here: the benches into .bench/t9
#   bash benches/networks/variants/tanh_landed.sh device    # there, carrying [".gl", ".bench/div", ".bench/t9"]
#   python3 benches/sass/sass.py <a .bin of $OUT/glc> /tmp/sass/net32   # here, after
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
V=benches/networks/variants

prepare() {
    mkdir -p .bench/t9
    local corpus gpu
    corpus=$(cargo bench --bench corpus --no-run 2>&1 | grep -oE "target/release/deps/corpus-[0-9a-f]+" | head -1)
    gpu=$(cargo bench --bench gpu --no-run 2>&1 | grep -oE "target/release/deps/gpu-[0-9a-f]+" | head -1)
    cp "$corpus" .bench/t9/corpus && cp "$gpu" .bench/t9/gpu && strip .bench/t9/corpus .bench/t9/gpu
}

device() {
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GRADFUSE_REQUIRE_GPU=1
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
    for round in 1 2; do
        for b in div t9; do
            echo "== networks, $b, round $round"
            GRADFUSE_CORPUS_KINDS=adjoint GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_ONLY="net32 net64" \
                GRADFUSE_CORPUS_SIZES="20 24" timeout 60 .bench/$b/corpus --bench > "$OUT/net_${b}_$round.md" 2>&1 || echo "exit $?"
            grep -E "^\| net" "$OUT/net_${b}_$round.md"
        done
    done
    for b in div t9; do
        echo "== tanh's callers, $b"
        GRADFUSE_CORPUS_ONLY="array_ transcendental" GRADFUSE_CORPUS_SIZES="20" \
            timeout 100 .bench/$b/corpus --bench > "$OUT/callers_$b.md" 2>&1 || echo "exit $?"
        grep -E "^\| (array_|transcendental)" "$OUT/callers_$b.md"
    done
    echo "== gpu --networks"
    GRADFUSE_NET_SIZES="20 24" timeout 150 .bench/t9/gpu --bench --networks > "$OUT/gpu_networks.md" 2>&1 || echo "exit $?"
    grep -E "8-32|8-64|ceiling" "$OUT/gpu_networks.md" | grep -v "per thread" | head -20
    echo "== the SASS"
    mkdir -p /tmp/glc "$OUT/glc"
    __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/glc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
        GRADFUSE_CORPUS_KINDS=adjoint GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_ONLY="net32" \
        GRADFUSE_CORPUS_SIZES="14" timeout 60 .bench/t9/corpus --bench > /dev/null 2>&1 || echo "exit $?"
    cp /tmp/glc/GLCache/*/*/*.bin "$OUT/glc/" && ls -la "$OUT/glc"
}

"$@"
