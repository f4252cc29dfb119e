#!/usr/bin/env python3
"""The GPU check: on a machine with an NVIDIA GPU, tests whether this project's GPU forward pass gives the CPU's
bits, measures its speed beside sentence-transformers', and writes one JSON summary (`$OUT/gpu-check.json`).

Run it through `bash scripts/gpu-check.sh`, which finds NVRTC and the carried files (scripts/gpu-prepare.sh makes
them: a release binary, scifact.zip, and all-MiniLM-L6-v2's files but its weights). The weights are made here: a
checkpoint of all-MiniLM-L6-v2's exact shapes with seeded random weights (torch.manual_seed(0), BertModel(config)),
since the arithmetic and the speed do not depend on the values and the real weights do not travel.

The steps, in this order (the bit checks first, the timings last), each a part of the summary:
  kernels     `device --check` (every kernel against the CPU, NaN as NaN; with `--throughput` on a GPU, the
              products' TFLOP/s), and `device --device auto`: the GPU must pass the self-check `auto` runs
  checkpoint  the random checkpoint (torch)
  parity      every parity checkpoint (fixtures/checkpoints), every text, both roles: `embed` on the GPU and the
              CPU, byte for byte
  fixture     SciFact's fixture built from the random checkpoint on the GPU and on the CPU: the same sha256
  bundles     a SciFact evaluation on the GPU verified on the CPU (every vector re-embedded there) and on the GPU
              (timed: the verify goal); a tiny evaluation on the CPU, and the committed tiny bundle, verified on
              the GPU
  shards      a GPU shard and a CPU shard merged: the unsharded fixture
  speed       SciFact's 5,483 texts through `embed` on the GPU (texts/s in the model; the profile of its kernels);
              103,660 texts (its documents 20 times) only when the deadline leaves room
  peers       sentence-transformers fp32 and fp16 on the same 5,483 texts and GPU; cuBLAS fp32 on the products

One deadline (`--deadline`, 500 s by default, inside the device tool's 600 s call) bounds the whole: a step that
cannot finish in what is left is skipped and says so, and the long speed run is the first to go. Every failed
step keeps the end of its command's stderr. The summary names the binary (`--version`: its commit), the GPU and
driver (`nvidia-smi`) and the CPU, and compares each goal (>= 5,000 texts/s on SciFact; >= 2x sentence-
transformers' faster of fp32 and fp16; `verify-bundle` of a SciFact bundle on the GPU <= 15 s): met, not met, or
not measured. Exit 0 only when every step that ran passed and none was skipped (in a rehearsal, skipped steps
are said and allowed).

`--device emulated --quick` rehearses every step without a GPU (the kernels under the emulator, standing in for
the GPU `auto` finds; the tiny corpus; no torch needed: the tiny model stands in for the random checkpoint). CI
runs that rehearsal.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAND_IN_VAR = "SCIFACT_AUDIT_AUTO_GPU_STAND_IN"
GOAL_TEXTS_PER_SECOND = 5000
GOAL_TIMES_SENTENCE_TRANSFORMERS = 2.0
GOAL_VERIFY_SECONDS = 15.0


class StepFailed(Exception):
    """A step's command failed: its message and the end of its stderr."""

    def __init__(self, message, stderr=""):
        super().__init__(message)
        self.stderr = stderr


class Skipped(Exception):
    """A step that could not run here, or not in the time left."""


