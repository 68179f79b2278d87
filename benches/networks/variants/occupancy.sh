#!/bin/bash
# Issue 11: does the NVIDIA Vulkan driver hold fewer network workgroups a multiprocessor
# past 32 KiB of workgroup memory, and do the networks' adjoints gain from W2 read from
# storage instead (BENCHMARKS.md, "Four rows a lane" and the section after it)?
# Measured on the H100 on 2026-12-07 (BENCHMARKS.md, "Workgroups a multiprocessor: 48 KiB
# in all"): the limit is 48 KiB a multiprocessor, not 32 or 64, and no variant won.
#
#   bash benches/networks/variants/occupancy.sh prepare   # here: bench, variants, lavapipe check
#   bash benches/networks/variants/occupancy.sh device    # there, carrying [".gl", ".bench"]
#
# prepare builds the corpus bench into .bench/corpus, writes the generated adjoints of
# networks.rs's net32 and net64 (GRADFUSE_CORPUS_WRITE_ONLY), their variants into
# .bench/occupancy (pad.py, weights_global.py, w1_workgroup.py, x_buffers.py,
# wide_tile.py --gen --tanh=cut), checks every
# variant against the generated kernel on lavapipe, builds the bench again with
# w1_workgroup.patch, x_buffers.patch, w2_storage.patch and reduce_groups_switch.patch
# applied (.bench/corpus_x: the generator reading W1 from workgroup memory, the inputs in
# buffers of their own, W2 from storage, the reducing launches' workgroups from
# GRADFUSE_X_REDUCE_GROUPS), and fetches the Vulkan loader into .gl
# (/work/.library/device/README.md) when it is missing. device times them all, then the
# patched bench's 8-32-32-1 with 396 workgroups (three a multiprocessor of 132).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
V=benches/networks/variants
OUT_DIR=.bench/occupancy
export GRADFUSE_CORPUS_KINDS=adjoint GRADFUSE_CORPUS_EXTRA=$V/networks.rs GRADFUSE_CORPUS_ONLY="net32 net64"

prepare() {
    mkdir -p .bench
    bin=$(cargo bench --bench corpus --no-run 2>&1 | grep -oE "target/release/deps/corpus-[0-9a-f]+" | head -1)
    cp "$bin" .bench/corpus && strip .bench/corpus
    rm -rf "$OUT_DIR" /tmp/occupancy_gen && mkdir -p "$OUT_DIR" /tmp/occupancy_gen
    GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=/tmp/occupancy_gen .bench/corpus --bench > /dev/null
    local g32=/tmp/occupancy_gen/net32.adjoint.wgsl
    # More workgroup memory and nothing else: 22 KiB -> 30 and 33.
    python3 $V/pad.py $g32 "$OUT_DIR/net32.adjoint~pad30k.wgsl" 7680
    python3 $V/pad.py $g32 "$OUT_DIR/net32.adjoint~pad33k.wgsl" 11008
    python3 $V/wide_tile.py $g32 "$OUT_DIR/net32.adjoint~cut-unchecked.wgsl" --gen --tanh=cut
    for n in 32 64; do
        g=/tmp/occupancy_gen/net$n.adjoint.wgsl
        python3 $V/weights_global.py $g "$OUT_DIR/net$n.adjoint~w2g.wgsl"
    done
    # W1 from workgroup memory: 16 registers a thread fewer, maybe three workgroups.
    python3 $V/w1_workgroup.py $g32 "$OUT_DIR/net32.adjoint~w1ws.wgsl"
    python3 $V/w1_workgroup.py $g32 "$OUT_DIR/net32.adjoint~w1ws_cut-unchecked.wgsl" --tanh=cut
    # The chunk's inputs in two buffers of their own: five barriers a chunk, not eight.
    python3 $V/x_buffers.py $g32 "$OUT_DIR/net32.adjoint~xbuf.wgsl"
    python3 $V/w1_workgroup.py "$OUT_DIR/net32.adjoint~xbuf.wgsl" "$OUT_DIR/net32.adjoint~w1ws_xbuf.wgsl"
    # Both, and W2 from storage: 18.4 KiB (22.6 with the inputs' buffers) and W1's registers
    # gone, so three workgroups fit even a 64 KiB carve-out of 1 KiB reserved a workgroup.
    for w in w1ws w1ws_xbuf; do
        python3 $V/weights_global.py "$OUT_DIR/net32.adjoint~$w.wgsl" "$OUT_DIR/net32.adjoint~${w}_w2g.wgsl"
    done
    # The check: every variant (but the -unchecked) against the generated kernel.
    rm -rf /tmp/occupancy_check && cp -r "$OUT_DIR" /tmp/occupancy_check
    # (The bench reports a variant that disagrees on stderr and drops it.)
    GRADFUSE_CORPUS_WRITE_ONLY=1 GRADFUSE_CORPUS_VARIANTS=/tmp/occupancy_check .bench/corpus --bench \
        > /dev/null 2> /tmp/occupancy_check.err
    if grep rejected /tmp/occupancy_check.err; then exit 1; fi
    # The generator with all three (its 8-32-32-1 is w1ws_xbuf_w2g), for a run at 396
    # workgroups: a whole wave, if three fit a multiprocessor.
    local patches="$V/w1_workgroup.patch $V/x_buffers.patch $V/w2_storage.patch $V/reduce_groups_switch.patch"
    git apply $patches
    bin=$(cargo bench --bench corpus --no-run 2>&1 | grep -oE "target/release/deps/corpus-[0-9a-f]+" | head -1) || true
    # Undone last first: each patch is stacked on the one before.
    for p in $(echo $patches | tr ' ' '\n' | tac); do git apply -R "$p"; done
    cp "$bin" .bench/corpus_x && strip .bench/corpus_x
    if [ ! -d .gl ]; then
        mkdir -p .gl /tmp/amd64/partial
        local o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
        apt-get $o update > /dev/null
        (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    fi
    ls "$OUT_DIR"
}

device() {
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GRADFUSE_REQUIRE_GPU=1
    export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/glc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
    mkdir -p /tmp/glc "$OUT/glc"
    nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
    # OCCUPANCY_TRIM=1 (a short budget): the tanh cuts (measured before) and the patched
    # bench's 396 workgroups left out.
    local variants=$OUT_DIR
    if [ -n "${OCCUPANCY_TRIM:-}" ]; then
        variants=/tmp/occupancy_trimmed
        rm -rf $variants && cp -r "$OUT_DIR" $variants && rm -f $variants/*cut*
    fi
    GRADFUSE_CORPUS_VARIANTS=$variants GRADFUSE_CORPUS_SIZES="20 24" timeout 300 .bench/corpus --bench \
        > "$OUT/occupancy.md" 2> "$OUT/occupancy.err" || echo "bench exit $?"
    grep -E "^\| net" "$OUT/occupancy.md" || tail -5 "$OUT/occupancy.err"
    find /tmp/glc -name "*.bin" -exec cp {} "$OUT/glc/" \;
    if [ -n "${OCCUPANCY_TRIM:-}" ]; then return; fi
    GRADFUSE_CORPUS_ONLY=net32 GRADFUSE_X_REDUCE_GROUPS=396 GRADFUSE_CORPUS_SIZES="20 24" timeout 100 \
        .bench/corpus_x --bench > "$OUT/patched_396.md" 2> "$OUT/patched_396.err" || echo "bench exit $?"
    grep -E "^\| net" "$OUT/patched_396.md" || tail -5 "$OUT/patched_396.err"
    find /tmp/glc -name "*.bin" -exec cp {} "$OUT/glc/" \;
}

"${1:?prepare or device}"
