"""Throughput before and after (issue "Throughput"): the same measurements run on an older checkout of the package
(the baseline) and on this one, in alternating fresh processes (one torch thread each) so that the machine's load
hits both alike; medians per side and their ratio. Written to `nbs/results/benchmarks/throughput/before_after.json`, which
chapter 11 reads.

    python tools/throughput.py                          # baseline: commit e3e3ef7, extracted with `git archive`
    python tools/throughput.py --baseline DIR --rounds 3 --cell-steps 1000
    python tools/throughput.py --only cell decode       # some measurements (the others are kept from the file)

Measurements (each worker imports `treepe_nb` from its side's folder):
* `cell`: chapter 10's table2b cell tree-rotate-dfs-ape-tree-s0 end to end (`run_cell`: training, dev evaluations,
  test decoding), its loss curve kept to compare the two sides;
* `paper_step`: one forward + backward + AdamW step at the APE paper's size (d_model 512, 8 heads, 2 + 2 layers,
  64 tree-copy trees), with the FLOPs of forward + backward counted by `torch.utils.flop_counter`;
* `decode`: greedy `generate` at batch 1 of the same model (ape-tree, untrained, nudged to grow 64-node trees), and
  the time its linear layers take (the floor at batch 1: every weight read once per token);
* `tracker`: `TreeTracker.step` at batch 1 against one `PythonTracker` (chapter 11's per-sequence baseline), each fed
  its per-step input ready-made (a `[1, n]` tensor, a list of slots) and building the position tensor the decoder reads;
* `paper_step_bf16`: the same step, this checkout under bf16 autocast (`amp: all`) against the baseline in float32;
* `floor` (this checkout only): one small op, one Python call, a 1024^3 matmul (float32 and bf16), and the cell step's
  op count and FLOPs, i.e. what the hardware and PyTorch's dispatch allow;
* `cell_step_amp` (this checkout only): the cell's training step in float32 and under bf16 autocast, alternated.
"""
from __future__ import annotations

import argparse, datetime, json, os, platform, statistics, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import alternate                                              # the worker protocol, shared with tools/ape_cost.py

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "nbs/results/benchmarks/throughput/before_after.json"   # a subfolder: not one of `BENCHMARKS`
CELL = ("table2b", "tree-rotate-dfs-ape-tree-s0")
CELL_SETTINGS = {   # that cell as the 1-seed grid ran it, spelled out: both code versions read it as the same config
    "task": {"name": "tree-rotate", "order": "dfs", "sizes": [1000, 100, 100], "seed": 0},
    "model": {"pe": "ape-tree"}, "eval_every": 500, "patience": 0, "stop_when_perfect": False, "threads": 1}


def _cell_config(folder, steps=1000):
    "The measured chapter-10 cell (not `grid_configs`, whose faithful settings differ between the two versions)."
    from treepe_nb.train import TrainConfig
    return TrainConfig.from_dict({**CELL_SETTINGS, "steps": steps, "out": str(Path(folder) / "run")})


# ---------------------------------------------------------------- workers (run in a fresh process, one thread)
def _paper(pe="ape-tree", batch=64):
    from treepe_nb.train import TrainConfig, build
    from treepe_nb.tasks import TaskConfig
    from treepe_nb.model import ModelConfig
    cfg = TrainConfig(TaskConfig("tree-copy", order="dfs", sizes=(batch, 1, 1), preset="paper", seed=0),
                      ModelConfig(pe=pe, d_model=512, num_heads=8, enc_layers=2, dec_layers=2), batch_size=batch)
    task, model = build(cfg)
    return task, model, task.collate(list(task.train))


def work_cell(args):
    from treepe_nb.experiments import run_cell
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _cell_config(tmp, args.cell_steps)
        t0 = time.perf_counter()
        rec = run_cell(cfg, Path(tmp) / "cell.json")
        total = time.perf_counter() - t0
    return {"seconds": total, "train_seconds": rec["seconds"], "train_loss": rec["train_loss"],
            "test_exact_match": rec["test"]["exact_match"]}


def _adamw(model, fused):
    import torch
    return torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if fused else {}))


def _amp(mode):
    "The forward's context: bf16 autocast for `amp: all` (this checkout only; the baseline has no `amp_context`)."
    import contextlib
    if mode == "off": return contextlib.nullcontext()
    from treepe_nb.train import amp_context
    return amp_context(mode, "cpu")


