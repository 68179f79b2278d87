#!/usr/bin/env bash
# The device call of the tensor-core screen (BENCHMARKS.md, "Tensor-core adjoints"), each
# variant in a process of its own with a short GPU timeout, so that one that hangs the
# device (as every kernel past the driver's 48 KiB of workgroup memory did) costs seconds
# and loses no other's numbers. Run on the device from the repository root, carrying
# [".gl", ".bench"]:
#   .bench/corpus_x             the corpus bench built with runtime_switch.patch applied
#   .bench/cooperative_matrices cargo build --release -p gradfuse-runtime --example cooperative_matrices
#   .bench/cv/                  value.py's and adjoint.py's kernels, e.g. net64.forward~coop.wgsl
# (or the folder given as $1; SCREEN_SIZES=12 SCREEN_TIMEOUT_MS=600000 SCREEN_PROCESS_S=600 for a
# run here on lavapipe, of the emulated kernels).
if [ -d .gl ]; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    nvidia-smi --query-gpu=name,driver_version --format=csv
fi
export GRADFUSE_REQUIRE_GPU=1
timeout 60 .bench/cooperative_matrices --check
export GRADFUSE_CORPUS_EXTRA=benches/networks/variants/networks.rs GRADFUSE_X_COOP=1 GRADFUSE_X_TIMEOUT_MS=${SCREEN_TIMEOUT_MS:-5000}
logs=$(mktemp -d)
# Variants only (a name with ~): the bench writes the generated kernels beside them.
for file in "${1:-.bench/cv}"/*~*.wgsl; do
    name=$(basename "$file" .wgsl)   # net64.adjoint~coop
    net=${name%%.*}
    kind=${name#*.}
    kind=${kind%%~*}
    dir=$(mktemp -d)
    cp "$file" "$dir/"
    for round in 1 2 3; do
        echo "== $name round $round"
        GRADFUSE_CORPUS_ONLY="$net" GRADFUSE_CORPUS_KINDS="$kind" GRADFUSE_CORPUS_VARIANTS="$dir" \
            GRADFUSE_CORPUS_SIZES="${SCREEN_SIZES:-20 24}" timeout ${SCREEN_PROCESS_S:-120} .bench/corpus_x --bench > "$logs/$name.$round.log" 2>&1
        grep -a "^| $net\|rejected\|did not finish\|lost" "$logs/$name.$round.log" | cut -c1-200
        # A variant refused or lost is not timed again.
        grep -aq "rejected\|did not finish\|lost" "$logs/$name.$round.log" && break
    done
done
# Every log in one file (a device call brings back at most 8).
tail -n +1 "$logs"/*.log > "${OUT:-/tmp}/screen.log"
