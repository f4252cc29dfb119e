#!/usr/bin/env python3
"""The ColBERT parity checkpoints and PyLate's own token vectors for them: the oracle the project's late-interaction
encoder is held to (fixtures/colbert/).

`make` builds small BERT encoders with seeded random weights and has PyLate 1.6.0 make and save each ColBERT as it
makes its own (`pylate.models.ColBERT(...)`, `save`):
  pylate-default   PyLate's defaults over a BERT base (hidden 32, 2 layers, 256 positions): added `[Q] ` / `[D] `
                   prefix tokens, queries of 32 padded with [MASK] that the query does not attend to, documents of
                   180, a bias-free projection to 128, string.punctuation as the documents' skiplist
  pylate-biased    a projection to 24 with a bias, no query expansion (queries keep their own tokens only), its own
                   skiplist (`the`, `of`, `,`), queries of 16 and documents of 40
  pylate-attend    queries of 24 that attend to their [MASK] expansion (attend_to_expansion_tokens), a projection to 16
  stanford         a colbert-ai checkpoint (`HF_ColBERT`: the encoder's tensors under `bert.`, `linear.weight` beside
                   them, artifact.metadata with `[unused0]` / `[unused1]`, query_maxlen 20, doc_maxlen 48), as PyLate
                   reads one: the layout colbert-ir/colbertv2.0 and answerai-colbert-small-v1 ship
Every weight is drawn from a seed and moved away from its default (a default initialisation hides a mapping bug),
and the texts (fixtures/colbert/texts.json) run past each length, with punctuation for the skiplists.

`reference` recomputes fixtures/colbert/reference.json (every checkpoint's `encode(is_query=...)` token vectors,
both roles) from the committed checkpoints (`--check`: fail when a vector count differs or any component by more
than 1e-5). `parity --bin PATH` loads each committed checkpoint in the installed PyLate, saves it again, runs the
project's `embed --role query|document` on the saved copy and requires every token vector within 1e-5 of PyLate's
(CI's live peer).

Needs PyLate 1.6.0, which pins sentence-transformers 5.3: scripts/pylate-venv.sh makes ~/.cache/pylate-peer.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pylate  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from pylate import models  # noqa: E402
from seeded_weights import perturb  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "colbert"
TOLERANCE = 1e-5

WORDS = """the of and to in a is that for it as was with be by on not he this are or his from at which but have an
they you were her she there one all we their been has when who will more no if out so said what up its about into
protein cell cells gene genes expression patients disease cancer risk study studies effect effects treatment
clinical human mice data analysis activity role levels function increased associated response high low results
tumor blood brain drug virus infection immune dna rna binding receptor signaling pathway mutation aging red
planet known search query document fast causes""".split()
PIECES = ["##s", "##ed", "##ing", "##ly", "##er", "##ion", "##al", "##ic", "##es", "##e", "##a", "##y", "##t", "##n"]
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
PUNCT = list(".,;:!?()[]{}-'\"/%+=<>&*#@$_")

TEXTS = [
    "what causes aging fast?",
    "Protein expression in Human cells is Increased by the drug.",
    "the red planet, known (data: 2 studies)!",
    "",
    " ".join(WORDS) + " " + " ".join(reversed(WORDS)),
    "Mice with the mutation: increased risk of cancer; of the tumor, of the blood.",
    "UNSEEN zebrafish xylophone quokka",
]


def vocabulary():
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(3)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    seen, vocab = set(), []
    for token in specials + PUNCT + LETTERS + ["##" + c for c in LETTERS] + PIECES + sorted(set(WORDS)):
        if token not in seen:
            seen.add(token)
            vocab.append(token)
    return vocab


def base(directory, seed, positions):
    """A BERT encoder with seeded weights and a WordPiece tokenizer, saved as transformers saves one."""
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(vocabulary()), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=48, max_position_embeddings=positions, hidden_act="gelu", layer_norm_eps=1e-12,
    )
    model = perturb(transformers.BertModel(config, add_pooling_layer=False), seed + 1)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory), safe_serialization=True)
    vocab = {token: i for i, token in enumerate(vocabulary())}
    transformers.BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=positions).save_pretrained(
        str(directory))
    return model


def projected(model, seed):
    """The projection's weights (and bias) drawn from `seed`, as `perturb` draws the encoder's."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in list(model)[1:]:
            for name, parameter in sorted(module.named_parameters()):
                noise = torch.rand(parameter.shape, generator=generator) - 0.5
                parameter.copy_((0.2 if name.endswith("bias") else 0.6) * noise)
    return model


def make_pylate(out, scratch, name, seed, positions, **settings):
    encoder = Path(scratch) / f"{name}-base"
    base(encoder, seed, positions)
    model = projected(models.ColBERT(str(encoder), device="cpu", **settings), seed + 2)
    model.save(str(out / name))


