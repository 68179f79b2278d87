#!/usr/bin/env bash
# Release and debug build time and rustc peak memory of a crate holding one network, for
# the networks of benches/code_size.rs (8-16-16-1 up to 16-128-128-4): what a user's build
# pays for `#[differentiable]` on it. Only the network crate's own rustc is measured (the
# dependencies are built first and shared); gradfuse is used without GPU support, which
# changes none of the generated code.
#
#   bash benches/build_scaling.sh [--quick]
#
# The table is in BENCHMARKS.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/target/build-scaling"
mkdir -p "$dir"
(cd "$root" && cargo bench -q --bench code_size -- --write-crates "$dir" ${1:+"$1"})
wrapper="$dir/time-rustc.sh"
cat > "$wrapper" <<'WRAP'
#!/usr/bin/env bash
# Runs rustc, timing and measuring it when it compiles a network crate.
case " $* " in
  *" --crate-name net_"*)
    exec /usr/bin/time -o "$BUILD_SCALING_LOG" -f "%e %M" "$@" ;;
  *) exec "$@" ;;
esac
WRAP
chmod +x "$wrapper"
echo "| network | profile | rustc time | rustc peak memory |"
echo "|---|---|---|---|"
for crate in "$dir"/net_*/; do
  name=$(basename "$crate")
  for profile in release dev; do
    log="$dir/$name.$profile.log"
    export RUSTC_WRAPPER="$wrapper" CARGO_TARGET_DIR="$dir/target" BUILD_SCALING_LOG="$log"
    # The dependencies first, untimed; then the network crate alone.
    (cd "$crate" && cargo build -q --profile "$profile" -p gradfuse)
    touch "$crate/src/lib.rs"
    rm -f "$log"
    (cd "$crate" && cargo build -q --profile "$profile")
    read -r secs kb < "$log"
    label=$(echo "$name" | sed -E 's/net_([0-9]+)_([0-9]+)_([0-9]+)/\1-\2-\2-\3/')
    echo "| $label | $profile | $secs s | $((kb / 1024)) MB |"
  done
done
