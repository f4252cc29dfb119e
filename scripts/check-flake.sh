#!/usr/bin/env bash
# Offline checks of flake.nix, for machines that cannot fetch nixpkgs (see README, "Nix"):
#   1. nix-instantiate parses flake.nix and the stand-in;
#   2. `nix flake check --no-build` evaluates every output against nix/stand-in-nixpkgs, a local STAND-IN for
#      nixpkgs that only asserts structure (it is not nixpkgs and builds nothing);
#   3. the outputs `nix run . -- eval` depends on have the expected shape.
# What this does not exercise: fetching the pinned nixpkgs, compiling with its rustc 1.95, running checkPhase.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nix >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq nix-bin >/dev/null
fi
nix=(nix --extra-experimental-features nix-command --extra-experimental-features flakes)
stand_in=(--override-input nixpkgs path:./nix/stand-in-nixpkgs)

nix-instantiate --parse flake.nix >/dev/null
nix-instantiate --parse nix/stand-in-nixpkgs/flake.nix >/dev/null
echo "parsed flake.nix and the stand-in"

# A flake inside a git repository sees only the files git tracks (staged ones included).
if ! output=$("${nix[@]}" flake check --no-build "${stand_in[@]}" 2>&1); then
  echo "$output" >&2
  exit 1
fi
echo "nix flake check --no-build: every output evaluates against the stand-in"

eval_json() { "${nix[@]}" eval --json ".#$1" "${stand_in[@]}" 2>/dev/null; }
for system in x86_64-linux aarch64-linux; do
  program=$(eval_json "apps.$system.default.program")
  [[ $program == *"/bin/scifact-audit\"" ]] || { echo "apps.$system.default.program is $program" >&2; exit 1; }
  [[ $(eval_json "apps.$system.default.type") == '"app"' ]] || { echo "apps.$system.default.type is not app" >&2; exit 1; }
  for app in verify-bundle reproduce verify-reproduction; do
    program=$(eval_json "apps.$system.$app.program")
    [[ $program == *"/bin/scifact-audit-$app\"" ]] || { echo "apps.$system.$app.program is $program" >&2; exit 1; }
  done
  [[ $(eval_json "packages.$system.default.meta.mainProgram") == '"scifact-audit"' ]] || { echo "mainProgram" >&2; exit 1; }
  [[ $(eval_json "packages.$system.default.cargoBuildFlags") == '["-p","scifact-audit"]' ]] || { echo "cargoBuildFlags" >&2; exit 1; }
  eval_json "checks.$system.build.name" >/dev/null
  eval_json "devShells.$system.default.name" >/dev/null
done
grep -q '"rev": "331800de5053fcebacf6813adb5db9c9dca22a0c"' flake.lock
echo "apps, packages, checks and devShells have the expected shape for x86_64-linux and aarch64-linux"
