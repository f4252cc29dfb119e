#!/usr/bin/env python3
"""The sparse (SPLADE) parity checkpoints and sentence-transformers' own sparse vectors for them: the oracle the
project's sparse encoder is held to (fixtures/sparse/).

`make` builds, with seeded random weights, one small BERT masked-language model per layout sentence-transformers
reads, and has sentence-transformers save each as it saves its own (`SparseEncoder(...).save_pretrained`):
  st6-fill-mask   Transformer(transformer_task="fill-mask") + SpladePooling(max, relu); prompts; a window of 40
  st5-mlm-sum     the 5.x layout (MLMTransformer, max_seq_length 20, do_lower_case) + SpladePooling(sum,
                  log1p_relu), an untied decoder, max_active_dims 12
  router          the inference-free Router: a SparseStaticEmbedding for queries, the MLM encoder and
                  SpladePooling(max) for documents
  bare-masked-lm  a BertForMaskedLM directory alone (naver's layout), read as Transformer + SpladePooling(max)
Every norm weight and bias is moved away from 1 and 0 (a default initialisation hides a mapping bug), and the texts
(fixtures/sparse/texts.json) run past each window. Then it writes fixtures/sparse/reference.json: for each
checkpoint, `encode_query` and `encode_document` of every text, as (index, value) pairs.

`reference` recomputes reference.json from the committed checkpoints (`--check`: fail when any value differs by
more than 1e-5, as torch's own kernels differ by CPU, or an index differs). `parity --bin PATH` has the installed
sentence-transformers save each checkpoint again, runs the project's `embed --role query|document` on the saved
copy, and requires every index and every value within 1e-5 of sentence-transformers' (CI's live peer).

Needs torch, transformers and sentence-transformers 6.3 (scripts/peer-venv.sh makes ~/.cache/embed-peer).
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

import sentence_transformers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from sentence_transformers import SparseEncoder  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "sparse"

WORDS = """the of and to in a is that for it as was with be by on not he this are or his from at which but have an
they you were her she there one all we their been has when who will more no if out so said what up its about into
than them can only other new some could time these two may then do first any my now such like our over man me even
most made after also did many before must through back years where much your way well down should because each just
those people how too little state good very make world still own see men work long get here between both life being
under never day same another know while last might us great old year off come since against go came right used take
three protein cell cells gene genes expression patients disease cancer risk study studies effect effects treatment
clinical human mice data analysis activity role levels function increased associated response high low results
tumor blood brain drug virus infection immune dna rna binding receptor signaling pathway mutation mutations aging
fast causes red planet known""".split()
PIECES = ["##s", "##ed", "##ing", "##ly", "##er", "##ion", "##al", "##ic", "##es", "##e", "##a", "##y", "##t", "##n"]
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
PUNCT = list(".,;:!?()[]{}-'\"/%+=<>&*#@$")


def vocabulary():
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(3)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    seen, vocab = set(), []
    for token in specials + PUNCT + LETTERS + ["##" + c for c in LETTERS] + PIECES + sorted(set(WORDS)):
        if token not in seen:
            seen.add(token)
            vocab.append(token)
    return vocab


def tokenizer_in(directory, max_length):
    vocab = {token: i for i, token in enumerate(vocabulary())}
    return transformers.BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=max_length)


def masked_lm(seed, vocab_size, tie=True):
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, tie_word_embeddings=tie, hidden_act="gelu",
    )
    model = transformers.BertForMaskedLM(config)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm.weight" in name:
                parameter.copy_(1.0 + 0.5 * (torch.rand(parameter.shape, generator=generator) - 0.5))
            elif name.endswith("bias"):
                parameter.copy_(0.2 * (torch.rand(parameter.shape, generator=generator) - 0.5))
                if name.startswith("cls.predictions") and parameter.shape[0] == vocab_size:
                    # Most logits below zero, so that vectors are sparse and relu's edge is crossed.
                    parameter.sub_(1.5)
            else:
                parameter.mul_(8.0)
    return model


def save_masked_lm(directory, seed, max_length, tie=True):
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer_in(directory, max_length)
    model = masked_lm(seed, len(vocabulary()), tie=tie)
    model.save_pretrained(str(directory), safe_serialization=True)
    tokenizer.save_pretrained(str(directory))
    return directory


def make(out):
    from sentence_transformers.base.modules import Router, Transformer
    from sentence_transformers.sparse_encoder.modules import SparseStaticEmbedding, SpladePooling

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "texts.json").write_text(json.dumps({"texts": TEXTS}, indent=1) + "\n", encoding="utf-8")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        # sentence-transformers 6: a fill-mask Transformer and SpladePooling(max), with prompts.
        base = save_masked_lm(scratch / "a", seed=11, max_length=40)
        model = SparseEncoder(
            modules=[Transformer(str(base), transformer_task="fill-mask"), SpladePooling("max")],
            prompts={"query": "query: ", "document": "passage: "},
        )
        model.save_pretrained(str(out / "st6-fill-mask"))
        # The 5.x layout: MLMTransformer with max_seq_length and do_lower_case, sum and log1p_relu, an untied
        # decoder, max_active_dims.
        base = save_masked_lm(scratch / "b", seed=22, max_length=512, tie=False)
        model = SparseEncoder(
            modules=[Transformer(str(base), transformer_task="fill-mask", max_seq_length=20),
                     SpladePooling("sum", activation_function="log1p_relu")],
            max_active_dims=12,
        )
        target = out / "st5-mlm-sum"
        model.save_pretrained(str(target))
        legacy(target)
        # The inference-free Router.
        base = save_masked_lm(scratch / "c", seed=33, max_length=48)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(base))
        weight = torch.rand(len(vocabulary()), generator=torch.Generator().manual_seed(34)) * 3.0
        router = Router.for_query_document(
            query_modules=[SparseStaticEmbedding(tokenizer=tokenizer, weight=weight, frozen=True)],
            document_modules=[Transformer(str(base), transformer_task="fill-mask"), SpladePooling("max")],
        )
        # Prompts as 6.3 reads them: encode_query takes `query`, encode_document `document` (an empty one of its
        # own when none is saved): neither `passage` nor default_prompt_name reaches them.
        SparseEncoder(modules=[router], similarity_fn_name="dot", prompts={"query": "q: ", "passage": "p: "},
                      default_prompt_name="passage").save_pretrained(str(out / "router"))
        # A bare BertForMaskedLM directory.
        save_masked_lm(out / "bare-masked-lm", seed=44, max_length=32)
    for directory in out.iterdir():
        for junk in directory.rglob("README.md"):
            junk.unlink()


def legacy(directory):
    """Rewrites a saved SparseEncoder as sentence-transformers 5.x saved one: the MLMTransformer type, and the
    window and lower-casing in sentence_bert_config.json (6.x still reads both)."""
    modules = json.loads((directory / "modules.json").read_text())
    modules[0]["type"] = "sentence_transformers.sparse_encoder.models.MLMTransformer"
    modules[1]["type"] = "sentence_transformers.sparse_encoder.models.SpladePooling"
    (directory / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (directory / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 20, "do_lower_case": True}, indent=2) + "\n")


TEXTS = [
    "what causes aging fast",
    "Protein expression in Human cells is Increased by the drug.",
    "the red planet",
    "",
    " ".join(WORDS[:90]),
    "Mice with the mutation: increased risk of cancer (data analysis, 2 studies)!",
    "binding binding binding receptor receptor",
    "UNSEEN zebrafish xylophone quokka",
]


def encode_all(directory, texts):
    model = SparseEncoder(str(directory), device="cpu")
    out = {}
    for role in ("query", "document"):
        encode = model.encode_query if role == "query" else model.encode_document
        dense = encode(texts, convert_to_tensor=True, convert_to_sparse_tensor=False, batch_size=3)
        rows = []
        for row in dense:
            nonzero = torch.nonzero(row, as_tuple=True)[0].tolist()
            rows.append({"indices": nonzero, "values": [float(row[i]) for i in nonzero]})
        out[role] = rows
    return out


def reference(check):
    texts = json.loads((ROOT / "texts.json").read_text())["texts"]
    torch.set_num_threads(1)
    fresh = {
        "made_by": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
        "texts": texts,
        "checkpoints": {d.name: encode_all(d, texts) for d in sorted(ROOT.iterdir()) if d.is_dir()},
    }
    path = ROOT / "reference.json"
    if not check:
        path.write_text(json.dumps(fresh, indent=1) + "\n", encoding="utf-8")
        return 0
    committed = json.loads(path.read_text())
    worst = compare(committed["checkpoints"], fresh["checkpoints"])
    print(f"sparse reference: {fresh['made_by']}: largest difference {worst:.2e} from the committed one")
    # torch's own kernels are not the same on every CPU (the reference made on an AMD EPYC differs by 1.4e-6 on
    # an Intel Xeon): the project's tolerance against the peer, not bit equality.
    return 0 if worst <= 1e-5 else 1


def compare(expected, got, tolerance=None):
    """The largest difference over every vocabulary entry either side holds (an entry one side lacks is 0 there:
    a logit within rounding of 0 can be kept by one and dropped by the other), failing beyond `tolerance`; with no
    tolerance (the committed reference against itself) the indices must be the same."""
    worst = 0.0
    for name, roles in expected.items():
        for role, rows in roles.items():
            for i, (want, have) in enumerate(zip(rows, got[name][role], strict=True)):
                if tolerance is None and want["indices"] != have["indices"]:
                    missing = sorted(set(want["indices"]) ^ set(have["indices"]))
                    raise SystemExit(f"{name} {role} text {i}: other indices ({missing[:10]} differ)")
                a_of = dict(zip(want["indices"], want["values"]))
                b_of = dict(zip(have["indices"], have["values"]))
                for index in set(a_of) | set(b_of):
                    a, b = a_of.get(index, 0.0), b_of.get(index, 0.0)
                    worst = max(worst, abs(a - b))
                    if tolerance is not None and abs(a - b) > tolerance:
                        raise SystemExit(f"{name} {role} text {i}, vocabulary entry {index}: {b} against {a}")
    return worst


def parity(binary):
    texts = json.loads((ROOT / "texts.json").read_text())["texts"]
    stdin = "".join(json.dumps(t) + "\n" for t in texts).encode()
    worst, counted = 0.0, 0
    with tempfile.TemporaryDirectory() as scratch:
        for directory in sorted(d for d in ROOT.iterdir() if d.is_dir()):
            saved = Path(scratch) / directory.name
            if directory.name == "bare-masked-lm":
                shutil.copytree(directory, saved)
            else:
                SparseEncoder(str(directory), device="cpu").save_pretrained(str(saved))
            theirs = encode_all(saved, texts)
            ours = {}
            for role in ("query", "document"):
                run = subprocess.run([binary, "embed", "--model-dir", str(saved), "--role", role], input=stdin,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
                if run.returncode != 0:
                    raise SystemExit(f"{directory.name} {role}: embed failed: {run.stderr.decode()[-2000:]}")
                ours[role] = [json.loads(line)["sparse"] for line in run.stdout.decode().splitlines()]
            worst = max(worst, compare({directory.name: theirs}, {directory.name: ours}, tolerance=1e-5))
            counted += sum(len(r["values"]) for rows in theirs.values() for r in rows)
    print(f"sparse parity: {counted} values of {len(texts)} texts in both roles, every vocabulary entry within 1e-5 "
          f"(one a side lacks counted as 0), largest difference {worst:.2e} "
          f"(sentence-transformers {sentence_transformers.__version__})")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("make")
    check = commands.add_parser("reference")
    check.add_argument("--check", action="store_true")
    live = commands.add_parser("parity")
    live.add_argument("--bin", required=True)
    args = parser.parse_args()
    if args.command == "make":
        make(ROOT)
        return reference(check=False)
    if args.command == "reference":
        return reference(args.check)
    return parity(args.bin)


if __name__ == "__main__":
    sys.exit(main())
