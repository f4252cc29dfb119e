#!/usr/bin/env bash
# Builds the release binary twice, from two clones of HEAD in two different directories, each with its own
# empty target directory, and requires the two executables to have the same sha256. Paths are remapped
# (--remap-path-prefix, -ffile-prefix-map), SOURCE_DATE_EPOCH is the commit time, dependencies are --locked.
# Takes about twice a clean release build (~20 min here), so CI does not run it; run it by hand:
#   scripts/reproducible-build.sh [WORK_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
revision="$(git -C "$root" rev-parse HEAD)"
export SOURCE_DATE_EPOCH="$(git -C "$root" log -1 --format=%ct)"
export CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"

declare -a hashes
for side in first second-build-elsewhere; do
  src="$work/$side/src/scifact-audit"
  target="$work/$side/target"
  rm -rf "$work/$side"
  git clone -q "$root" "$src"
  git -C "$src" checkout -q "$revision"
  (
    cd "$src"
    export CARGO_TARGET_DIR="$target"
    export RUSTFLAGS="--remap-path-prefix=$src=/build/scifact-audit --remap-path-prefix=$target=/build/target --remap-path-prefix=$CARGO_HOME=/cargo"
    prefix_map="-ffile-prefix-map=$src=/build/scifact-audit -ffile-prefix-map=$target=/build/target -ffile-prefix-map=$CARGO_HOME=/cargo"
    export CFLAGS="$prefix_map" CXXFLAGS="$prefix_map"
    cargo build --release --locked -p scifact-audit
  ) >"$work/$side.log" 2>&1 || { echo "build in $src failed; see $work/$side.log" >&2; exit 1; }
  hash="$(sha256sum "$target/release/scifact-audit" | cut -d' ' -f1)"
  echo "$side: $hash ($src)"
  hashes+=("$hash")
done

if [ "${hashes[0]}" != "${hashes[1]}" ]; then
  echo "NOT reproducible: the two builds of $revision differ" >&2
  exit 1
fi
echo "reproducible: both builds of $revision are sha256 ${hashes[0]}"
