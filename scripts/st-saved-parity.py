#!/usr/bin/env python3
"""Checkpoints as the installed sentence-transformers saves them, run by this project and by sentence-transformers.

For every parity checkpoint (fixtures/checkpoints/*/), loads it with `SentenceTransformer`, saves it again with
`model.save(dir)` (so the files are the installed version's: its modules.json spellings, its configs), then embeds
fixtures/checkpoints/texts.json as queries and as documents on both sides: sentence-transformers with
`encode(texts, prompt_name=...)` (the `query` prompt for queries; `document`, else `passage`, else `corpus`, else
`default_prompt_name`'s, for documents: the names the project reads), and `scifact-audit embed --model-dir DIR
--role ROLE --text-policy model`. Fails when a component differs by more than 1e-5, or when the project refuses a
checkpoint sentence-transformers saved.

Needs torch and sentence-transformers (bench/embed-vs-torch.py's header says how to install them in
~/.cache/embed-peer). Run: ~/.cache/embed-peer/bin/python scripts/st-saved-parity.py --bin PATH/scifact-audit
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import sentence_transformers  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

root = Path(__file__).resolve().parent.parent / "fixtures" / "checkpoints"


def prompt_name(model, role):
    prompts = model.prompts or {}
    names = ["query"] if role == "query" else ["document", "passage", "corpus"]
    for name in names:
        if name in prompts:
            return name
    return model.default_prompt_name


def ours(binary, directory, role, texts):
    lines = "".join(json.dumps(text) + "\n" for text in texts)
    done = subprocess.run(
        [binary, "embed", "--model-dir", str(directory), "--role", role, "--text-policy", "model"],
        input=lines.encode(),
        capture_output=True,
    )
    if done.returncode != 0:
        sys.exit(f"{directory} ({role}): scifact-audit embed refused it:\n{done.stderr.decode()}")
    return [json.loads(line)["vector"] for line in done.stdout.decode().splitlines()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="the scifact-audit executable")
    args = parser.parse_args()
    torch.set_num_threads(2)
    texts = json.loads((root / "texts.json").read_text())["texts"]
    worst = 0.0
    with tempfile.TemporaryDirectory() as scratch:
        for checkpoint in sorted(p for p in root.iterdir() if p.is_dir()):
            saved = Path(scratch) / checkpoint.name
            SentenceTransformer(str(checkpoint), device="cpu").save(str(saved))
            model = SentenceTransformer(str(saved), device="cpu")
            types = [m["type"] for m in json.loads((saved / "modules.json").read_text())]
            for role in ["query", "document"]:
                name = prompt_name(model, role)
                theirs = model.encode(texts, prompt_name=name, convert_to_numpy=True).tolist()
                mine = ours(args.bin, saved, role, texts)
                for text, a, b in zip(texts, theirs, mine):
                    if len(a) != len(b):
                        sys.exit(f"{checkpoint.name} ({role}) {text!r}: {len(b)} dimensions, theirs {len(a)}")
                    difference = max(abs(x - y) for x, y in zip(a, b))
                    worst = max(worst, difference)
                    if difference > 1e-5:
                        sys.exit(f"{checkpoint.name} ({role}) {text!r}: a component differs by {difference:.2e}")
            print(f"{checkpoint.name}: saved as {', '.join(types)}; every vector within 1e-5")
    print(
        json.dumps(
            {
                "sentence_transformers": sentence_transformers.__version__,
                "checkpoints": len([p for p in root.iterdir() if p.is_dir()]),
                "texts": len(texts),
                "worst_abs_difference": worst,
            }
        )
    )


if __name__ == "__main__":
    main()
