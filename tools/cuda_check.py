"""The library on a CUDA device, measured (issue "Throughput"; chapter 11 reads the result): written for a session that
is lent a GPU, since CI and the development machine have none.

    python tools/cuda_check.py --out nbs/results/benchmarks/cuda/cuda_check.json

Measurements, each on the GPU with `torch.cuda.synchronize` around the clock:
* `paper_step`: one forward + backward + fused AdamW step at the APE paper's size (as `tools/throughput.py`), in
  float32 and under bf16 autocast (`amp: cuda`), for ape-tree, stack and none; FLOPs from `torch.utils.flop_counter`,
  against a bf16 and a float32 (TF32 off) 8192^3 matrix product on the same card (the peak);
* `decode`: greedy `generate` at batch 1 of that model (ape-tree, untrained, nudged to grow 64-node trees);
* `cell`: chapter 10's measured cell (`throughput.CELL_SETTINGS`) trained end to end with `train` on the GPU.
"""
from __future__ import annotations

import argparse, datetime, json, platform, sys, tempfile, time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput                                             # the same model, batch and cell as the CPU measurements


def _clock(f, repeat):
    "Best wall time of `repeat` calls of `f` after one warm-up call, the GPU synchronised around each."
    f(); torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter(); f(); torch.cuda.synchronize(); best = min(best, time.perf_counter() - t0)
    return best


def peak(dtype, n=8192, repeat=5):
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    return 2 * n ** 3 / _clock(lambda: a @ a, repeat) / 1e12


def paper_step(pe, amp, repeat):
    from torch.utils.flop_counter import FlopCounterMode
    from treepe_nb.train import amp_context, batch_loss
    task, model, b = throughput._paper(pe=pe)
    model, b = model.cuda(), b.to("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    def step():
        opt.zero_grad(set_to_none=True)
        with amp_context(amp, "cuda"): loss, count, _ = batch_loss(model, b)
        (loss / count).backward(); opt.step()
    seconds = _clock(step, repeat)
    with FlopCounterMode(display=False) as fc, amp_context(amp, "cuda"):
        loss, count, _ = batch_loss(model, b); (loss / count).backward()
    return {"seconds": seconds, "flops": fc.get_total_flops(), "tflops": fc.get_total_flops() / seconds / 1e12}


def decode(repeat):
    task, model, b = throughput._paper(batch=1)
    model, b = model.cuda().eval(), b.to("cuda")
    grow = 20.0 * (torch.as_tensor(task.tgt_vocab.arity, device="cuda") == 2).float()
    model.generator.register_forward_hook(lambda m, a, out: out + grow.to(out.dtype))
    out = []
    def run():
        with torch.no_grad(): out[:] = model.generate(b.src_ids, b.src_pos, task.tgt_vocab, "dfs", max_output_nodes=64)
    seconds = _clock(run, repeat)
    tokens = sum(len(o) for o in out)
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}


def cell():
    from treepe_nb.train import TrainConfig, train
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig.from_dict({**throughput.CELL_SETTINGS, "steps": 1000, "device": "cuda", "out": tmp + "/run"})
        t0 = time.perf_counter(); summary = train(cfg, progress=False); torch.cuda.synchronize()
        return {"seconds": time.perf_counter() - t0, "dev_exact_match": summary["dev"]["exact_match"],
                "amp": cfg.amp}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="+", choices=["paper_step", "decode", "cell"], help="some measurements only")
    args = ap.parse_args(argv)
    only = set(args.only or ["paper_step", "decode", "cell"])
    if not torch.cuda.is_available(): sys.exit("no CUDA device: this script measures the library on a GPU")
    torch.backends.cuda.matmul.allow_tf32 = False             # float32 means float32 (torch's default)
    rec = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "python": platform.python_version(),
           "measured": datetime.datetime.now().isoformat(timespec="seconds"),
           "peak_tflops": {"bf16": peak(torch.bfloat16), "fp32": peak(torch.float32)}}
    print(rec, flush=True)
    if "paper_step" in only:
        rec["paper_step"] = {f"{pe}-{amp}": paper_step(pe, amp, args.repeat)
                             for pe in ("ape-tree", "stack", "none") for amp in ("off", "cuda")}
        print(rec["paper_step"], flush=True)
    if "decode" in only: rec["decode"] = decode(args.repeat); print(rec["decode"], flush=True)
    if "cell" in only: rec["cell"] = cell(); print(rec["cell"], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1) + "\n")


if __name__ == "__main__": main()
