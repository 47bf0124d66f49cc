"""ape-tree at the cost of `none` on an NVIDIA GPU (issue 34's GPU targets): one prepared script, one call, for a
session that is lent a GPU (CI and the development machine have none). Results go to
`nbs/results/benchmarks/cuda/ape_cost.json`.

    python tools/cuda_ape_cost.py                     # on a CUDA machine
    python tools/cuda_ape_cost.py --device cpu --repeat 1 --batch 4 --out /tmp/dry.json   # a dry run on the CPU

At the APE paper's size (d_model 512, 8 heads, 2 + 2 layers, 64 tree-copy trees; `throughput._paper`), for `none`,
`stack` and `ape-tree`, one training step (forward, backward, fused AdamW), best of `--repeat`:
* eager in float32 (TF32 off), float32 with TF32 matmuls, and bf16 autocast;
* `torch.compile(mode="reduce-overhead")` (CUDA graphs) of the forward in bf16: whether it runs, and its step time;
* host-device synchronisations per step: `cudaStreamSynchronize`, `cudaDeviceSynchronize` and device-to-host copies
  counted by the profiler (the targets: at most 2 per step);
* the step's FLOPs (`torch.utils.flop_counter`) and the achieved TFLOP/s beside the card's measured peak (an 8192^3
  product in bf16 and in float32).
"""
from __future__ import annotations

import argparse, contextlib, datetime, json, sys, time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput                                             # the paper-size model and batch of the CPU measurements

ROOT = Path(__file__).resolve().parent.parent
ENCODINGS = ("none", "stack", "ape-tree")


def _sync(device):
    if device.type == "cuda": torch.cuda.synchronize(device)


def _best(f, repeat, device):
    f(); _sync(device)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); f(); _sync(device); times.append(time.perf_counter() - t0)
    return min(times)


def _peak(device, dtype, n=8192):
    a = torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n ** 3 / _best(lambda: a @ a, 3, device) / 1e12


def _syncs(step, device) -> int:
    "Host-device synchronisations of one step, from the profiler's CUDA runtime calls."
    from torch.profiler import profile, ProfilerActivity
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as p: step(); _sync(device)
    if device.type == "cuda":                                         # the runtime calls that wait for the stream
        return sum(e.count for e in p.key_averages() if e.key in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy"))
    return sum(e.count for e in p.key_averages() if e.key == "aten::_local_scalar_dense")   # a dry run: values read


def measure(pe, device, repeat, trees=64):
    from torch.utils.flop_counter import FlopCounterMode
    from treepe_nb.train import batch_loss
    task, model, batch = throughput._paper(pe, trees)
    model, batch = model.to(device), batch.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if device.type == "cuda" else {}))
    def make(loss_fn, amp):
        def step():
            opt.zero_grad(set_to_none=True)
            with amp: loss, count, _ = loss_fn(model, batch)
            (loss / count).backward(); opt.step()
        return step
    bf16 = lambda: torch.autocast(device.type, torch.bfloat16)
    out = {}
    for name, tf32, amp in (("float32", False, contextlib.nullcontext()), ("tf32", True, contextlib.nullcontext()),
                            ("bf16", False, bf16())):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        out[f"{name}_step_s"] = _best(make(batch_loss, amp), repeat, device)
    torch.backends.cuda.matmul.allow_tf32 = False
    out["syncs_per_step"] = _syncs(make(batch_loss, bf16()), device)
    with FlopCounterMode(display=False) as fc:
        loss, count, _ = batch_loss(model, batch); (loss / count).backward()
    out["flops"] = fc.get_total_flops()
    out["tflops_bf16"] = out["flops"] / out["bf16_step_s"] / 1e12
    try:
        compiled = torch.compile(batch_loss, mode="reduce-overhead" if device.type == "cuda" else "default")
        out["graphs_bf16_step_s"] = _best(make(compiled, bf16()), repeat, device)
        out["graphs_error"] = None
    except Exception as e:                                          # noqa: BLE001 - reported, not hidden
        out["graphs_bf16_step_s"], out["graphs_error"] = None, f"{type(e).__name__}: {str(e)[:300]}"
    torch._dynamo.reset()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64, help="trees per batch (64: the paper's; fewer for a dry run)")
    ap.add_argument("--out", type=Path, default=ROOT / "nbs/results/benchmarks/cuda/ape_cost.json")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    rows = {pe: measure(pe, device, args.repeat, args.batch) for pe in ENCODINGS}
    for pe, r in rows.items():
        r["ratio_to_none_bf16"] = r["bf16_step_s"] / rows["none"]["bf16_step_s"]
        r["ratio_to_none_float32"] = r["float32_step_s"] / rows["none"]["float32_step_s"]
    record = {"encodings": rows, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "peak_tflops": {"bf16": _peak(device, torch.bfloat16, 8192 if device.type == "cuda" else 512),
                              "float32": _peak(device, torch.float32, 8192 if device.type == "cuda" else 512)},
              "torch": torch.__version__, "measured": datetime.datetime.now().isoformat(timespec="seconds")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__": main()
