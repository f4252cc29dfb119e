#!/usr/bin/env bash
# The GPU check (docs/performance.md, "On a GPU"): on a machine with an NVIDIA GPU, run from the repository root
# as `bash scripts/gpu-check.sh`, with the files scripts/gpu-prepare.sh put in .device/ (a release binary,
# scifact.zip, all-MiniLM-L6-v2's files but its weights). Makes the carried binary executable (a copy may lose
# its run bit), finds NVRTC (the toolkit's, or the one pip installed beside PyTorch), and runs
# scripts/gpu-check.py, which writes $OUT/gpu-check.json (and gpu-check.log) within one deadline. Exit 0 only when
# every step passed. Arguments go to gpu-check.py (`--steps kernels,parity` for a part; `--device emulated --quick`
# rehearses it without a GPU; `--deadline 500`).
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT="${OUT:-$PWD/gpu-check-out}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
bin=".device/scifact-audit"
for argument in "$@"; do
  case "$argument" in --bin=*) bin="${argument#--bin=}" ;; esac
done
previous=""
for argument in "$@"; do
  [ "$previous" = "--bin" ] && bin="$argument"
  previous="$argument"
done
if [ -f "$bin" ]; then
  chmod +x "$bin"
else
  echo "no binary at $bin: run scripts/gpu-prepare.sh here first and carry .device" >&2
fi
if [ -z "${SCIFACT_AUDIT_NVRTC:-}" ]; then
  SCIFACT_AUDIT_NVRTC="$(find /usr/local /opt /usr/lib /usr/lib64 -name 'libnvrtc.so.1[0-9]*' \
    -not -name '*builtins*' 2>/dev/null | sort | tail -n 1)"
  if [ -z "$SCIFACT_AUDIT_NVRTC" ]; then
    SCIFACT_AUDIT_NVRTC="$(python3 - <<'PY' 2>/dev/null
import glob, os, site
bases = site.getsitepackages() + [site.getusersitepackages()]
found = [f for base in bases for f in glob.glob(os.path.join(base, "nvidia", "**", "libnvrtc.so.*"), recursive=True)
         if "builtins" not in f]
print(sorted(found)[-1] if found else "")
PY
)"
  fi
  export SCIFACT_AUDIT_NVRTC
fi
echo "NVRTC: ${SCIFACT_AUDIT_NVRTC:-none found}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "libcuda: $(ldconfig -p 2>/dev/null | grep -m1 'libcuda.so.1' || ls /usr/local/nvidia/lib64/libcuda.so.1 2>/dev/null || echo 'not on the loader path')"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
exec python3 scripts/gpu-check.py "$@"
