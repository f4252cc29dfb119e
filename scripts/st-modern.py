#!/usr/bin/env python3
"""The parity checkpoints of the 2024-2026 encoders and sentence-transformers' own vectors for them: the oracle the
project's forward pass is held to for each new architecture (fixtures/modern/).

`make` builds, with seeded random weights, small checkpoints over transformers' native classes, and has
sentence-transformers 6.3 save each as it saves its own (`SentenceTransformer(modules=[...]).save_pretrained`):
  nomic-native       NomicBert in the native spelling 6.3 saves (hidden 32, 2 heads of 16, θ 1000), mean pooling,
                     Normalize, `search_query: ` / `search_document: ` prompts, no max_seq_length (so the window is
                     max_position_embeddings, 40)
  nomic-original     NomicBert in nomic-embed-text-v1.5's own spelling of config.json (`n_embd`, `n_head`,
                     `rotary_emb_base`, ...), heads of 8 (a scale 1/√8 that is not a power of two), θ 50, a window
                     of 20 (max_seq_length), CLS pooling without Normalize
  modernbert-cls     ModernBERT as transformers 5 saves it (`rope_parameters`, `layer_types`): 4 layers, global on
                     0 and 3 (θ 1000), local on 1 and 2 (θ 50, `local_attention` 8: keys within 4), heads of 16,
                     a byte-level BPE tokenizer, CLS pooling, Normalize, the window max_position_embeddings (40)
  modernbert-legacy  ModernBERT in the spelling of the released checkpoints (`global_rope_theta`,
                     `local_rope_theta`, `global_attn_every_n_layers` 2, no `layer_types`), 3 layers, heads of 8,
                     `local_attention` 6, mean pooling with `search_query: ` / `search_document: ` prompts, a
                     window of 24 (max_seq_length), no Normalize
and three BERT checkpoints for sentence-transformers' other poolings (the pipeline the 2024-2026 encoders bring):
  pool-lasttoken     lasttoken pooling (a decoder's), Normalize
  pool-weightedmean  weightedmean pooling with include_prompt false (the prompt's tokens weigh 0, the rest keep
                     their positions) and prompts
  pool-sqrt-flags    mean_sqrt_len_tokens in the older pooling_mode_* flag form, a window of 12
two Qwen3 decoders (causal, RMSNorm, per-head q/k norms, grouped-query attention with an explicit head_dim, SwiGLU,
a byte-level BPE tokenizer in Qwen2's pipeline whose post-processor appends `<|endoftext|>`):
  qwen3-lasttoken    3 layers, 4 query heads of 12 (48 wide beside a hidden size of 32; a scale 1/√12) over 2 key/value
                     heads, θ 1000, lasttoken pooling, Normalize, Qwen3-Embedding's instruction prompt for queries
                     only, the window max_position_embeddings (96: the prompt is 56 tokens)
  qwen3-mqa          2 layers, 4 query heads of 8 over one key/value head, θ 77, mean pooling, a window of 16
                     (max_seq_length), no Normalize
two for its `truncate_dim` (config_sentence_transformers.json), the vectors cut after the whole pipeline:
  truncate-normalized  mean pooling, Normalize, truncate_dim 12 of 32: encoded with normalize_embeddings=True, as the
                       project runs a checkpoint that normalises (the cut vectors normalised again, what cosine scores)
  truncate-raw         CLS pooling, no Normalize, truncate_dim 20: the first 20 components as they are
and two for its Dense modules after the pooling:
  dense-two          mean, Dense 32→48 (bias, Tanh: the default), Dense 48→24 (no bias, Identity), Normalize
                     (EmbeddingGemma's pipeline in small)
  dense-residual     CLS, Dense 32→32 (Identity, the input added back), Dense 32→16 (Tanh, no bias, a projected
                     residual), no Normalize
Every norm weight and bias is moved away from 1 and 0 (a default initialisation hides a mapping bug), and the texts
(fixtures/modern/texts.json) run past each window. A checkpoint in an original spelling is encoded by
sentence-transformers from a copy whose config.json this script translates to the native keys (transformers'
class ignores the original ones), so the project's own translation is checked against this one.

`reference` recomputes fixtures/modern/reference.json from the committed checkpoints (`--check`: fail when any
component differs by more than 1e-5). `parity --bin PATH` has the installed sentence-transformers save each native
checkpoint again, runs the project's `embed --role query|document` on the saved copy (and on the committed
original-spelling ones) and on a bfloat16 copy of qwen3-mqa (against sentence-transformers run in float32), and
requires every component within 1e-5 of sentence-transformers' (CI's live peer).

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
from sentence_transformers import SentenceTransformer  # noqa: E402
from seeded_weights import perturb  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "modern"
TOLERANCE = 1e-5

WORDS = """the of and to in a is that for it as was with be by on not he this are or his from at which but have an
they you were her she there one all we their been has when who will more no if out so said what up its about into
than them can only other new some could time these two may then do first any my now such like our over man me even
protein cell cells gene genes expression patients disease cancer risk study studies effect effects treatment
clinical human mice data analysis activity role levels function increased associated response high low results
tumor blood brain drug virus infection immune dna rna binding receptor signaling pathway mutation mutations aging
search query document fast causes red planet known""".split()
PIECES = ["##s", "##ed", "##ing", "##ly", "##er", "##ion", "##al", "##ic", "##es", "##e", "##a", "##y", "##t", "##n"]
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
PUNCT = list(".,;:!?()[]{}-'\"/%+=<>&*#@$_")

TEXTS = [
    "what causes aging fast",
    "Protein expression in Human cells is Increased by the drug.",
    "the red planet",
    "",
    " ".join(WORDS[:70]),
    "Mice with the mutation: increased risk of cancer (data analysis, 2 studies)!",
    "binding binding binding receptor receptor",
    "UNSEEN zebrafish xylophone quokka",
]

# nomic-embed-text-v1.5's own keys for the native ones (its remote code's spelling).
ORIGINAL_KEYS = {"hidden_size": "n_embd", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer",
                 "intermediate_size": "n_inner", "layer_norm_eps": "layer_norm_epsilon"}


def vocabulary():
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(3)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    seen, vocab = set(), []
    for token in specials + PUNCT + LETTERS + ["##" + c for c in LETTERS] + PIECES + sorted(set(WORDS)):
        if token not in seen:
            seen.add(token)
            vocab.append(token)
    return vocab


def wordpiece(max_length):
    vocab = {token: i for i, token in enumerate(vocabulary())}
    return transformers.BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=max_length)


def nomic(seed, hidden, heads, theta, positions):
    torch.manual_seed(seed)
    config = transformers.NomicBertConfig(
        vocab_size=len(vocabulary()), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=heads,
        intermediate_size=48, max_position_embeddings=positions, type_vocab_size=2, layer_norm_eps=1e-12,
        rope_parameters={"rope_theta": float(theta), "rope_type": "default"},
    )
    return perturb(transformers.NomicBertModel(config), seed + 1)


def bert(seed, positions=64):
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(vocabulary()), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=48, max_position_embeddings=positions, hidden_act="gelu", layer_norm_eps=1e-12,
    )
    return perturb(transformers.BertModel(config, add_pooling_layer=False), seed + 1)


def byte_level_bpe(max_length):
    """A small byte-level BPE tokenizer in ModernBERT's shape (no normalizer, ByteLevel pre-tokenizer without a
    prefix space, `[CLS] $A [SEP]`), trained on this script's words: every byte is in its alphabet."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [" ".join(WORDS[i:i + 12]) for i in range(0, len(WORDS), 12)] + TEXTS
    tokenizer.train_from_iterator(corpus, trainer)
    ids = {token: tokenizer.token_to_id(token) for token in specials}
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
        mask_token="[MASK]", unk_token="[UNK]", model_max_length=max_length), ids


QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_PROMPTS = {"query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"}


def qwen2_bpe(max_length):
    """A small byte-level BPE tokenizer in Qwen2's pipeline (NFC, the Split regex, ByteLevel without a prefix
    space or its own regex), whose post-processor appends `<|endoftext|>` as Qwen3-Embedding's tokenizer.json
    does (the config's eos is `<|im_end|>`; the appended token is also the padding one)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=QWEN_SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [" ".join(WORDS[i:i + 12]) for i in range(0, len(WORDS), 12)] + TEXTS
    tokenizer.train_from_iterator(corpus, trainer)
    end = tokenizer.token_to_id("<|endoftext|>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A <|endoftext|>", pair="$A <|endoftext|> $B:1 <|endoftext|>:1",
        special_tokens=[("<|endoftext|>", end)])
    return tokenizer


def save_qwen2_tokenizer(tokenizer, directory, max_length):
    """tokenizer.json and a tokenizer_config.json naming Qwen2Tokenizer, as Qwen3-Embedding's are (left padding,
    `<|im_end|>` as eos, `<|endoftext|>` as the padding token); loaded back through transformers' class."""
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen2Tokenizer", "model_max_length": max_length, "padding_side": "left",
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None, "bos_token": None,
        "add_prefix_space": False, "errors": "replace", "split_special_tokens": False,
    }, indent=2) + "\n")
    loaded = transformers.AutoTokenizer.from_pretrained(str(directory))
    assert type(loaded).__name__ == "Qwen2Tokenizer", type(loaded)
    assert loaded("a b")["input_ids"][-1] == tokenizer.token_to_id("<|endoftext|>")
    return len(loaded)


