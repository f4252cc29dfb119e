"""Reads a `verify-bundle --json` report on stdin and exits non-zero unless the bundle is publishable but for
the one check a bundle alone cannot settle: `executable.hash`, which needs a reproducible rebuild of the
recorded revision (`verify-bundle --executable`). Exit 0 of verify-bundle alone also means "not publishable";
CI uses this to hold every published bundle to the stronger verdict.

Usage: scifact-audit verify-bundle ... --json | python3 scripts/assert-publishable.py BUNDLE
"""
import json
import sys

bundle = sys.argv[1] if len(sys.argv) > 1 else "bundle"
report = json.load(sys.stdin)
problems = [
    f"{c['status']}: {c['scope']} {c['name']}: {c['evidence']}"
    for c in report["checks"]
    if c["status"] != "pass" and not (c["status"] == "not_checked" and c["name"] == "executable.hash")
]
passed = sum(c["status"] == "pass" for c in report["checks"])
signature = next((c["evidence"] for c in report["checks"] if c["name"] == "signature"), "no signature check")
if problems or passed == 0:
    print(f"{bundle}: not publishable beyond executable.hash:", *problems, sep="\n  ", file=sys.stderr)
    sys.exit(1)
print(f"{bundle}: publishable ({passed} checks pass; only executable.hash needs a rebuild); {signature}")
