"""ape-tree at the cost of `none` (issue 34): the training step of each encoding, its aten op count, the chapter-10
cell end to end and `torch.compile`, measured on several checkouts in alternating fresh processes (one torch thread
each, so that the machine's load hits all sides alike). Written to `nbs/results/benchmarks/ape_cost/ape_cost.json`, which
chapter 11 reads.

    python tools/ape_cost.py                                   # sides: 88f0a80, fda6bc9 (before the plans), HEAD
    python tools/ape_cost.py --sides 88f0a80 HEAD --rounds 3 --only steps

Measurements (each worker imports `treepe_nb` from its side's folder):
* `steps`: one training step (forward, backward, AdamW) of the chapter-10 cell's model (tree-rotate dfs, d_model 64,
  4 heads, 2 + 2 layers, batch 32) for `none`, `stack` and `ape-tree`, the encodings alternated step by step over
  the same 10 batches, best of the rounds; the same on one For2Lam-long batch (32 programs); and the aten ops of one
  step of each (a dispatch-mode counter), forward + backward;
* `cell`: chapter 10's cell tree-rotate-dfs-ape-tree-s0 end to end (training 1000 steps, dev evaluations, test
  decoding), as `tools/throughput.py` runs it;
* `breakdown` (this checkout only): where ape-tree's extra time goes on the For2Lam-long batch (`work_breakdown`);
* `kernel` (this checkout only): the same ape-tree model and batches with the compiled CPU kernels (rotations and,
  since 46f3d66, the maps' level walk) and without them (`TREEPE_CPU_KERNELS=0`), alternated with `none`, at the
  chapter-10 size and on the For2Lam-long batch;
* `compile` (this checkout only): the chapter-10 step of `none` and `ape-tree`, eager against `torch.compile`
  (inductor, the default backend), alternated, on one batch (one padded shape: compiling a graph costs minutes on
  this CPU), and the same on the For2Lam-long batch; the compilation time is reported apart.
"""
from __future__ import annotations

import argparse, datetime, inspect, json, os, platform, statistics, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import alternate                                              # the worker protocol, shared with tools/throughput.py

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "nbs/results/benchmarks/ape_cost/ape_cost.json"   # a subfolder: not one of `BENCHMARKS`
ENCODINGS = ("none", "stack", "ape-tree")
CELL_SETTINGS = {"task": {"name": "tree-rotate", "order": "dfs", "sizes": [1000, 100, 100], "seed": 0},
                 "model": {"pe": "ape-tree"}, "eval_every": 500, "patience": 0, "stop_when_perfect": False, "threads": 1}
FOR2LAM_LONG = {"name": "for2lam-long", "sizes": [64, 2, 2], "seed": 0}   # one batch of 32 long programs
LONG_CPS = {**FOR2LAM_LONG, "options": {"translation": "cps"}}              # the data every side's `steps` measured


def _config(settings:dict):
    "A TrainConfig of `settings` (nested), also on checkouts whose TrainConfig is flat (88f0a80: no from_dict)."
    import dataclasses
    from treepe_nb.train import TrainConfig
    if hasattr(TrainConfig, "from_dict"): return TrainConfig.from_dict(settings)
    flat = {**{k: v for k, v in settings.items() if k not in ("task", "model")}, **settings["model"],
            **{k: v for k, v in settings["task"].items() if k != "name"}, "task": settings["task"]["name"]}
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**{k: tuple(v) if k == "sizes" else v for k, v in flat.items() if k in names})