def make_stanford(out, seed):
    directory = out / "stanford"
    model = base(directory, seed, 64)
    # colbert-ai's HF_ColBERT: a BertPreTrainedModel holding `bert` and `linear` (bias-free), saved together.
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(seed + 2)
    tensors = {f"bert.{key}": value.contiguous() for key, value in model.state_dict().items()}
    tensors["linear.weight"] = 0.6 * (torch.rand((20, 32), generator=generator) - 0.5)
    (directory / "model.safetensors").unlink()
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((directory / "config.json").read_text())
    config["architectures"] = ["HF_ColBERT"]
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (directory / "artifact.metadata").write_text(json.dumps({
        "query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_token": "[Q]", "doc_token": "[D]",
        "query_maxlen": 20, "doc_maxlen": 48, "attend_to_mask_tokens": False, "dim": 20, "similarity": "cosine",
        "mask_punctuation": True, "checkpoint": "seeded random weights",
    }, indent=2) + "\n")


def make(out):
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        make_pylate(out, scratch, "pylate-default", 11, 256)
        make_pylate(out, scratch, "pylate-biased", 21, 64, embedding_size=24, bias=True, do_query_expansion=False,
                    skiplist_words=["the", "of", ","], query_length=16, document_length=40)
        make_pylate(out, scratch, "pylate-attend", 31, 64, embedding_size=16, attend_to_expansion_tokens=True,
                    query_length=24, document_length=60)
    make_stanford(out, 41)
    for junk in out.rglob("README.md"):
        junk.unlink()
    (out / "texts.json").write_text(json.dumps({"texts": TEXTS}, indent=2) + "\n")


def checkpoints():
    return sorted(p for p in ROOT.iterdir() if p.is_dir())


def encode_all(directory, texts):
    torch.set_num_threads(2)
    model = models.ColBERT(str(directory), device="cpu")
    out = {}
    for role in ("query", "document"):
        vectors = model.encode(texts, is_query=role == "query", batch_size=4, convert_to_numpy=True)
        out[role] = [[[float(f"{x:.9g}") for x in row] for row in matrix.tolist()] for matrix in vectors]
    return out


def compare(theirs, mine):
    worst = 0.0
    for name, roles in theirs.items():
        for role, texts in roles.items():
            for index, (a, b) in enumerate(zip(texts, mine[name][role], strict=True)):
                if len(a) != len(b):
                    sys.exit(f"{name} {role} text {index}: {len(b)} token vectors, PyLate gives {len(a)}")
                for row_a, row_b in zip(a, b):
                    if len(row_a) != len(row_b):
                        sys.exit(f"{name} {role} text {index}: vectors of {len(row_b)}, PyLate's are {len(row_a)}")
                    worst = max(worst, max(abs(x - y) for x, y in zip(row_a, row_b)))
    return worst


def reference(check):
    texts = json.loads((ROOT / "texts.json").read_text())["texts"]
    computed = {"pylate": pylate.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
                "checkpoints": {d.name: encode_all(d, texts) for d in checkpoints()}}
    path = ROOT / "reference.json"
    if check:
        stored = json.loads(path.read_text())
        difference = compare(stored["checkpoints"], computed["checkpoints"])
        print(f"reference.json against PyLate {pylate.__version__}: largest difference {difference:.2e}")
        if difference > TOLERANCE:
            sys.exit("reference.json is not what PyLate computes")
        return
    path.write_text(json.dumps(computed, separators=(",", ":")) + "\n")


def ours(binary, directory, role, texts):
    stdin = "".join(json.dumps(t) + "\n" for t in texts)
    output = subprocess.run([binary, "embed", "--model-dir", str(directory), "--role", role], input=stdin,
                            capture_output=True, text=True, check=False)
    if output.returncode != 0:
        sys.exit(f"embed {directory.name} {role}: {output.stderr}")
    return [json.loads(line)["vectors"] for line in output.stdout.splitlines()]


def parity(binary):
    texts = json.loads((ROOT / "texts.json").read_text())["texts"]
    worst = 0.0
    with tempfile.TemporaryDirectory() as scratch:
        for directory in checkpoints():
            saved = Path(scratch) / directory.name
            if (directory / "artifact.metadata").exists():
                shutil.copytree(directory, saved)
            else:
                models.ColBERT(str(directory), device="cpu").save(str(saved))
            theirs = {directory.name: encode_all(saved, texts)}
            mine = {directory.name: {role: ours(binary, saved, role, texts) for role in ("query", "document")}}
            difference = compare(theirs, mine)
            print(f"{directory.name}: {len(texts)} texts x 2 roles, largest difference {difference:.2e}")
            worst = max(worst, difference)
    print(f"ColBERT checkpoints as PyLate {pylate.__version__} saves them: largest difference {worst:.2e} "
          f"(tolerance {TOLERANCE})")
    if worst > TOLERANCE:
        sys.exit("the project's token vectors are not PyLate's")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("make")
    check = sub.add_parser("reference")
    check.add_argument("--check", action="store_true")
    live = sub.add_parser("parity")
    live.add_argument("--bin", required=True)
    args = parser.parse_args()
    if args.command == "make":
        shutil.rmtree(ROOT, ignore_errors=True)
        make(ROOT)
        reference(check=False)
    elif args.command == "reference":
        reference(check=args.check)
    else:
        parity(args.bin)


if __name__ == "__main__":
    main()