class Check:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.abspath(args.bin)
        self.work = os.path.abspath(args.work)
        self.out = os.path.abspath(args.out)
        self.started = time.monotonic()
        self.summary = {"device": args.device, "quick": args.quick, "deadline_seconds": args.deadline,
                        "steps": {}}
        os.makedirs(self.work, exist_ok=True)
        os.makedirs(self.out, exist_ok=True)
        self.log = open(os.path.join(self.out, "gpu-check.log"), "a", encoding="utf-8")

    def left(self):
        return self.args.deadline - (time.monotonic() - self.started)

    def save(self):
        path = os.path.join(self.out, "gpu-check.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.summary, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)

    def say(self, text):
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def run(self, argv, stdin=None, env=None, check=True):
        """Runs a command within the time left; its (stdout bytes, stderr text, seconds, exit status)."""
        timeout = self.left()
        if timeout < 5:
            raise Skipped(f"the deadline ({self.args.deadline} s) is reached")
        started = time.perf_counter()
        full_env = dict(os.environ, **(env or {}))
        self.log.write("$ " + " ".join(argv) + "\n")
        self.log.flush()
        try:
            process = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full_env, timeout=timeout)
        except subprocess.TimeoutExpired as expired:
            stderr = (expired.stderr or b"").decode(errors="replace")
            raise StepFailed(f"{' '.join(argv[:3])}… still running at the deadline ({timeout:.0f} s left)",
                             stderr[-2000:]) from None
        seconds = time.perf_counter() - started
        stderr = process.stderr.decode(errors="replace")
        self.log.write(stderr[-4000:] + f"[exit {process.returncode}, {seconds:.1f} s]\n")
        self.log.flush()
        if check and process.returncode != 0:
            raise StepFailed(f"{' '.join(argv[:3])}… exited {process.returncode}", stderr[-2000:])
        return process.stdout, stderr, seconds, process.returncode

    def audit(self, *argv, **kwargs):
        return self.run([self.bin, *argv], **kwargs)

    def step(self, name, function, needs=0):
        """Runs one step, unless fewer than `needs` seconds are left; records its result."""
        self.say(f"== {name} ({self.left():.0f} s left)")
        started = time.perf_counter()
        try:
            if self.left() < needs:
                raise Skipped(f"{self.left():.0f} s left of the deadline, and this step needs about {needs} s")
            result = function()
            result["ok"] = result.get("ok", True)
        except Skipped as why:
            result = {"ok": None, "skipped": str(why)}
        except StepFailed as error:
            result = {"ok": False, "error": str(error), "stderr": error.stderr}
        except Exception as error:  # noqa: BLE001 - every failure is recorded, and the next step runs
            result = {"ok": False, "error": f"{type(error).__name__}: {error}"[-3000:]}
        result["seconds"] = round(time.perf_counter() - started, 1)
        self.summary["steps"][name] = result
        self.save()
        self.say(json.dumps(result)[:3000])
        return result


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
    import re

    found = re.search(r"embedded (\d+) texts in ([0-9.]+) s in the model \(.*?: (\d+) texts/s\)", stderr)
    if not found:
        raise StepFailed("embed printed no speed", stderr[-1500:])
    return {"texts": int(found[1]), "model_seconds": float(found[2]), "texts_per_second": int(found[3])}


