# The H100 call of BENCHMARKS.md "Shared values hoisted in adjoints" (2026-12-06): the bench of
# 4000bfe as .bench/corpus_base, the variants of hoisted_adjoints.patch (GRADFUSE_X_HOIST_ADJ=1,2,3,
# written with GRADFUSE_CORPUS_WRITE_ONLY=1) as .bench/hv/<set>/<fn>.adjoint~m<mode>.wgsl.
# Run on the device from the repository root, carrying [".gl", ".bench"].
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json GRADFUSE_REQUIRE_GPU=1 GRADFUSE_CORPUS_KINDS=adjoint
B=.bench/corpus_base
GRADFUSE_CORPUS_ONLY=shared_softmax GRADFUSE_CORPUS_VARIANTS=.bench/hv/corpus GRADFUSE_CORPUS_SIZES="24" GRADFUSE_BENCH_OUT=$OUT/corpus.md timeout 150 $B --bench > $OUT/corpus.log 2>&1
GRADFUSE_CORPUS_EXTRA=benches/corpus/unseen/functions.rs GRADFUSE_CORPUS_ONLY=soft_gates GRADFUSE_CORPUS_VARIANTS=.bench/hv/unseen GRADFUSE_CORPUS_SIZES="22" GRADFUSE_BENCH_OUT=$OUT/unseen.md timeout 100 $B --bench > $OUT/unseen.log 2>&1
GRADFUSE_CORPUS_EXTRA=benches/corpus/screens/elements_shared_only.rs GRADFUSE_CORPUS_ONLY="camera_residual mixture_6 soft_choice_8 unit_weights" GRADFUSE_CORPUS_VARIANTS=.bench/hv/shared_only GRADFUSE_CORPUS_SIZES="24" GRADFUSE_BENCH_OUT=$OUT/shared_only.md timeout 120 $B --bench > $OUT/shared_only.log 2>&1
GRADFUSE_CORPUS_EXTRA=benches/corpus/screens/elements_alive.rs GRADFUSE_CORPUS_ONLY=rotations_6 GRADFUSE_CORPUS_VARIANTS=.bench/hv/alive GRADFUSE_CORPUS_SIZES="24" GRADFUSE_BENCH_OUT=$OUT/alive.md timeout 60 $B --bench > $OUT/alive.log 2>&1
GRADFUSE_CORPUS_EXTRA=benches/corpus/screens/elements_heavy.rs GRADFUSE_CORPUS_ONLY=soft_gate16 GRADFUSE_CORPUS_VARIANTS=.bench/hv/heavy GRADFUSE_CORPUS_SIZES="24" GRADFUSE_BENCH_OUT=$OUT/heavy.md timeout 60 $B --bench > $OUT/heavy.log 2>&1
grep -h "adjoint" $OUT/*.log | grep "^|" 
