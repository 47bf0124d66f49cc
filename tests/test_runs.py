"""Run folders under stress (issue: reliability of the training command): a kill -9 at a random moment, SIGTERM and
Ctrl-C, two runs on one folder, a new run over an old one, a torn metrics line, a read-only folder, and options
that must be refused with a one-line error naming them."""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from treepe_nb.cli import eval_cli, train_cli
from treepe_nb.runs import load_checkpoint

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
BASE = ["--sizes", "96", "8", "8", "--steps", "60", "--batch-size", "16", "--d-model", "16", "--dropout", "0.1",
        "--eval-every", "30", "--eval-examples", "2", "--checkpoint-every", "5", "--no-progress", "--device", "cpu",
        "--threads", "1"]


def start(*args):
    return subprocess.Popen([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def cli(*args):
    p = start(*args)
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err


def weights(run):
    return load_checkpoint(Path(run) / "last.pt")["model"]


def same_weights(a, b):
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def lines(run):
    path = Path(run) / "metrics.jsonl"
    return path.read_text().count("\n") if path.exists() else 0


def stop_after(run, proc, records, sig):
    "Send `sig` to `proc` once `run` has `records` metric lines (or the run ended)."
    deadline = time.time() + 120
    while lines(run) < records and proc.poll() is None and time.time() < deadline: time.sleep(0.02)
    if proc.poll() is None: proc.send_signal(sig)
    return proc.communicate(timeout=120)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    "An uninterrupted run (dropout on): the reference every interrupted run must reproduce exactly."
    run = tmp_path_factory.mktemp("whole") / "run"
    code, out, err = cli(*BASE, "--out", str(run))
    assert code == 0, err
    return run


@pytest.mark.parametrize("when", ["before the first checkpoint", "at a random moment"])
def test_kill_9_at_a_random_moment_then_resume_is_exact(whole, tmp_path, when):
    run = tmp_path / "run"
    at = 2 if when.startswith("before") else random.Random().randint(3, 55)      # records written before the kill
    stop_after(run, start(*BASE, "--out", str(run)), at, signal.SIGKILL)
    code, out, err = cli("--resume", "--out", str(run), "--no-progress")
    assert code == 0, (at, err)
    assert json.loads(out)["step"] == 60
    assert same_weights(run, whole), f"killed after {at} records"
    assert [json.loads(l)["step"] for l in (run / "metrics.jsonl").read_text().splitlines()] == \
        [json.loads(l)["step"] for l in (whole / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_saves_at_a_step_boundary_and_exits_130(whole, tmp_path, sig):
    run = tmp_path / "run"
    out, err = stop_after(run, p := start(*BASE, "--out", str(run)), 20, sig)
    assert p.returncode == 130, err
    said = [l for l in err.strip().splitlines() if not l.startswith("tree-copy (dfs): ")]      # after the start-of-run line
    assert "Traceback" not in err and len(said) == 1, err
    assert f"{sig.name} at step" in err and "--resume" in err
    code, out, err = cli("--resume", "--out", str(run), "--no-progress")
    assert code == 0 and same_weights(run, whole), err


def test_two_runs_cannot_share_a_folder(tmp_path):
    run = tmp_path / "run"
    first = start(*BASE, "--steps", "400", "--out", str(run))
    deadline = time.time() + 120
    while not (run / ".lock").exists() and time.time() < deadline: time.sleep(0.02)
    code, out, err = cli(*BASE, "--out", str(run), "--overwrite")
    first.send_signal(signal.SIGTERM); first.communicate(timeout=120)
    assert code == 2 and "is in use by process" in err and "one run per folder" in err, err
    assert not (run / ".lock").exists()                                       # released by the first run


def test_a_new_run_does_not_replace_an_old_one(whole, tmp_path, capsys):
    with pytest.raises(SystemExit) as e: train_cli([*BASE, "--out", str(whole)])
    assert e.value.code == 2 and "already holds a run" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e: train_cli(["--resume", "--out", str(tmp_path / "none")])
    assert e.value.code == 2 and "no run to continue" in capsys.readouterr().err


def test_resume_refuses_changes_to_the_model_and_data(whole, capsys):
    for option, value, name in (("--d-model", "32", "model.d_model"), ("--task", "tree-rotate", "task.name"),
                                ("--seed", "3", "task.seed"), ("--lr", "0.1", "lr")):
        with pytest.raises(SystemExit) as e: train_cli(["--resume", "--out", str(whole), option, value])
        err = capsys.readouterr().err
        assert e.value.code == 2 and name in err, err
    assert load_checkpoint(whole / "last.pt")["step"] == 60                   # nothing was touched


def test_resume_skips_a_torn_last_metrics_line(whole, tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    with open(run / "metrics.jsonl", "a") as f: f.write('{"step": 61, "spl')   # a run killed while writing
    code, out, err = cli("--resume", "--out", str(run), "--steps", "62", "--no-progress")
    assert code == 0, err
    rows = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"][-3:] == [60, 61, 62]


def test_eval_of_a_read_only_folder_prints_its_result(whole, tmp_path, capsys, monkeypatch):
    import shutil
    run = tmp_path / "ro"
    shutil.copytree(whole, run)
    os.chmod(run, 0o555)
    if os.access(run, os.W_OK):                                  # root writes anywhere: make the write fail as it would
        import treepe_nb.train
        write = treepe_nb.train.write_run_file
        def refuse(path, *a, **k):
            if Path(path).name.startswith("eval_"): raise PermissionError(13, "Permission denied", str(path))
            return write(path, *a, **k)
        monkeypatch.setattr(treepe_nb.train, "write_run_file", refuse)
    try:
        eval_cli([str(run), "--split", "dev", "--device", "cpu"])
        out, err = capsys.readouterr()
        assert json.loads(out)["decoded"] == 8 and "could not write" in err and "Permission denied" in err
    finally:
        os.chmod(run, 0o755)


@pytest.mark.parametrize("argv, message", [
    (["--clip", "-1"], "clip must be in [0"),
    (["--clip", "nan"], "clip must be a finite number"),
    (["--lr", "inf"], "lr must be a finite number"),
    (["--label-smoothing", "1.5"], "label_smoothing must be in [0, 1)"),
    (["--label-smoothing", "-0.1"], "label_smoothing must be in [0, 1)"),
    (["--threads", "-1"], "threads must be in [1"),
    (["--device", "xyz"], "device must be auto, cpu, cuda"),
    (["--d-ff", "-5"], "d_ff must be in [1"),
    (["--task-option", "depth_mean"], "expected KEY=VALUE"),
])
def test_options_out_of_range_are_one_line_errors(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as e: train_cli([*argv, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize("text, message", [
    ("steps: 2.5\n", "steps must be an integer, got 2.5"),
    ("steps: .inf\n", "steps must be an integer"),
    ("lr: 3e-3\n", "YAML reads 3e-3 as text"),
    ("model: {pe: null}\n", "unknown positional encoding None"),
    ("out: 123\n", "out must be a folder name"),
    ("stpes: 3\n", "unknown settings stpes"),
])
def test_config_values_are_checked(tmp_path, capsys, text, message):
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(SystemExit) as e: train_cli(["--config", str(tmp_path / "c.yaml")])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_a_folder_given_as_config(tmp_path, capsys):
    with pytest.raises(SystemExit): train_cli(["--config", str(tmp_path)])
    assert "a folder, not a file" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--batch-size", "0"], "must be >= 1"), (["--batch-size", "-1"], "must be >= 1"),
    (["--eval-examples", "-5"], "must be >= 0"), (["--beam", "0"], "must be >= 1"),
])
def test_eval_options_are_checked(whole, capsys, argv, message):
    with pytest.raises(SystemExit) as e: eval_cli([str(whole), *argv])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_eval_without_best_checkpoint_points_to_last(whole, tmp_path, capsys):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    (run / "best.pt").unlink()
    with pytest.raises(SystemExit): eval_cli([str(run)])
    assert "--checkpoint last" in capsys.readouterr().err


def test_config_files_are_read_with_the_bounded_reader(tmp_path, capsys):
    "A merge-key bomb or a 100k-deep nesting in --config is refused quickly with a one-line error."
    bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10))   # 9**10 nodes once expanded
    deep = "steps: " + "[" * 100_000 + "]" * 100_000 + "\n"
    for name, text, message in (("bomb.yaml", bomb, "max_nodes"), ("deep.yaml", deep, "max_nesting")):
        (tmp_path / name).write_text(text)
        t0 = time.perf_counter()
        with pytest.raises(SystemExit) as e: train_cli(["--config", str(tmp_path / name)])
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err and "Traceback" not in err, err
        assert time.perf_counter() - t0 < 30
