#!/usr/bin/env python3
"""The GPU check: on a machine with an NVIDIA GPU, shows that this project's GPU forward pass gives the CPU's bits
and measures its speed beside sentence-transformers', and writes one JSON summary (`$OUT/gpu-check.json`).

Run it through scripts/gpu-check.sh, which finds NVRTC and the carried files (scripts/gpu-prepare.sh makes
them: a release binary, scifact.zip, and all-MiniLM-L6-v2's files but its weights). The weights are made here: a
checkpoint of all-MiniLM-L6-v2's exact shapes with seeded random weights (torch.manual_seed(0), BertModel(config)),
since the arithmetic and the speed do not depend on the values and the real weights do not travel.

What it shows, each a step of the summary:
  kernels   `scifact-audit device --check --throughput`: exp, erf, GELU and products against the CPU's definitions,
            the products' TFLOP/s on MiniLM's shapes, beside cuBLAS fp32 (TF32 off) on the same shapes
  parity    every parity checkpoint (fixtures/checkpoints), every text, both roles: `embed` on the GPU and the CPU,
            byte for byte
  fixture   SciFact's fixture built from the random checkpoint on the GPU and on the CPU: the same sha256
  bundles   a SciFact evaluation on the GPU verified on the CPU (every vector re-embedded there); a tiny evaluation
            on the CPU, and the committed tiny bundle, verified on the GPU; the GPU verification's wall time
  shards    a GPU shard and a CPU shard merged: the unsharded fixture
  speed     SciFact's 5,483 texts and 103,660 texts (its documents 20 times) through `embed` on the GPU, texts/s in
            the model; sentence-transformers fp32 and fp16 on the same 5,483 texts and GPU; where the GPU's time goes

`--device emulated --quick` rehearses it without a GPU (the kernels under the emulator, the tiny corpus, no
sentence-transformers timings unless torch is installed).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Check:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.abspath(args.bin)
        self.work = os.path.abspath(args.work)
        self.out = os.path.abspath(args.out)
        self.summary = {"device": args.device, "quick": args.quick, "steps": {}}
        os.makedirs(self.work, exist_ok=True)
        os.makedirs(self.out, exist_ok=True)
        self.log = open(os.path.join(self.out, "gpu-check.log"), "a", encoding="utf-8")

    def save(self):
        path = os.path.join(self.out, "gpu-check.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.summary, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)

    def say(self, text):
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def run(self, argv, stdin=None, env=None, timeout=600, check=True):
        """Runs a command; its (stdout bytes, stderr text, seconds)."""
        started = time.perf_counter()
        full_env = dict(os.environ, **(env or {}))
        self.log.write("$ " + " ".join(argv) + "\n")
        self.log.flush()
        process = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=full_env, timeout=timeout)
        seconds = time.perf_counter() - started
        stderr = process.stderr.decode(errors="replace")
        self.log.write(stderr[-4000:] + f"[exit {process.returncode}, {seconds:.1f} s]\n")
        self.log.flush()
        if check and process.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])}… exited {process.returncode}: {stderr[-1500:]}")
        return process.stdout, stderr, seconds

    def audit(self, *argv, **kwargs):
        return self.run([self.bin, *argv], **kwargs)

    def step(self, name, function):
        self.say(f"== {name}")
        started = time.perf_counter()
        try:
            result = function()
            result["ok"] = result.get("ok", True)
        except Exception as error:  # noqa: BLE001 - every failure is recorded, and the next step runs
            result = {"ok": False, "error": str(error)[-3000:]}
        result["seconds"] = round(time.perf_counter() - started, 1)
        self.summary["steps"][name] = result
        self.save()
        self.say(json.dumps(result)[:3000])


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def texts_of(archive, repeat=1, limit=None):
    """SciFact's documents as the model's text policy builds them (title, a space, the text, stripped), then its
    test queries: the texts the GPU and sentence-transformers embed."""
    with zipfile.ZipFile(archive) as z:
        names = z.namelist()
        corpus = next(n for n in names if n.endswith("corpus.jsonl"))
        queries = next(n for n in names if n.endswith("queries.jsonl"))
        documents = [json.loads(line) for line in z.read(corpus).decode().splitlines() if line.strip()]
        asked = [json.loads(line) for line in z.read(queries).decode().splitlines() if line.strip()]
    texts = [(d.get("title", "") + " " + d.get("text", "")).strip() for d in documents]
    if repeat > 1:
        return (texts * repeat)[:limit]
    texts += [q["text"] for q in asked[:300]]
    return texts[:limit]


def model_speed(stderr):
    """`embed`'s own account: texts, seconds in the model, texts/s."""
    found = re.search(r"embedded (\d+) texts in ([0-9.]+) s in the model \(.*?: (\d+) texts/s\)", stderr)
    if not found:
        raise RuntimeError("embed printed no speed: " + stderr[-500:])
    return {"texts": int(found[1]), "model_seconds": float(found[2]), "texts_per_second": int(found[3])}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".device/scifact-audit"))
    parser.add_argument("--archive", default=os.path.join(ROOT, ".device/scifact.zip"))
    parser.add_argument("--model-files", default=os.path.join(ROOT, ".device/minilm"),
                        help="all-MiniLM-L6-v2's files but its weights (config, tokenizer, modules)")
    parser.add_argument("--work", default="/tmp/gpu-check")
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-check-out"))
    parser.add_argument("--device", default="cuda", choices=["cuda", "emulated", "cpu"],
                        help="the GPU to check (`emulated`: its kernels on the CPU; `cpu`: a dry run of the commands)")
    parser.add_argument("--quick", action="store_true", help="a rehearsal: the tiny corpus, few texts")
    parser.add_argument("--steps", default="kernels,checkpoint,speed,parity,fixture,bundles,shards,peers",
                        help="comma-separated steps, in order")
    args = parser.parse_args()
    check = Check(args)
    gpu = args.device
    work = check.work
    tiny = os.path.join(ROOT, "fixtures/tiny")
    baseline_only = os.path.join(tiny, "baseline-only.json")
    ckpt = os.path.join(work, "ckpt")
    state = {}

    def dataset_args(model):
        """The corpus and model a fixture or evaluation is made of: SciFact with the random checkpoint, or the
        tiny corpus and model in a rehearsal."""
        if args.quick:
            return ["--profile", "tiny", "--archive", os.path.join(tiny, "scifact-tiny.zip"), "--model-dir",
                    os.path.join(tiny, "model")]
        return ["--archive", os.path.abspath(args.archive), "--model-dir", model]

    def kernels():
        flags = ["device", "--device", gpu, "--check", "--json"] + (["--throughput"] if gpu == "cuda" else [])
        stdout, _, _ = check.audit(*flags, check=False)
        result = json.loads(stdout)
        exact = result["scalar_differing"] == 0 and all(p["differing"] == 0 for p in result["products"])
        return {"ok": exact, "check": result}

    def checkpoint():
        stdout, _, _ = check.run([sys.executable, os.path.join(ROOT, "scripts/gpu-peer.py"), "checkpoint",
                                  "--model-files", args.model_files, "--out", ckpt])
        return json.loads(stdout)

    def speed():
        result = {}
        texts = texts_of(args.archive, limit=200 if args.quick else None)
        lines = "".join(json.dumps(t) + "\n" for t in texts).encode()
        with open(os.path.join(work, "texts.jsonl"), "wb") as f:
            f.write(lines)
        # A rehearsal without torch has no random checkpoint: the tiny model stands in.
        model = ckpt if os.path.isdir(ckpt) or not args.quick else os.path.join(tiny, "model")
        base = ["embed", "--model-dir", model, "--device", gpu]
        _, stderr, wall = check.audit(*base, stdin=lines)
        result["scifact"] = dict(model_speed(stderr), wall_seconds=round(wall, 2))
        _, stderr, _ = check.audit(*base, stdin=lines, env={"SCIFACT_AUDIT_GPU_GEMM": "wide2"})
        result["scifact_gemm_wide2"] = model_speed(stderr)
        _, stderr, _ = check.audit(*base, stdin=lines, env={"SCIFACT_AUDIT_GPU_PROFILE": "1"})
        result["profile"] = [line for line in stderr.splitlines() if line.startswith("SCIFACT_AUDIT_GPU_PROFILE")]
        if not args.quick:
            many = texts_of(args.archive, repeat=20)
            stdin = "".join(json.dumps(t) + "\n" for t in many).encode()
            _, stderr, wall = check.audit(*base, stdin=stdin)
            result["texts_103k"] = dict(model_speed(stderr), wall_seconds=round(wall, 2))
        return result

    def parity():
        directory = os.path.join(ROOT, "fixtures/checkpoints")
        with open(os.path.join(directory, "texts.json"), encoding="utf-8") as f:
            texts = json.load(f)["texts"]
        stdin = "".join(json.dumps(t) + "\n" for t in texts).encode()
        result, total, equal = {}, 0, 0
        for name in sorted(os.listdir(directory)):
            model = os.path.join(directory, name)
            if not os.path.isfile(os.path.join(model, "modules.json")):
                continue
            for role in ["query", "document"]:
                outputs = []
                for device in ["cpu", gpu]:
                    stdout, _, _ = check.audit("embed", "--model-dir", model, "--role", role, "--text-policy",
                                               "model", "--device", device, stdin=stdin)
                    outputs.append(stdout.splitlines())
                same = sum(a == b for a, b in zip(*outputs))
                result[f"{name}/{role}"] = f"{same} of {len(texts)}"
                total += len(texts)
                equal += same
        return {"ok": equal == total and total > 0, "vectors_equal": equal, "vectors": total, "by_checkpoint": result}

    def fixture():
        result = {}
        for device in [gpu, "cpu"]:
            out = os.path.join(work, f"fixture-{device}.json")
            shutil.rmtree(os.path.join(work, f"build-{device}"), ignore_errors=True)
            _, _, seconds = check.audit("build", *dataset_args(ckpt), "--out", out, "--work-dir",
                                        os.path.join(work, f"build-{device}"), "--device", device)
            result[device] = {"sha256": sha256(out), "seconds": round(seconds, 1)}
        state["fixture"] = result["cpu"]["sha256"]
        result["ok"] = result[gpu]["sha256"] == result["cpu"]["sha256"]
        return result

    def keypair():
        key, public = os.path.join(work, "k.key"), os.path.join(work, "k.pub")
        if not os.path.exists(key):
            check.audit("keygen", "--secret-key", key, "--public-key", public, "--without-password")
        return key, public

    def verify(bundle, public, device, extra):
        stdout, _, seconds = check.audit("verify-bundle", "--bundle-dir", bundle, "--public-key", public,
                                         "--device", device, "--json", *extra, check=False)
        report = json.loads(stdout)
        values = next((c for c in report["checks"] if c["name"] == "embedding.values"), {})
        return {"verdict": report.get("verdict"), "embedding.values": values.get("status"),
                "evidence": values.get("evidence", "")[:400], "seconds": round(seconds, 1)}

    def only_bundle(work_dir):
        bundles = os.path.join(work_dir, "bundles")
        return os.path.join(bundles, sorted(os.listdir(bundles))[0])

    def bundles():
        key, public = keypair()
        result = {}
        inputs = dataset_args(ckpt)
        archive_model = [a for pair in zip(inputs[::2], inputs[1::2]) if pair[0] in ("--archive", "--model-dir")
                         for a in pair]
        # Evaluated on the GPU, verified on the CPU (and, timed, on the GPU).
        made = os.path.join(work, "eval-gpu")
        shutil.rmtree(made, ignore_errors=True)
        _, _, seconds = check.audit("eval", "--work-dir", made, *inputs, "--search-space", baseline_only,
                                    "--secret-key", key, "--device", gpu)
        bundle = only_bundle(made)
        result["eval_on_gpu_seconds"] = round(seconds, 1)
        result["gpu_bundle_on_cpu"] = verify(bundle, public, "cpu", archive_model)
        result["gpu_bundle_on_gpu"] = verify(bundle, public, gpu, archive_model)
        # Evaluated on the CPU (the tiny corpus), verified on the GPU; and the committed tiny bundle.
        tiny_inputs = ["--profile", "tiny", "--archive", os.path.join(tiny, "scifact-tiny.zip"), "--model-dir",
                       os.path.join(tiny, "model")]
        made = os.path.join(work, "eval-cpu")
        shutil.rmtree(made, ignore_errors=True)
        check.audit("eval", "--work-dir", made, *tiny_inputs, "--search-space", baseline_only, "--secret-key", key,
                    "--device", "cpu")
        result["cpu_bundle_on_gpu"] = verify(only_bundle(made), public, gpu, tiny_inputs[2:])
        result["committed_tiny_on_gpu"] = verify(os.path.join(tiny, "expected"), os.path.join(tiny, "expected.pub"),
                                                 gpu, tiny_inputs[2:])
        passed = [result[k]["embedding.values"] == "pass" for k in
                  ["gpu_bundle_on_cpu", "gpu_bundle_on_gpu", "cpu_bundle_on_gpu", "committed_tiny_on_gpu"]]
        result["ok"] = all(passed)
        return result

    def shards():
        shard_work = os.path.join(work, "shards")
        shutil.rmtree(shard_work, ignore_errors=True)
        inputs = dataset_args(ckpt)
        for shard, device in [("0/2", gpu), ("1/2", "cpu")]:
            check.audit("build", *inputs, "--work-dir", shard_work, "--shard", shard, "--device", device)
        out = os.path.join(work, "fixture-merged.json")
        check.audit("build", *inputs, "--work-dir", shard_work, "--out", out, "--device", "cpu")
        merged = sha256(out)
        expected = state.get("fixture")
        return {"ok": expected is not None and merged == expected, "merged_sha256": merged, "unsharded_sha256": expected}

    def peers():
        stdout, _, _ = check.run([sys.executable, os.path.join(ROOT, "scripts/gpu-peer.py"), "speed", "--model", ckpt,
                                  "--texts", os.path.join(work, "texts.jsonl")], timeout=900)
        return json.loads(stdout)

    steps = {"kernels": kernels, "checkpoint": checkpoint, "speed": speed, "parity": parity, "fixture": fixture,
             "bundles": bundles, "shards": shards, "peers": peers}
    check.say(f"gpu-check: {check.bin} on {gpu}{' (quick)' if args.quick else ''}")
    for name in args.steps.split(","):
        check.step(name, steps[name])
    failed = [name for name, step in check.summary["steps"].items() if not step.get("ok")]
    check.summary["failed"] = failed
    check.save()
    check.say("gpu-check: " + ("every step passed" if not failed else "failed: " + ", ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
