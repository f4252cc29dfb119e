#!/usr/bin/env python3
"""sentence-transformers' own vectors for the project's parity checkpoints (fixtures/checkpoints/*/), the oracle
the embedding crate's checkpoint tests hold this project's forward pass to.

For every checkpoint directory and every text of fixtures/checkpoints/texts.json, encodes the text as a query and
as a document with `SentenceTransformer(dir).encode(texts, prompt_name=...)`: the `query` prompt for queries; for
documents `document`, else `passage`, else `corpus`, else none, as the checkpoint's config_sentence_transformers.json
declares them (the names the project reads). Writes
fixtures/checkpoints/reference.json, or with --check recomputes it and fails when any component differs from the
committed one by more than 1e-6.

Needs torch and sentence-transformers (bench/embed-vs-torch.py's header says how to install them in
~/.cache/embed-peer). Run: ~/.cache/embed-peer/bin/python scripts/st-reference.py [--check]
"""
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import sentence_transformers  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

root = Path(__file__).resolve().parent.parent / "fixtures" / "checkpoints"


def prompt_for(directory, role):
    # The prompts the checkpoint's file declares (sentence-transformers 6 adds empty `query` and `document`
    # prompts of its own, which would hide a `passage` one).
    declared = json.loads((directory / "config_sentence_transformers.json").read_text()).get("prompts") or {}
    names = ["query"] if role == "query" else ["document", "passage", "corpus"]
    return next((name for name in names if name in declared), None)


def compute():
    texts = json.loads((root / "texts.json").read_text())["texts"]
    torch.set_num_threads(1)
    checkpoints = {}
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        model = SentenceTransformer(str(directory), device="cpu")
        vectors = {}
        for role in ("query", "document"):
            name = prompt_for(directory, role)
            encoded = model.encode(texts, prompt_name=name, convert_to_numpy=True, batch_size=4)
            vectors[role] = {"prompt_name": name, "vectors": [[float(x) for x in row] for row in encoded]}
        checkpoints[directory.name] = vectors
    return {
        "made_by": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
        "texts": texts,
        "checkpoints": checkpoints,
    }


def main():
    fresh = compute()
    path = root / "reference.json"
    if "--check" not in sys.argv:
        path.write_text(json.dumps(fresh, indent=1) + "\n")
        print(f"wrote {path} ({fresh['made_by']})")
        return
    committed = json.loads(path.read_text())
    worst = 0.0
    for name, roles in fresh["checkpoints"].items():
        for role, entry in roles.items():
            held = committed["checkpoints"][name][role]
            if held["prompt_name"] != entry["prompt_name"]:
                sys.exit(f"{name} {role}: prompt {entry['prompt_name']!r}, the reference says {held['prompt_name']!r}")
            for a, b in zip(entry["vectors"], held["vectors"], strict=True):
                worst = max(worst, max(abs(x - y) for x, y in zip(a, b, strict=True)))
    print(f"sentence-transformers ({fresh['made_by']}) against the committed reference "
          f"({committed['made_by']}): largest difference {worst:.2e}")
    if worst > 1e-6:
        sys.exit("the committed reference is not what sentence-transformers gives")


if __name__ == "__main__":
    main()