def qwen3(seed, vocab, heads, kv_heads, head_dim, layers, theta, positions):
    torch.manual_seed(seed)
    config = transformers.Qwen3Config(
        vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, head_dim=head_dim, max_position_embeddings=positions, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": float(theta)}, tie_word_embeddings=False,
    )
    return perturb(transformers.Qwen3Model(config), seed + 1)


def make_qwen3(out, scratch):
    tokenizer = qwen2_bpe(512)
    for name, seed, shape, pooling, length, normalize, prompts in [
        ("qwen3-lasttoken", 111, dict(heads=4, kv_heads=2, head_dim=12, layers=3, theta=1000, positions=96),
         "lasttoken", None, True, QWEN_PROMPTS),
        ("qwen3-mqa", 122, dict(heads=4, kv_heads=1, head_dim=8, layers=2, theta=77, positions=64),
         "mean", 16, False, None),
    ]:
        base = scratch / name
        base.mkdir(parents=True)
        vocab = save_qwen2_tokenizer(tokenizer, base, 512)
        qwen3(seed, vocab, **shape).save_pretrained(str(base), safe_serialization=True)
        save_sentence_transformer(base, out / name, pooling, length=length, normalize=normalize, prompts=prompts)


def make_truncate(out, scratch):
    for name, seed, pooling, normalize, dims in [
        ("truncate-normalized", 133, "mean", True, 12),
        ("truncate-raw", 144, "cls", False, 20),
    ]:
        base = save_base(scratch / name, bert(seed), 512)
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

        transformer = Transformer(str(base))
        modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling)]
        modules += [Normalize()] if normalize else []
        SentenceTransformer(modules=modules, prompts=PROMPTS, truncate_dim=dims).save_pretrained(str(out / name))


def renormalized(directory):
    """Whether the project normalises `directory`'s vectors again after cutting them (a checkpoint with a
    Normalize module and a truncate_dim): sentence-transformers' `normalize_embeddings=True`."""
    modules = json.loads((directory / "modules.json").read_text())
    settings = directory / "config_sentence_transformers.json"
    cut = settings.exists() and json.loads(settings.read_text()).get("truncate_dim") is not None
    return cut and any(m["type"].endswith("Normalize") for m in modules)


def modernbert(seed, tokenizer_ids, vocab, heads, layers, local, thetas, every, positions):
    torch.manual_seed(seed)
    config = transformers.ModernBertConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=layers, num_attention_heads=heads,
        max_position_embeddings=positions, local_attention=local, global_attn_every_n_layers=every,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": float(thetas[0])},
                         "sliding_attention": {"rope_type": "default", "rope_theta": float(thetas[1])}},
        pad_token_id=tokenizer_ids["[PAD]"], bos_token_id=tokenizer_ids["[CLS]"], cls_token_id=tokenizer_ids["[CLS]"],
        eos_token_id=tokenizer_ids["[SEP]"], sep_token_id=tokenizer_ids["[SEP]"], norm_eps=1e-5,
    )
    return perturb(transformers.ModernBertModel(config), seed + 1)


