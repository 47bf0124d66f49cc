"""Training and evaluation: a tiny model learns tree-copy, resuming is exact, two `torchrun` processes follow one, and
the command line works end to end. Small models and few steps: the module takes about a minute on 2 cores."""
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from treepe_nb.model import ModelConfig
from treepe_nb.tasks import TaskConfig
from treepe_nb.cli import config_from_args, eval_cli, train_cli
from treepe_nb.runs import load_checkpoint, read_metrics, save_checkpoint
from treepe_nb.train import TrainConfig, train

SMALL_TASK = TaskConfig(sizes=(512, 32, 32), options={"depth_mean": 3.0, "depth_std": 0.3})


pytestmark = pytest.mark.usefixtures("one_thread")      # conftest.py


def losses(run):
    return [r["loss"] for r in read_metrics(run)[0]]


def test_tiny_model_learns_tree_copy_exactly(tmp_path):
    summary = train(TrainConfig(SMALL_TASK, ModelConfig(pe="stack"), steps=150, warmup=30, eval_every=0, eval_examples=0,
                                out=str(tmp_path)), progress=False)
    assert summary["dev"]["decoded"] == 32
    assert summary["dev"]["exact_match"] == 1.0, summary


def test_amp_all_trains_under_cpu_autocast(tmp_path, monkeypatch):
    "amp: all puts every training forward pass (not the evaluations) under bf16 autocast on the CPU; the default does not."
    import treepe_nb.train as T
    seen, real = [], T.batch_loss
    def spy(model, *a, **k):
        if model.training: seen.append(torch.is_autocast_enabled("cpu"))
        return real(model, *a, **k)
    monkeypatch.setattr(T, "batch_loss", spy)
    for amp in ("all", "cuda"):
        seen.clear()
        out = tmp_path / amp
        summary = train(TrainConfig(TaskConfig(sizes=(32, 8, 8)), ModelConfig(pe="ape-tree", d_model=16), steps=3,
                                    eval_examples=2, amp=amp, device="cpu", out=str(out)), progress=False)
        assert seen == [amp == "all"] * 3, (amp, seen)
        assert all(map(math.isfinite, losses(out))) and summary["step"] == 3
        assert TrainConfig.from_dict(yaml.safe_load((out / "config.yaml").read_text())).amp == amp


def test_resume_equals_uninterrupted(tmp_path):
    cfg = dict(task=TaskConfig(sizes=(96, 8, 8)), model=ModelConfig(pe="ape-tree", dropout=0.1, d_model=32), steps=30,
               eval_every=10, eval_examples=2, batch_size=16)
    train(TrainConfig(**cfg, out=str(tmp_path / "whole")), progress=False)
    part = tmp_path / "part"
    train(TrainConfig(**cfg, out=str(part)), progress=False, stop_at=17)        # stopped between evaluations
    assert load_checkpoint(part / "last.pt")["step"] == 17
    train(TrainConfig(**cfg, out=str(part)), progress=False, resume=True)
    assert losses(part) == losses(tmp_path / "whole")
    assert read_metrics(part)[1] == read_metrics(tmp_path / "whole")[1]


@pytest.mark.long   # several trainings in subprocesses: run by --long (CI)
def test_two_processes_follow_one(tmp_path):
    args = ["--sizes", "64", "8", "8", "--steps", "6", "--batch-size", "16", "--d-model", "32", "--dropout", "0",
            "--eval-every", "0", "--eval-examples", "2", "--no-progress", "--device", "cpu", "--threads", "1"]
    script = tmp_path / "train_script.py"
    script.write_text("from treepe_nb.cli import train_cli\ntrain_cli()\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(script), *args, "--out", str(tmp_path / "one")], check=True, env=env,
                   capture_output=True, text=True)
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          str(script), *args, "--out", str(tmp_path / "two")], env=env, capture_output=True, text=True)
    assert two.returncode == 0, two.stderr[-3000:]
    one_l, two_l = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert len(one_l) == len(two_l) == 6
    assert max(abs(a - b) / a for a, b in zip(one_l, two_l)) < 1e-5, (one_l, two_l)