def environment(check):
    """What ran: the binary and its commit, the GPU and driver, the CPU, NVRTC."""
    found = {"cpu": platform.processor() or "", "cores": os.cpu_count(),
             "nvrtc": os.environ.get("SCIFACT_AUDIT_NVRTC", "")}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            found["cpu"] = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                                found["cpu"])
    except OSError:
        pass
    try:
        version = subprocess.run([check.bin, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 timeout=30)
        found["binary_version"] = (version.stdout or version.stderr).decode(errors="replace").strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        found["binary_version"] = f"not run: {error}"
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        found["nvidia_smi"] = smi.stdout.decode(errors="replace").strip() or smi.stderr.decode(errors="replace")
    else:
        found["nvidia_smi"] = "not on the PATH"
    return found


def goals(summary):
    """Each goal: the figure, the goal, and met (True, False, or None when not measured)."""
    steps = summary["steps"]
    speed = steps.get("speed", {}).get("scifact", {}).get("texts_per_second")
    peers = steps.get("peers", {})
    faster_peer = max([peers.get(p, {}).get("texts_per_second") or 0 for p in ("fp32", "fp16")] or [0]) or None
    verify = steps.get("bundles", {}).get("gpu_bundle_on_gpu", {})
    verify_seconds = verify.get("seconds") if verify.get("embedding.values") == "pass" else None

    def judged(value, goal, met):
        return {"value": value, "goal": goal, "met": None if value is None else met(value)}

    ratio = round(speed / faster_peer, 2) if speed and faster_peer else None
    return {
        "texts_per_second_scifact": judged(speed, f">= {GOAL_TEXTS_PER_SECOND}",
                                           lambda v: v >= GOAL_TEXTS_PER_SECOND),
        "times_sentence_transformers": judged(ratio, f">= {GOAL_TIMES_SENTENCE_TRANSFORMERS}",
                                              lambda v: v >= GOAL_TIMES_SENTENCE_TRANSFORMERS),
        "verify_bundle_seconds": judged(verify_seconds, f"<= {GOAL_VERIFY_SECONDS}",
                                        lambda v: v <= GOAL_VERIFY_SECONDS),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".device/scifact-audit"))
    parser.add_argument("--archive", default=os.path.join(ROOT, ".device/scifact.zip"))
    parser.add_argument("--model-files", default=os.path.join(ROOT, ".device/minilm"),
                        help="all-MiniLM-L6-v2's files but its weights (config, tokenizer, modules)")
    parser.add_argument("--work", default="/tmp/gpu-check")
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-check-out"))
    parser.add_argument("--device", default="cuda", choices=["cuda", "emulated"],
                        help="the GPU to check (`emulated`: its kernels on the CPU, standing in for a GPU)")
    parser.add_argument("--quick", action="store_true", help="a rehearsal: the tiny corpus, few texts")
    parser.add_argument("--deadline", type=float, default=500.0,
                        help="seconds for the whole check; a step that cannot finish in what is left is skipped")
    parser.add_argument("--steps", default="kernels,checkpoint,parity,fixture,bundles,shards,speed,peers",
                        help="comma-separated steps, in order")
    args = parser.parse_args()
    check = Check(args)
    gpu = args.device
    if gpu == "emulated":
        # `auto` finds the emulator as its GPU, so its self-check is rehearsed too.
        os.environ[STAND_IN_VAR] = "emulated"
    work = check.work
    tiny = os.path.join(ROOT, "fixtures/tiny")
    baseline_only = os.path.join(tiny, "baseline-only.json")
    ckpt = os.path.join(work, "ckpt")
    state = {}
    check.summary["environment"] = environment(check)
    check.save()

    def model():
        """The model the GPU runs: the random checkpoint, or in a rehearsal without torch the tiny model."""
        if os.path.isfile(os.path.join(ckpt, "model.safetensors")):
            return ckpt
        if args.quick:
            return os.path.join(tiny, "model")
        raise Skipped("no random checkpoint (the checkpoint step did not make one)")

    def dataset_args():
        """The corpus and model a fixture or evaluation is made of: SciFact with the random checkpoint, or the
        tiny corpus and model in a rehearsal."""
        if args.quick:
            return ["--profile", "tiny", "--archive", os.path.join(tiny, "scifact-tiny.zip"), "--model-dir",
                    os.path.join(tiny, "model")]
        return ["--archive", os.path.abspath(args.archive), "--model-dir", model()]

    def kernels():
        flags = ["device", "--device", gpu, "--check", "--json"]
        flags += ["--throughput"] if gpu == "cuda" else []
        flags += ["--self-check"] if args.quick else []
        stdout, stderr, _, status = check.audit(*flags, check=False)
        try:
            result = json.loads(stdout)
        except json.JSONDecodeError:
            raise StepFailed(f"device --check exited {status} without a report", stderr[-2000:]) from None
        differing = [p for p in result["products"] + result["steps"] if p["differing"]]
        exact = result["scalar_differing"] == 0 and not differing and status == 0
        stdout, stderr, _, _ = check.audit("device", "--device", "auto", "--json")
        auto = json.loads(stdout)
        taken = auto["device"] == gpu
        summary = {"ok": exact and taken, "check": result, "auto": auto}
        if not taken:
            summary["error"] = f"`auto` did not take the GPU: {auto.get('no_gpu')}"
        return summary

    def checkpoint():
        try:
            import torch  # noqa: F401 - only asked whether it is there
        except ImportError:
            if args.quick:
                raise Skipped("no torch here: the tiny model stands in for the random checkpoint") from None
            raise
        stdout, _, _, _ = check.run([sys.executable, os.path.join(ROOT, "scripts/gpu-peer.py"), "checkpoint",
                                     "--model-files", args.model_files, "--out", ckpt])
        made = json.loads(stdout)
        made["ok"] = os.path.isfile(os.path.join(ckpt, "model.safetensors")) and len(made["weights_sha256"]) == 64
        return made

    def parity():
        directory = os.path.join(ROOT, "fixtures/checkpoints")
        with open(os.path.join(directory, "texts.json"), encoding="utf-8") as f:
            texts = json.load(f)["texts"]
        stdin = "".join(json.dumps(t) + "\n" for t in texts).encode()
        result, total, equal = {}, 0, 0
        for name in sorted(os.listdir(directory)):
            model_dir = os.path.join(directory, name)
            if not os.path.isfile(os.path.join(model_dir, "modules.json")):
                continue
            for role in ["query", "document"]:
                outputs = []
                for device in ["cpu", gpu]:
                    stdout, _, _, _ = check.audit("embed", "--model-dir", model_dir, "--role", role, "--text-policy",
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
            _, _, seconds, _ = check.audit("build", *dataset_args(), "--out", out, "--work-dir",
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
        stdout, stderr, seconds, _ = check.audit("verify-bundle", "--bundle-dir", bundle, "--public-key", public,
                                                 "--device", device, "--json", *extra, check=False)
        try:
            report = json.loads(stdout)
        except json.JSONDecodeError:
            raise StepFailed(f"verify-bundle on {device} gave no report", stderr[-2000:]) from None
        values = next((c for c in report["checks"] if c["name"] == "embedding.values"), {})
        found = {"verdict": report.get("verdict"), "embedding.values": values.get("status"),
                 "evidence": values.get("evidence", "")[:400], "seconds": round(seconds, 1)}
        if values.get("status") != "pass":
            found["stderr"] = stderr[-2000:]
        return found

    def only_bundle(work_dir):
        bundles = os.path.join(work_dir, "bundles")
        return os.path.join(bundles, sorted(os.listdir(bundles))[0])

    def bundles():
        key, public = keypair()
        result = {}
        inputs = dataset_args()
        archive_model = [a for pair in zip(inputs[::2], inputs[1::2]) if pair[0] in ("--archive", "--model-dir")
                         for a in pair]
        # Evaluated on the GPU, verified on the CPU (and, timed, on the GPU).
        made = os.path.join(work, "eval-gpu")
        shutil.rmtree(made, ignore_errors=True)
        _, _, seconds, _ = check.audit("eval", "--work-dir", made, *inputs, "--search-space", baseline_only,
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
        if "fixture" not in state:
            raise Skipped("no unsharded fixture to compare with (the fixture step did not finish)")
        shard_work = os.path.join(work, "shards")
        shutil.rmtree(shard_work, ignore_errors=True)
        inputs = dataset_args()
        for shard, device in [("0/2", gpu), ("1/2", "cpu")]:
            check.audit("build", *inputs, "--work-dir", shard_work, "--shard", shard, "--device", device)
        out = os.path.join(work, "fixture-merged.json")
        check.audit("build", *inputs, "--work-dir", shard_work, "--out", out, "--device", "cpu")
        merged = sha256(out)
        return {"ok": merged == state["fixture"], "merged_sha256": merged, "unsharded_sha256": state["fixture"]}

    def speed():
        result = {}
        # A rehearsal embeds a few of the tiny corpus's texts (the emulator is slow, and needs no SciFact).
        texts = texts_of(os.path.join(tiny, "scifact-tiny.zip"), limit=40) if args.quick else texts_of(args.archive)
        lines = "".join(json.dumps(t) + "\n" for t in texts).encode()
        with open(os.path.join(work, "texts.jsonl"), "wb") as f:
            f.write(lines)
        base = ["embed", "--model-dir", model(), "--device", gpu]
        _, stderr, wall, _ = check.audit(*base, stdin=lines)
        result["scifact"] = dict(model_speed(stderr), wall_seconds=round(wall, 2))
        _, stderr, _, _ = check.audit(*base, stdin=lines, env={"SCIFACT_AUDIT_GPU_GEMM": "wide2"})
        result["scifact_gemm_wide2"] = model_speed(stderr)
        _, stderr, _, _ = check.audit(*base, stdin=lines, env={"SCIFACT_AUDIT_GPU_PROFILE": "1"})
        result["profile"] = [line for line in stderr.splitlines() if line.startswith("SCIFACT_AUDIT_GPU_PROFILE")]
        # The long run takes about 20 times the short one's wall time: only when that leaves a margin.
        needed = 20 * result["scifact"]["wall_seconds"] + 30
        if args.quick:
            result["texts_103k"] = {"skipped": "a rehearsal"}
        elif check.left() < needed:
            result["texts_103k"] = {"skipped": f"{check.left():.0f} s left of the deadline, about {needed:.0f} s needed"}
        else:
            many = texts_of(args.archive, repeat=20)
            stdin = "".join(json.dumps(t) + "\n" for t in many).encode()
            _, stderr, wall, _ = check.audit(*base, stdin=stdin)
            result["texts_103k"] = dict(model_speed(stderr), wall_seconds=round(wall, 2))
        return result

    def peers():
        texts = os.path.join(work, "texts.jsonl")
        if not os.path.isfile(texts):
            raise Skipped("no texts (the speed step did not run)")
        try:
            import torch  # noqa: F401
        except ImportError:
            raise Skipped("no torch here: nothing to time beside") from None
        stdout, _, _, _ = check.run([sys.executable, os.path.join(ROOT, "scripts/gpu-peer.py"), "speed", "--model",
                                     model(), "--texts", texts])
        result = json.loads(stdout)
        result["ok"] = "fp32" in result and "fp16" in result
        if not result["ok"]:
            result["error"] = result.get("note", "sentence-transformers was not timed")
        return result

    # Roughly what each step takes on an H200 with SciFact (seconds), for skipping what cannot finish.
    needs = {"kernels": 10, "checkpoint": 20, "parity": 10, "fixture": 60, "bundles": 90, "shards": 40,
             "speed": 30, "peers": 60}
    steps = {"kernels": kernels, "checkpoint": checkpoint, "parity": parity, "fixture": fixture,
             "bundles": bundles, "shards": shards, "speed": speed, "peers": peers}
    check.say(f"gpu-check: {check.bin} on {gpu}{' (quick)' if args.quick else ''}, deadline {args.deadline:.0f} s")
    for name in args.steps.split(","):
        if name not in steps:
            parser.error(f"--steps: no step {name!r} (there are {', '.join(steps)})")
        check.step(name, steps[name], needs=0 if args.quick else needs[name])
    ran = check.summary["steps"]
    failed = [name for name, step in ran.items() if step.get("ok") is False]
    skipped = [name for name, step in ran.items() if step.get("ok") is None]
    check.summary["failed"] = failed
    check.summary["skipped"] = skipped
    check.summary["goals"] = goals(check.summary) if not args.quick else {"note": "a rehearsal: no goal is judged"}
    check.summary["seconds"] = round(time.monotonic() - check.started, 1)
    check.save()
    unmet = [name for name, goal in check.summary["goals"].items() if isinstance(goal, dict) and goal["met"] is False]
    check.say("gpu-check: " + ("every step passed" if not failed and not skipped else
                               f"failed: {', '.join(failed) or 'none'}; skipped: {', '.join(skipped) or 'none'}")
              + f"; goals not met: {', '.join(unmet) or 'none'}")
    # A rehearsal skips what needs torch or a GPU's time (said in the summary); a real check must run everything.
    return 1 if failed or (skipped and not args.quick) else 0


if __name__ == "__main__":
    sys.exit(main())