def work_paper_step(args):
    import torch
    from treepe_nb.train import batch_loss
    task, model, b = _paper()
    opt = _adamw(model, args.fused)
    amp = _amp(args.amp)
    def step():
        opt.zero_grad(set_to_none=True)
        with amp: loss, count, _ = batch_loss(model, b)
        (loss / count).backward(); opt.step()
    step()                                                      # warm-up: the optimizer's state exists now
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        with amp: loss, count, _ = batch_loss(model, b)
        (loss / count).backward()
    return {"seconds": min(times), "times": times, "flops": fc.get_total_flops(), "amp": args.amp,
            "tokens": int(b.src_mask.sum() + b.tgt_mask.sum()), "src_length": int(b.src_ids.shape[1]),
            "tgt_length": int(b.tgt_ids.shape[1])}


def work_decode(args):
    import torch
    task, model, b = _paper(batch=1)
    model.eval()
    vocab = task.tgt_vocab
    grow = 20.0 * (torch.as_tensor(vocab.arity) == 2).float()          # untrained: favour binary nodes
    model.generator.register_forward_hook(lambda m, a, out: out + grow.to(out.dtype))
    def run():
        with torch.no_grad(): return model.generate(b.src_ids, b.src_pos, vocab, "dfs", max_output_nodes=64)
    run()
    times, tokens = [], 0
    for _ in range(args.repeat):
        t0 = time.perf_counter(); out = run(); times.append(time.perf_counter() - t0)
        tokens = sum(len(o) for o in out)
    # the floor: time inside the linear layers (batch 1 reads every weight once per token), from one more run with
    # a clock around each nn.Linear call
    spent, clock = [0.0], {}
    def before(m, a): clock[m] = time.perf_counter()
    def after(m, a, out): spent[0] += time.perf_counter() - clock[m]
    for m in model.modules():
        if isinstance(m, torch.nn.Linear): m.register_forward_pre_hook(before); m.register_forward_hook(after)
    run()
    return {"seconds": min(times), "tokens": tokens, "tokens_per_s": tokens / min(times), "linear_seconds": spent[0]}