def legacy_spelling(config, thetas, every):
    """A ModernBERT config.json as the released checkpoints spell it (transformers 4): the bases and the layer
    pattern as `global_rope_theta`, `local_rope_theta` and `global_attn_every_n_layers`."""
    out = {key: value for key, value in config.items() if key not in ("rope_parameters", "layer_types")}
    out.update({"global_rope_theta": float(thetas[0]), "local_rope_theta": float(thetas[1]),
                "global_attn_every_n_layers": every})
    return out


def save_base(directory, model, max_length):
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory), safe_serialization=True)
    wordpiece(max_length).save_pretrained(str(directory))
    return directory


def original_spelling(config):
    """A native NomicBert config.json in nomic-embed-text-v1.5's own keys, as its file spells them."""
    out = {key: value for key, value in config.items() if key not in ORIGINAL_KEYS and key != "hidden_act"}
    for native, original in ORIGINAL_KEYS.items():
        out[original] = config[native]
    theta = config["rope_parameters"]["rope_theta"]
    out.update({"activation_function": "swiglu", "rotary_emb_base": theta, "rotary_emb_fraction": 1.0,
                "rotary_emb_interleaved": False, "rotary_emb_scale_base": None, "rotary_scaling_factor": None,
                "qkv_proj_bias": False, "mlp_fc1_bias": False, "mlp_fc2_bias": False, "prenorm": False,
                "n_positions": 8192, "causal": False, "use_rms_norm": False})
    return out


def native_spelling(config):
    """The inverse, as this script reads an original-spelling config.json (independently of the project)."""
    out = {key: value for key, value in config.items() if key not in ORIGINAL_KEYS.values()}
    for native, original in ORIGINAL_KEYS.items():
        out[native] = config[original]
    out["hidden_act"] = "silu"
    return out


PROMPTS = {"query": "search_query: ", "document": "search_document: "}


def save_sentence_transformer(base, target, pooling, length=None, include_prompt=True, after=list, normalize=False,
                              prompts=PROMPTS):
    """Saves, as sentence-transformers saves its own, the checkpoint of the transformer at `base` (its window
    `length` when given) pooled by `pooling`, then the modules `after()` makes, then Normalize when `normalize`.
    `after` is called once the Transformer is built: loading a BertModel draws its unused pooler from torch's
    global generator, so the order keeps the saved bytes."""
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(base), max_seq_length=length) if length else Transformer(str(base))
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling, include_prompt=include_prompt)]
    modules += after() + ([Normalize()] if normalize else [])
    SentenceTransformer(modules=modules, prompts=prompts).save_pretrained(str(target))
    return target


def respell(target, spelling, name="config.json", indent=2):
    """Rewrites the JSON file `name` of the saved checkpoint `target` as `spelling` gives it."""
    path = target / name
    path.write_text(json.dumps(spelling(json.loads(path.read_text())), indent=indent) + "\n")


def pooling_flags(config):
    """A Pooling config.json of one mode in the older `pooling_mode_*` flag form."""
    mode = config["pooling_mode"]
    flags = {"word_embedding_dimension": config["embedding_dimension"]}
    for flag in ["cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken"]:
        flags[f"pooling_mode_{flag}"] = flag == mode or flag == f"{mode}_tokens"
    flags["include_prompt"] = config["include_prompt"]
    return flags


