"""Reads a `verify-bundle --json` report on stdin and exits non-zero unless the bundle's verdict is at least
EXPECTED (`verified` or `publishable`), and the report keeps its own promises: a check that passed was
recomputed (never merely read), an attested check says so, and something was recomputed at all. Exit 0 of
verify-bundle alone also means "not publishable"; CI holds every published bundle to the verdict
attestations/keys.tsv states for it.

Usage: scifact-audit verify-bundle ... --json | python3 scripts/assert-verdict.py EXPECTED BUNDLE
"""
import json
import sys

ORDER = ["failed", "not publishable", "publishable", "verified"]

expected = sys.argv[1]
bundle = sys.argv[2] if len(sys.argv) > 2 else "bundle"
if expected not in ORDER:
    sys.exit(f"unknown verdict {expected!r}; one of {ORDER}")
report = json.load(sys.stdin)
checks = report["checks"]
problems = []
if ORDER.index(report["verdict"]) < ORDER.index(expected):
    problems += [
        f"{c['status']}: {c['scope']} {c['name']}: {c['evidence']}"
        for c in checks
        if c["status"] not in ("pass", "attested")
    ]
    problems.insert(0, f"verdict {report['verdict']!r}, expected {expected!r}")
problems += [
    f"{c['scope']} {c['name']} passes without being recomputed ({c['basis']})"
    for c in checks
    if c["status"] == "pass" and c["basis"] != "recomputed"
]
problems += [
    f"{c['scope']} {c['name']} is attested with basis {c['basis']}"
    for c in checks
    if c["status"] == "attested" and c["basis"] != "attested"
]
recomputed = sum(c["status"] == "pass" for c in checks)
if recomputed == 0:
    problems.append("nothing was recomputed")
if problems:
    print(f"{bundle}: short of {expected}:", *problems, sep="\n  ", file=sys.stderr)
    sys.exit(1)
attested = sorted({c["name"] for c in checks if c["status"] == "attested"})
resting = sorted({c["name"] for c in checks if c["status"] == "not_checked"})
signature = next((c["evidence"] for c in checks if c["name"] == "signature"), "no signature check")
print(
    f"{bundle}: {report['verdict']} ({recomputed} checks recomputed and equal; attested: {', '.join(attested)}"
    + (f"; resting on the signer: {', '.join(resting)}" if resting else "")
    + f"); {signature.split(';')[0]}"
)