def work_tracker(args):
    import numpy as np, torch
    from treepe_nb.benchmarks import PythonTracker, child_slot_table
    from treepe_nb.tracking import TreeTracker
    from treepe_nb.trees import Tree
    n_nodes = 63
    tree = Tree.from_parents(list(range(n_nodes)), np.r_[-1, np.arange(n_nodes - 1) // 2])   # complete binary, 63 nodes
    slots = child_slot_table(tree, "dfs")[None]                         # [1, steps, 2]
    rows = [[s for s, h in enumerate(r) if h] for r in slots[0].tolist()]
    cols = [slots[:, t] for t in range(n_nodes)]                      # each side gets its input ready-made
    def lib():
        tr = TreeTracker("dfs", 1, 2, 8, max_nodes=n_nodes)
        for c in cols: pos = tr.step(c)
        return pos
    def python():                                   # one per-sequence tracker, its position as a tensor per step
        tr = PythonTracker("dfs")
        for r in rows:
            tr.step(r)
            pos = torch.tensor([list(tr.current or ()) + [-1] * (8 - len(tr.current or ()))])
        return pos
    out = {}
    for name, f in (("tracker", lib), ("python", python)):
        f(); best = min(_timed(f) for _ in range(args.repeat * 5))
        out[name + "_step_us"] = best / n_nodes * 1e6
    out["seconds"] = out["tracker_step_us"] * 1e-6
    return out


def _timed(f):
    t0 = time.perf_counter(); f(); return time.perf_counter() - t0


def work_floor(args):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode
    from treepe_nb.train import build, batch_loss
    def per_call(f, n):
        f(); t0 = time.perf_counter()
        for _ in range(n): f()
        return (time.perf_counter() - t0) / n
    x, a = torch.ones(8), torch.randn(1024, 1024)
    def nothing(): return None
    out = {"op_s": min(per_call(lambda: x.add(1), 20000) for _ in range(3)),
           "python_call_s": min(per_call(nothing, 200000) for _ in range(3)),
           "matmul_1024_s": min(per_call(lambda: a @ a, 5) for _ in range(3))}
    out["peak_gflops"] = 2 * 1024 ** 3 / out["matmul_1024_s"] / 1e9
    h = a.bfloat16()                                               # AVX512-BF16 / AMX multiply bf16 natively
    out["peak_bf16_gflops"] = 2 * 1024 ** 3 / min(per_call(lambda: h @ h, 5) for _ in range(3)) / 1e9
    cfg = _cell_config(tempfile.gettempdir())
    task, model = build(cfg)
    batch = task.collate(list(task.train)[:cfg.batch_size])
    class Count(TorchDispatchMode):
        ops = 0
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.ops += 1
            return func(*args, **(kwargs or {}))
    with Count(), FlopCounterMode(display=False) as fc:
        loss, count, _ = batch_loss(model, batch); (loss / count).backward()
    out.update(cell_step_ops=Count.ops, cell_step_flops=fc.get_total_flops())
    out["cell_step_floor_s"] = out["cell_step_flops"] / (out["peak_gflops"] * 1e9) + Count.ops * out["op_s"]
    out["seconds"] = out["cell_step_floor_s"]
    return out


def work_cell_step_amp(args):
    "The chapter-10 cell's training step (forward, backward, AdamW) in float32 and under bf16 autocast, alternated."
    import random, torch
    from treepe_nb.train import build, batch_loss
    task, model = build(_cell_config(tempfile.gettempdir()))
    opt = _adamw(model, True)
    rng = random.Random(0)
    batches = [task.collate(rng.sample(list(task.train), 32)) for _ in range(20)]
    def steps(mode):
        amp = _amp(mode)
        t0 = time.perf_counter()
        for b in batches:
            opt.zero_grad(set_to_none=True)
            with amp: loss, count, _ = batch_loss(model, b)
            (loss / count).backward(); opt.step()
        return (time.perf_counter() - t0) / len(batches)
    times = {"off": [], "all": []}
    for r in range(2 * args.repeat + 1):                           # the first round warms up and is dropped
        for mode in (("off", "all") if r % 2 == 0 else ("all", "off")):
            t = steps(mode)
            if r: times[mode].append(t)
    out = {"fp32_step_s": min(times["off"]), "bf16_step_s": min(times["all"])}
    out["seconds"] = out["fp32_step_s"]
    return out


WORKERS = {"cell": work_cell, "paper_step": work_paper_step, "decode": work_decode, "tracker": work_tracker,
           "floor": work_floor, "cell_step_amp": work_cell_step_amp}
# measurement -> (worker, the `amp` of the after side); the before side always runs float32
MEASUREMENTS = {"cell": ("cell", "off"), "paper_step": ("paper_step", "off"), "paper_step_bf16": ("paper_step", "all"),
                "decode": ("decode", "off"), "tracker": ("tracker", "off"), "floor": ("floor", "off"),
                "cell_step_amp": ("cell_step_amp", "off")}
AFTER_ONLY = ("floor", "cell_step_amp")


# ---------------------------------------------------------------- orchestration
def _run_worker(root: Path, name: str, args, fused: bool, amp: str = "off") -> dict:
    return alternate.run_worker(__file__, root, name, args, "--amp", amp, *(["--fused"] if fused else []))


def _baseline(args, tmp: str) -> Path:
    return Path(args.baseline) if args.baseline else alternate.extract(args.baseline_commit, Path(tmp) / "baseline")


def _describe() -> str:
    "The commit measured as 'after' (with '+changes' when the working tree differs from it)."
    git = lambda *a: subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + ("+changes" if git("status", "--porcelain", "treepe_nb") else "")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fused", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--amp", default="off", help=argparse.SUPPRESS)
    ap.add_argument("--baseline", help="a folder holding the baseline's treepe_nb/ (default: --baseline-commit)")
    ap.add_argument("--baseline-commit", default="e3e3ef7", help="the commit measured as 'before'")
    alternate.options(ap, WORKERS, MEASUREMENTS, OUT, repeat=2)
    args = ap.parse_args(argv)
    if alternate.as_worker(args, WORKERS): return {}
    record = json.loads(args.out.read_text()) if args.out.exists() and args.only else {}
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"before": _baseline(args, tmp), "after": ROOT}
        for name in args.only or list(MEASUREMENTS):
            worker, amp = MEASUREMENTS[name]
            runs = {"before": [], "after": []}
            for r in range(args.rounds if name not in AFTER_ONLY else 1):
                for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                    if name in AFTER_ONLY and side == "before": continue
                    # the optimizer each side's `train` uses: plain AdamW before, fused after
                    runs[side].append(_run_worker(sides[side], worker, args, fused=side == "after",
                                                  amp=amp if side == "after" else "off"))
                    print(name, side, {k: v for k, v in runs[side][-1].items() if k not in ("train_loss", "times")},
                          file=sys.stderr, flush=True)
            med = {s: statistics.median(x["seconds"] for x in v) for s, v in runs.items() if v}
            record[name] = {"runs": runs, "median_seconds": med,
                            "speedup": med["before"] / med["after"] if "before" in med else None,
                            "settings": {"rounds": args.rounds, "repeat": args.repeat, "cell_steps": args.cell_steps,
                                         "baseline": args.baseline or args.baseline_commit, "code": _describe(),
                                         "measured": datetime.datetime.now().isoformat(timespec="seconds")}}
    record["machine"] = {"cpu_threads": os.cpu_count(), "python": platform.python_version(),
                         "torch_threads": 1, "load_average_1min": round(os.getloadavg()[0], 2),
                         "measured": datetime.datetime.now().isoformat(timespec="seconds")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__": main()