def make(out):
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "texts.json").write_text(json.dumps({"texts": TEXTS}, indent=1) + "\n", encoding="utf-8")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        base = save_base(scratch / "a", nomic(11, hidden=32, heads=2, theta=1000, positions=40), 512)
        save_sentence_transformer(base, out / "nomic-native", "mean", normalize=True)
        base = save_base(scratch / "b", nomic(22, hidden=32, heads=4, theta=50, positions=64), 512)
        target = save_sentence_transformer(base, out / "nomic-original", "cls", length=20)
        respell(target, original_spelling)

        tokenizer, ids = byte_level_bpe(512)
        vocab = len(tokenizer)
        base = scratch / "c"
        modernbert(33, ids, vocab, heads=2, layers=4, local=8, thetas=(1000, 50), every=3,
                   positions=40).save_pretrained(str(base), safe_serialization=True)
        tokenizer.save_pretrained(str(base))
        save_sentence_transformer(base, out / "modernbert-cls", "cls", normalize=True, prompts=None)
        base = scratch / "d"
        modernbert(44, ids, vocab, heads=4, layers=3, local=6, thetas=(300, 20), every=2,
                   positions=64).save_pretrained(str(base), safe_serialization=True)
        tokenizer.save_pretrained(str(base))
        target = save_sentence_transformer(base, out / "modernbert-legacy", "mean", length=24)
        respell(target, lambda config: legacy_spelling(config, (300, 20), 2))

        for name, seed, mode, include_prompt, length, normalize in [
            ("pool-lasttoken", 55, "lasttoken", True, None, True),
            ("pool-weightedmean", 66, "weightedmean", False, None, False),
            ("pool-sqrt-flags", 77, "mean_sqrt_len_tokens", True, 12, False),
        ]:
            base = save_base(scratch / name, bert(seed), 512)
            save_sentence_transformer(base, out / name, mode, length=length, include_prompt=include_prompt,
                                      normalize=normalize)
        respell(out / "pool-sqrt-flags", pooling_flags, "1_Pooling/config.json", indent=4)

        make_qwen3(out, scratch)
        make_truncate(out, scratch)

        from sentence_transformers.sentence_transformer.modules import Dense

        for name, seed, pooling, dense, normalize in [
            ("dense-two", 88, "mean", [dict(in_features=32, out_features=48),
                                       dict(in_features=48, out_features=24, bias=False,
                                            activation_function=torch.nn.Identity())], True),
            ("dense-residual", 99, "cls", [dict(in_features=32, out_features=32,
                                                activation_function=torch.nn.Identity(), use_residual=True),
                                           dict(in_features=32, out_features=16, bias=False, use_residual=True)],
             False),
        ]:
            base = save_base(scratch / name, bert(seed), 512)
            def after(dense=dense, seed=seed):
                return [perturb(Dense(**arguments), seed + 10 + index) for index, arguments in enumerate(dense)]

            save_sentence_transformer(base, out / name, pooling, after=after, normalize=normalize)
    for directory in out.iterdir():
        for junk in directory.rglob("README.md"):
            junk.unlink()


def readable_copy(directory, scratch):
    """`directory` itself, or, for an original spelling, a copy whose config.json has the native keys."""
    config = json.loads((directory / "config.json").read_text())
    if "n_embd" not in config:
        return directory
    copy = Path(scratch) / directory.name
    shutil.copytree(directory, copy)
    (copy / "config.json").write_text(json.dumps(native_spelling(config), indent=2) + "\n")
    return copy


def encode_all(directory, texts, model_kwargs=None):
    with tempfile.TemporaryDirectory() as scratch:
        model = SentenceTransformer(str(readable_copy(directory, scratch)), device="cpu", model_kwargs=model_kwargs)
        out = {}
        for role in ("query", "document"):
            encode = model.encode_query if role == "query" else model.encode_document
            vectors = encode(texts, convert_to_numpy=True, batch_size=3,
                             normalize_embeddings=renormalized(directory))
            out[role] = [[float(x) for x in row] for row in vectors]
        return out


def compare(expected, found):
    worst = 0.0
    for name, roles in expected.items():
        for role, rows in roles.items():
            theirs = found[name][role]
            if len(rows) != len(theirs):
                sys.exit(f"{name} {role}: {len(theirs)} vectors, expected {len(rows)}")
            for at, (a, b) in enumerate(zip(rows, theirs)):
                if len(a) != len(b):
                    sys.exit(f"{name} {role} text {at}: {len(b)} dimensions, expected {len(a)}")
                worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
    return worst


def checkpoints():
    return sorted(d for d in ROOT.iterdir() if d.is_dir())


