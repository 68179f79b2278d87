#!/bin/bash
# Issue 11: the cooperative network adjoints dividing a launch's chunks among the workgroups
# dispatched themselves (`ReductionSpec::divides_chunks`, 2026-12-07, third session), against
# whole runs a workgroup (the bench built before it); the 2^20 fixed cost by a sweep of sizes;
# and three kernel variants: `tanh` without its select at 9 (`tanh9`), its sign copied by bits
# (`tanhbits`), both (`tanh9bits`), and the prologue's W2 copy with its loads first
# (`loadsfirst`).
#
#   BEFORE=path/to/corpus_bench_before bash benches/networks/variants/divided.sh prepare   # here
#   bash benches/networks/variants/divided.sh device     # there, carrying [".gl", ".bench/div"]
#
# prepare builds the corpus and GPU benches at this commit into .bench/div, copies $BEFORE
# (a corpus bench built before the division, e.g. at 9d264cb) beside them, writes the
# variants into .bench/div/v from the generated kernels and checks them against those on
# lavapipe. device times them all, then `value_and_grad` through the runtime and JAX.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
V=benches/networks/variants
D=.bench/div
export GRADFUSE_CORPUS_KINDS=adjoint

prepare() {
    mkdir -p $D/v
    local corpus gpu
    corpus=$(cargo bench --bench corpus --no-run 2>&1 | grep -oE "target/release/deps/corpus-[0-9a-f]+" | head -1)
    gpu=$(cargo bench --bench gpu --no-run 2>&1 | grep -oE "target/release/deps/gpu-[0-9a-f]+" | head -1)
    cp "$corpus" $D/corpus && cp "$gpu" $D/gpu && cp "${BEFORE:?a corpus bench built before}" $D/corpus_before
    strip $D/corpus $D/gpu $D/corpus_before
    rm -rf /tmp/divided_gen && mkdir -p /tmp/divided_gen
    GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=/tmp/divided_gen GRADFUSE_CORPUS_EXTRA=$V/networks.rs \
        GRADFUSE_CORPUS_ONLY="net32 net64" $D/corpus --bench > /dev/null
    python3 $V/divided_variants.py /tmp/divided_gen $D/v
    # The check: the bench drops (and names on stderr) a variant that disagrees.
    GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_ONLY="net32 net64" GRADFUSE_CORPUS_VARIANTS=$D/v \
        GRADFUSE_CORPUS_SIZES="12" $D/corpus --bench > /dev/null 2> /tmp/divided_check.err
    if grep rejected /tmp/divided_check.err; then exit 1; fi
    ls $D $D/v
}

device() {
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GRADFUSE_REQUIRE_GPU=1
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
    for b in corpus_before corpus; do
        echo "== $b"
        GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_SIZES="14 16 20 24" timeout 100 $D/$b --bench \
            > "$OUT/net_$b.md" 2>&1 || echo "exit $?"
        grep -E "^device|^\| net" "$OUT/net_$b.md"
    done
    echo "== gpu --networks"
    GRADFUSE_NET_SIZES="20 24" timeout 150 $D/gpu --bench --networks > "$OUT/gpu_networks.md" 2>&1 || echo "exit $?"
    grep -E "8-32|8-64|ceiling" "$OUT/gpu_networks.md" | head -30
    echo "== variants"
    GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_ONLY="net32 net64" GRADFUSE_CORPUS_VARIANTS=$D/v \
        GRADFUSE_CORPUS_SIZES="14 20" timeout 100 $D/corpus --bench > "$OUT/variants.md" 2>&1 || echo "exit $?"
    grep -E "^\| net" "$OUT/variants.md"
    echo "== round 2"
    for b in corpus_before corpus; do
        GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_SIZES="20" timeout 60 $D/$b --bench \
            > "$OUT/net_${b}_2.md" 2>&1 || echo "exit $?"
        grep -E "^\| net" "$OUT/net_${b}_2.md"
    done
    echo "== jax"
    GRADFUSE_JAX_NETWORKS="8-32 8-64" timeout 150 python3 benches/networks/jax_networks.py > "$OUT/jax.md" 2>&1 || echo "exit $?"
    tail -12 "$OUT/jax.md"
}

"$@"