def _setup(pe, task_settings, batches=10, batch=32):
    "A model of `pe` on the task, its AdamW, and fixed training batches."
    import random, torch
    from treepe_nb.train import build
    cfg = _config({**CELL_SETTINGS, "task": task_settings, "model": {"pe": pe}, "out": tempfile.gettempdir()})
    task, model = build(cfg)
    rng = random.Random(0)
    data = [task.collate(rng.sample(list(task.train), batch)) for _ in range(batches)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt, data


def _step_fn(model, opt, loss_fn):
    def step(b):
        opt.zero_grad(set_to_none=True)
        loss, count, _ = loss_fn(model, b)
        (loss / count).backward(); opt.step()
    return step


def _count_ops(model, b):
    from torch.utils._python_dispatch import TorchDispatchMode
    from treepe_nb.train import batch_loss
    class Count(TorchDispatchMode):
        ops = 0
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.ops += 1
            return func(*args, **(kwargs or {}))
    with Count():
        loss, count, _ = batch_loss(model, b); (loss / count).backward()
    return Count.ops


def _alternated(steps:dict, data:dict, rounds:int) -> dict:
    "Seconds per step of each entry, its batches run in turn, best round."
    best = {k: float("inf") for k in steps}
    for r in range(rounds + 1):                                     # round 0 warms up
        for k in (list(steps) if r % 2 else list(steps)[::-1]):
            t0 = time.perf_counter()
            for b in data[k]: steps[k](b)
            if r: best[k] = min(best[k], (time.perf_counter() - t0) / len(data[k]))
    return best


def work_steps(args):
    from treepe_nb.train import batch_loss
    out = {}
    for label, task, n in (("cell", CELL_SETTINGS["task"], 10),
                           ("for2lam_long", FOR2LAM_LONG, 1)):
        from treepe_nb.tasks import TASKS
        if task["name"] not in TASKS: out[label] = None; continue          # an older checkout: no such task
        if label == "for2lam_long" and "translation" in inspect.signature(TASKS[task["name"]]).parameters:
            task = {**task, "options": {"translation": "cps"}}             # the data every side measured
        built = {pe: _setup(pe, task, batches=n) for pe in ENCODINGS}
        steps = {pe: _step_fn(m, o, batch_loss) for pe, (m, o, d) in built.items()}
        times = _alternated(steps, {pe: d for pe, (m, o, d) in built.items()}, args.repeat)
        out[label] = {"step_s": times, "ops": {pe: _count_ops(m, d[0]) for pe, (m, o, d) in built.items()},
                      "ratio_ape_tree_to_none": times["ape-tree"] / times["none"],
                      "tokens": int(built["none"][2][0].src_mask.sum() + built["none"][2][0].tgt_mask.sum())}
    out["seconds"] = out["cell"]["step_s"]["ape-tree"]
    return out


def work_cell(args):
    from treepe_nb.experiments import run_cell
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _config({**CELL_SETTINGS, "steps": args.cell_steps, "out": str(Path(tmp) / "run")})
        t0 = time.perf_counter()
        rec = run_cell(cfg, Path(tmp) / "cell.json")
        total = time.perf_counter() - t0
    return {"seconds": total, "train_loss": rec["train_loss"], "test_exact_match": rec["test"]["exact_match"]}


def _compiled_steps(pe:str, task:dict, batches:int, repeat:int) -> dict:
    "One encoding's step, eager against `torch.compile` (inductor) on one padded shape (compiling costs minutes)."
    import torch
    from torch._dynamo.utils import counters
    from treepe_nb.train import batch_loss
    model, opt, data = _setup(pe, task, batches=1)
    data = data * batches
    compiled = torch.compile(batch_loss)
    t0 = time.perf_counter()
    _step_fn(model, opt, compiled)(data[0])                         # tracing and compiling the one shape
    first = time.perf_counter() - t0
    times = _alternated({"eager": _step_fn(model, opt, batch_loss), "compiled": _step_fn(model, opt, compiled)},
                        {"eager": data, "compiled": data}, repeat)
    out = {**{f"{k}_step_s": v for k, v in times.items()}, "first_pass_s": first,
           "graphs": int(counters["stats"]["unique_graphs"])}
    torch._dynamo.reset(); counters.clear()
    return out


def work_compile(args):
    "The chapter-10 step, and a For2Lam-long step (where compiled maps must take the doubling products), compiled."
    out = {pe: _compiled_steps(pe, CELL_SETTINGS["task"], 10, args.repeat) for pe in ("none", "ape-tree")}
    out["for2lam_long"] = {pe: _compiled_steps(pe, LONG_CPS, 2, args.repeat) for pe in ("none", "ape-tree")}
    out["seconds"] = out["ape-tree"]["compiled_step_s"]
    return out


def _best_ms(fns:dict, repeat:int, rounds:int=5) -> dict:
    "Milliseconds per call of each function (no arguments), alternated as `_alternated` does, best of `rounds` rounds."
    per_call = _alternated({k: (lambda _, f=f: f()) for k, f in fns.items()}, {k: [None] * repeat for k in fns}, rounds)
    return {k: 1e3 * s for k, s in per_call.items()}


def work_breakdown(args):
    """Where ape-tree's extra time goes on the For2Lam-long batch, forward and backward: each side's maps (as the step
    computes them, and in PyTorch calls where the CPU kernel could have walked the levels), the gather of
    its chunks' maps (once per side and step), one layer's rotation of queries and keys or of one tensor (on the
    chunks' maps, and with the compiled CPU kernel, which needs no chunks), and the naive rotation (a matrix gathered
    per token); the layout's sizes; and the steps of `none` and `ape-tree`, alternated in the same process."""
    import torch
    from treepe_nb.maps import PositionMaps, _rotate_chunks, tree_maps
    from treepe_nb.train import batch_loss
    built = {pe: _setup(pe, LONG_CPS, batches=1) for pe in ("none", "ape-tree")}
    steps = _alternated({pe: _step_fn(m, o, batch_loss) for pe, (m, o, d) in built.items()},
                        {pe: d for pe, (m, o, d) in built.items()}, args.repeat)
    model, _, (b,) = built["ape-tree"]
    out = {"step_ms": {pe: 1e3 * s for pe, s in steps.items()},
           "layers": {"encoder": model.cfg.enc_layers, "decoder": model.cfg.dec_layers}}
    for side, pos, enc in (("source", b.src_pos, model.src_encoding.module), ("target", b.tgt_pos, model.tgt_encoding.module)):
        plan, G = pos.plan, enc.generators().detach().requires_grad_()
        (_, H, d, _), (B, L) = G.shape, pos.shape
        q, k = (torch.randn(B, H, L, d, requires_grad=True) for _ in range(2))
        M = tree_maps(G, plan).detach().requires_grad_()
        node = plan.node.reshape(-1)
        Mc, lay = PositionMaps(M.detach(), plan.node, plan)._layout((B, L))   # the chunks' maps: once per side and step
        Mc = Mc.detach().requires_grad_()                           # a leaf: what each attention layer pays
        def maps(): tree_maps(G, plan).sum().backward()
        walk_kernel = "kernel" in inspect.signature(tree_maps).parameters   # a checkout whose maps may take the CPU kernel
        def maps_batched(): tree_maps(G, plan, kernel=False).sum().backward()   # the walk (or doubling) in PyTorch calls
        def gather(): PositionMaps(M, plan.node, plan)._layout((B, L))[0].sum().backward()
        def rotate_two(): _rotate_chunks(Mc, lay, (q, k)).sum().backward()
        def rotate_one(): _rotate_chunks(Mc, lay, (q,)).sum().backward()
        kernel = PositionMaps(M, plan.node, plan)                    # the compiled CPU kernel, where this checkout has one
        has_kernel = hasattr(kernel, "_use_kernel") and kernel._use_kernel()
        def kernel_two(): sum(y.sum() for y in kernel.rotate(q, k)).backward()
        def kernel_one(): kernel.rotate(q).sum().backward()
        def kernel_forward():                                       # the memory it moves: the maps once, q and k, results
            with torch.no_grad(): kernel.rotate(q, k)
        def copy_maps(): M.detach().clone()                         # this core's copy speed, for comparison
        def naive_two():                                            # a matrix per token, gathered, then one matmul each
            per_token = torch.cat([M, M.new_zeros(1, H, d, d)]).index_select(0, node.where(node >= 0, len(M)))
            x = torch.stack([q, k], -1).transpose(1, 2).reshape(-1, H, d, 2)
            (per_token @ x).sum().backward()
        times = _best_ms({"maps": maps, **({"maps_batched": maps_batched} if walk_kernel else {}), "gather": gather,
                          "rotate_two": rotate_two, "rotate_one": rotate_one, "naive_two": naive_two, **({"kernel_two": kernel_two, "kernel_one": kernel_one, "kernel_forward": kernel_forward,
                                                      "copy_maps": copy_maps} if has_kernel else {})}, 5)
        c, distinct = len(plan.into) // len(plan.chunk_map), int(node[node >= 0].unique().numel())
        out[side] = {"ms": times, "tokens": int((pos.depth >= 0).sum()),
                     "distinct_maps": distinct, "map_rows": int(plan.slot.shape[0]),   # rows: padded
                     "level_groups": len(plan.groups), "chunks": int(plan.chunks), "chunk_size": c,
                     "products_per_rotation": int(plan.chunks) * H, "heads": H, "head_dim": d,
                     "bytes": {"maps_used": distinct * H * d * d * M.element_size(),
                               "maps_all": M.numel() * M.element_size(), "q_and_k": 2 * q.numel() * q.element_size()}}
    out["seconds"] = out["step_ms"]["ape-tree"] / 1e3
    return out


def work_kernel(args):
    """The compiled CPU kernel on and off in one process: the same ape-tree model and batches, its step with the kernel
    and with the chunked product (`TREEPE_CPU_KERNELS=0`), alternated with `none`'s step, at the chapter-10 size and
    on the For2Lam-long batch."""
    from treepe_nb.train import batch_loss
    from treepe_nb.maps import cpu_kernels
    if cpu_kernels() is None: return {"seconds": None, "note": "no CPU kernel on this machine"}
    out = {}
    for label, task, n in (("cell", CELL_SETTINGS["task"], 10), ("for2lam_long", LONG_CPS, 1)):
        built = {pe: _setup(pe, task, batches=n) for pe in ("none", "ape-tree")}
        step = {pe: _step_fn(m, o, batch_loss) for pe, (m, o, d) in built.items()}
        def chunked(b):
            os.environ["TREEPE_CPU_KERNELS"] = "0"
            try: step["ape-tree"](b)
            finally: del os.environ["TREEPE_CPU_KERNELS"]
        steps = {"none": step["none"], "ape-tree, kernel": step["ape-tree"], "ape-tree, chunked": chunked}
        data = {k: built["none" if k == "none" else "ape-tree"][2] for k in steps}
        times = _alternated(steps, data, args.repeat)
        out[label] = {"step_s": times, **{f"{k} / none": times[k] / times["none"] for k in steps if k != "none"}}
    out["seconds"] = out["cell"]["step_s"]["ape-tree, kernel"]
    return out


WORKERS = {"steps": work_steps, "cell": work_cell, "compile": work_compile, "breakdown": work_breakdown, "kernel": work_kernel}
THIS_ONLY = ("compile", "breakdown", "kernel")


def _git(*a) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sides", nargs="+", default=["88f0a80", "fda6bc9", "HEAD"], help="commits to measure")
    alternate.options(ap, WORKERS, WORKERS, OUT, repeat=3)
    ap.add_argument("--conditions", default="other processes running beside it",
                    help="what else the machine ran meanwhile, stored with the results (e.g. 'the grids paused')")
    args = ap.parse_args(argv)
    if alternate.as_worker(args, WORKERS): return {}
    record = json.loads(args.out.read_text()) if args.out.exists() and args.only else {}
    head = _git("rev-parse", "--short", "HEAD")                   # measured as committed: uncommitted changes are not
    if _git("status", "--porcelain", "treepe_nb"): print("note: uncommitted changes to treepe_nb are not measured", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        roots = {s: alternate.extract(s, Path(tmp) / s) for s in args.sides}   # as committed: edits meanwhile change nothing
        for name in args.only or list(WORKERS):
            sides = ["HEAD"] if name in THIS_ONLY else args.sides
            runs = {s: [] for s in sides}
            for r in range(args.rounds if name not in THIS_ONLY else 1):
                for side in (sides if r % 2 == 0 else sides[::-1]):
                    runs[side].append(alternate.run_worker(__file__, roots[side], name, args))
                    print(name, side, json.dumps({k: v for k, v in runs[side][-1].items() if k != "train_loss"})[:400],
                          file=sys.stderr, flush=True)
            record[name] = {"runs": {(head if s == "HEAD" else s): v for s, v in runs.items()}, "conditions": args.conditions,
                            "median_seconds": {(head if s == "HEAD" else s): statistics.median(x["seconds"] for x in v)
                                               for s, v in runs.items()},
                            "settings": {"rounds": args.rounds, "repeat": args.repeat, "cell_steps": args.cell_steps,
                                         "measured": datetime.datetime.now().isoformat(timespec="seconds")}}
    record["machine"] = {"cpu_threads": os.cpu_count(), "python": platform.python_version(), "torch_threads": 1,
                         "load_average_1min": round(os.getloadavg()[0], 2),
                         "measured": datetime.datetime.now().isoformat(timespec="seconds")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__": main()