@pytest.mark.long   # several trainings in subprocesses: run by --long (CI)
def test_command_line_end_to_end(tmp_path):
    for cmd in ("treepe-train", "treepe-eval"):
        exe = shutil.which(cmd)
        assert exe, f"{cmd} is not installed (pip install -e .)"
        assert "usage: " + cmd in subprocess.run([exe, "--help"], capture_output=True, text=True, check=True).stdout
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("task: {name: seq-reverse, sizes: [64, 8, 8]}\nmodel: {pe: rotary}\nsteps: 200\n")
    run = tmp_path / "run"
    out = subprocess.run([shutil.which("treepe-train"), "--config", str(cfg), "--steps", "4", "--d-model", "16",
                          "--task-option", "length_mean=6", "--task-option", "length_std=1", "--eval-examples", "2",
                          "--out", str(run)], capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["step"] == 4                                          # the command line beat the file
    stored = load_checkpoint(run)["config"]
    assert (stored["task"]["name"], stored["model"]["pe"], stored["model"]["d_model"], stored["task"]["options"]) == \
        ("seq-reverse", "rotary", 16, {"length_mean": 6, "length_std": 1})
    res = subprocess.run([shutil.which("treepe-eval"), str(run), "--split", "test", "--device", "cpu"],
                         capture_output=True, text=True, check=True)
    printed = json.loads(res.stdout)
    assert printed == json.loads((run / "eval_test.json").read_text())
    assert set(printed) >= {"perplexity", "token_accuracy", "exact_match"} and printed["decoded"] == 8


@pytest.mark.parametrize("argv, message", [
    (["--task", "tree-copi"], "invalid choice: 'tree-copi'"),
    (["--pe", "tree"], "invalid choice: 'tree'"),
    (["--task", "seq-copy", "--pe", "ape-tree", "--steps", "1"], "which the 'ape-tree' encoding cannot read"),
    (["--steps", "0"], "steps must be in [1"),
    (["--task-option", "depth_mean"], "expected KEY=VALUE"),
])
def test_command_line_errors_name_the_option(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as e: train_cli([*argv, "--out", str(tmp_path / "r"), "--sizes", "8", "4", "4"])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_eval_errors(tmp_path, capsys):
    with pytest.raises(SystemExit): eval_cli([str(tmp_path)])
    assert "is not a run folder" in capsys.readouterr().err
    (tmp_path / "config.yaml").write_text("task: tree-copy\n")
    (tmp_path / "best.pt").write_bytes(b"\0" * 10)
    with pytest.raises(SystemExit): eval_cli([str(tmp_path)])
    assert "corrupt or not a treepe_nb checkpoint" in capsys.readouterr().err


def test_config_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tsk: tree-copy\n")
    with pytest.raises(SystemExit): config_from_args(["--config", str(bad)])
    with pytest.raises(SystemExit): config_from_args(["--config", str(tmp_path / "missing.yaml")])


def test_old_flat_checkpoint_still_evaluates(tmp_path, capsys):
    "A run folder written before the config spine (flat config, `src_pe.`/`tgt_pe.` module keys) still loads."
    run = tmp_path / "run"
    train(TrainConfig(TaskConfig(sizes=(32, 8, 8)), ModelConfig(pe="stack", d_model=16), steps=2, eval_examples=2,
                      out=str(run)), progress=False)
    ck = load_checkpoint(run / "best.pt")
    ck["config"] = {"task": "tree-copy", "pe": "stack", "order": "dfs", "sizes": [32, 8, 8], "task_options": None,
                    "seed": 0, "d_model": 16, "num_heads": 4, "enc_layers": 2, "dec_layers": 2, "d_ff": None,
                    "dropout": 0.0, "steps": 2, "max_nodes": 256, "eval_examples": 2, "out": str(run)}
    ck["model"] = {k.replace("src_encoding.", "src_pe.").replace("tgt_encoding.", "tgt_pe."): v
                   for k, v in ck["model"].items()}
    assert any(k.startswith("src_pe.") for k in ck["model"])
    save_checkpoint(run / "best.pt", **ck)
    eval_cli([str(run), "--split", "dev", "--device", "cpu"])
    assert json.loads(capsys.readouterr().out)["decoded"] == 8


def test_plot_run_from_a_fresh_interpreter(tmp_path):
    "`plot_run` imports what it draws with: it works outside the notebook that defines it."
    run = tmp_path / "run"
    train(TrainConfig(TaskConfig(sizes=(32, 8, 8)), ModelConfig(pe="stack", d_model=16), steps=2, eval_examples=2,
                      out=str(run)), progress=False)
    code = f"from treepe_nb.report import plot_run; ax = plot_run({str(run)!r}); print(len(ax[0].lines))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "MPLBACKEND": "Agg"})
    assert res.returncode == 0 and res.stdout.strip() == "1", res.stderr[-2000:]


def test_readme_config_file_example_is_valid(tmp_path):
    "The config file shown in the README (task:/model: sections) reads into the configuration it describes."
    import re
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", readme, re.S).group(1)
    (tmp_path / "run.yaml").write_text(block)
    cfg, _ = config_from_args(["--config", str(tmp_path / "run.yaml")])
    assert (cfg.task.name, cfg.task.order, cfg.task.preset, cfg.model.decay, cfg.model.tie_embeddings, cfg.steps) == \
        ("tree-rotate", "bfs", "paper", 0.98, True, 5000)


def test_a_config_file_with_sections_trains(tmp_path, capsys):
    "A config file with task: and model: sections, every model option reachable (decay, cross_positions, tied embeddings)."
    cfg = tmp_path / "run.yaml"
    cfg.write_text("task: {name: tree-copy, sizes: [32, 8, 8], order: bfs}\n"
                   "model: {pe: ape-tree, d_model: 16, decay: 0.98, cross_positions: false, tie_embeddings: true,\n"
                   "        activation: relu, d_ff: 24, max_distance: 4}\n"
                   "steps: 3\neval_examples: 2\n")
    train_cli(["--config", str(cfg), "--out", str(tmp_path / "run"), "--no-progress"])
    assert json.loads(capsys.readouterr().out)["step"] == 3
    stored = load_checkpoint(tmp_path / "run")["config"]
    assert stored["model"] | {} == {**stored["model"], "decay": 0.98, "cross_positions": False, "tie_embeddings": True,
                                    "activation": "relu", "d_ff": 24, "max_distance": 4}
    assert stored["task"]["order"] == "bfs"