def reference(check):
    texts = json.loads((ROOT / "texts.json").read_text())["texts"]
    torch.set_num_threads(1)
    fresh = {
        "made_by": f"sentence-transformers {sentence_transformers.__version__}, transformers "
                   f"{transformers.__version__}, torch {torch.__version__}",
        "texts": texts,
        "checkpoints": {d.name: encode_all(d, texts) for d in checkpoints()},
    }
    path = ROOT / "reference.json"
    if not check:
        path.write_text(json.dumps(fresh, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path} ({fresh['made_by']})")
        return
    committed = json.loads(path.read_text())
    if sorted(committed["checkpoints"]) != sorted(fresh["checkpoints"]):
        sys.exit(f"reference.json holds {sorted(committed['checkpoints'])}, the folder {sorted(fresh['checkpoints'])}")
    worst = compare(committed["checkpoints"], fresh["checkpoints"])
    print(f"modern checkpoints: sentence-transformers ({fresh['made_by']}) against the committed reference "
          f"({committed['made_by']}): largest difference {worst:.2e}")
    if worst > TOLERANCE:
        sys.exit("the committed reference is not what sentence-transformers gives")


def ours(binary, directory, role, texts):
    lines = "".join(json.dumps(text) + "\n" for text in texts)
    done = subprocess.run(
        [binary, "embed", "--model-dir", str(directory), "--role", role, "--device", "cpu"],
        input=lines.encode(), capture_output=True,
    )
    if done.returncode != 0:
        sys.exit(f"{directory} ({role}): scifact-audit embed refused it:\n{done.stderr.decode()}")
    return [json.loads(line)["vector"] for line in done.stdout.decode().splitlines()]


def parity(binary):
    texts = json.loads((ROOT / "texts.json").read_text())["texts"]
    torch.set_num_threads(2)
    worst = 0.0
    with tempfile.TemporaryDirectory() as scratch:
        for directory in checkpoints():
            config = json.loads((directory / "config.json").read_text())
            if "n_embd" in config or "global_rope_theta" in config:
                saved = directory
            else:
                saved = Path(scratch) / directory.name
                SentenceTransformer(str(directory), device="cpu").save_pretrained(str(saved))
            theirs = {directory.name: encode_all(saved, texts)}
            mine = {directory.name: {role: ours(binary, saved, role, texts) for role in ("query", "document")}}
            difference = compare(theirs, mine)
            print(f"{directory.name}: {len(texts)} texts x 2 roles, largest difference {difference:.2e}")
            worst = max(worst, difference)
        # A checkpoint published in bfloat16 (Qwen3-Embedding's) runs here in f32 from its own values, widened
        # exactly: sentence-transformers' vectors with model_kwargs dtype float32 (its default runs bf16).
        from safetensors.torch import load_file, save_file

        half = Path(scratch) / "qwen3-mqa-bf16"
        shutil.copytree(ROOT / "qwen3-mqa", half)
        tensors = {name: t.to(torch.bfloat16) for name, t in load_file(str(half / "model.safetensors")).items()}
        save_file(tensors, str(half / "model.safetensors"), metadata={"format": "pt"})
        config = json.loads((half / "config.json").read_text())
        (half / "config.json").write_text(json.dumps(dict(config, dtype="bfloat16"), indent=2) + "\n")
        theirs = {half.name: encode_all(half, texts, model_kwargs={"dtype": torch.float32})}
        mine = {half.name: {role: ours(binary, half, role, texts) for role in ("query", "document")}}
        difference = compare(theirs, mine)
        print(f"{half.name}: {len(texts)} texts x 2 roles (bf16 weights, run in f32), largest difference "
              f"{difference:.2e}")
        worst = max(worst, difference)
    print(f"modern checkpoints as sentence-transformers {sentence_transformers.__version__} saves them: "
          f"largest difference {worst:.2e} (tolerance {TOLERANCE})")
    if worst > TOLERANCE:
        sys.exit("the project's vectors are not sentence-transformers'")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    made = sub.add_parser("make")
    made.add_argument("--only", choices=["qwen3", "truncate"],
                      help="make that group of checkpoints alone, keeping the others' bytes")
    check = sub.add_parser("reference")
    check.add_argument("--check", action="store_true")
    live = sub.add_parser("parity")
    live.add_argument("--bin", required=True)
    args = parser.parse_args()
    if args.command == "make" and args.only:
        group = {"qwen3": (make_qwen3, ("qwen3-lasttoken", "qwen3-mqa")),
                 "truncate": (make_truncate, ("truncate-normalized", "truncate-raw"))}
        maker, names = group[args.only]
        for name in names:
            shutil.rmtree(ROOT / name, ignore_errors=True)
        with tempfile.TemporaryDirectory() as scratch:
            maker(ROOT, Path(scratch))
        for junk in ROOT.rglob("README.md"):
            junk.unlink()
        reference(check=False)
    elif args.command == "make":
        make(ROOT)
        reference(check=False)
    elif args.command == "reference":
        reference(args.check)
    else:
        parity(args.bin)


if __name__ == "__main__":
    main()
