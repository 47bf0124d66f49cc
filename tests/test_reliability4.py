"""Reliability, round 4 (issue "Reliability, round 4"): a run folder runs no code, kernel builds cannot hang or clobber
each other; one test each, each seen to fail before its fix."""
import os, subprocess, sys
from pathlib import Path

import pytest
import torch

from treepe_nb.runs import load_checkpoint

MARKER = '''from pathlib import Path
Path(__file__).with_name("MARKER").write_text("ran")
'''
TINY = ["--task", "tree-copy", "--steps", "3", "--eval-every", "0", "--d-model", "16",
        "--num-heads", "2", "--enc-layers", "1", "--dec-layers", "1", "--batch-size", "4", "--sizes", "16", "4", "4",
        "--pe", "stack", "--no-progress"]
COMMANDS = {"train": "from treepe_nb.cli import train_cli as c", "eval": "from treepe_nb.cli import eval_cli as c",
            "predict": "from treepe_nb.predict import predict_cli as c"}


def command(name, *args, cwd, stdin=""):
    done = subprocess.run([sys.executable, "-c", f"{COMMANDS[name]}; c()", *args], cwd=cwd, capture_output=True,
                          text=True, input=stdin, timeout=300, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    return done


@pytest.fixture(scope="module")
def marked_run(tmp_path_factory):
    "A run trained with `--import marker_of_round4`, a module that leaves a MARKER file beside it when it runs."
    root = tmp_path_factory.mktemp("trust")
    (root / "marker_of_round4.py").write_text(MARKER)
    done = command("train", *TINY, "--import", "marker_of_round4", "--out", "runs/m", cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (root / "MARKER").exists()
    return root


# 1. a run folder is data: no command imports what it names unless the user names it again
@pytest.mark.parametrize("name, args", [("predict", ["runs/m", "-"]), ("eval", ["runs/m"]),
                                        ("train", ["--resume", "--out", "runs/m", "--steps", "4", "--no-progress"])])
def test_no_command_imports_what_a_run_names(marked_run, name, args):
    (marked_run / "MARKER").unlink(missing_ok=True)
    done = command(name, *args, cwd=marked_run, stdin="(1 (2 3))\n")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "needs the module 'marker_of_round4'" in done.stderr and "--import marker_of_round4" in done.stderr, done.stderr
    assert not (marked_run / "MARKER").exists()
    done = command(name, *args, "--import", "marker_of_round4", cwd=marked_run, stdin="(1 (2 3))\n")   # named: allowed
    assert done.returncode == 0, done.stderr[-2000:]
    assert (marked_run / "MARKER").exists()


def test_a_checkpoint_alone_runs_no_code(marked_run, tmp_path):
    "A checkpoint forged to name `this` (whose import prints the Zen of Python), its config.yaml left alone."
    import shutil
    run = tmp_path / "run"
    shutil.copytree(marked_run / "runs/m", run)                   # a copy: the other tests read the fixture's run
    ck = load_checkpoint(run / "last.pt")
    ck["config"]["imports"] = ["this"]
    torch.save(ck, run / "last.pt")
    done = command("eval", str(run), "--checkpoint", "last", "--import", "marker_of_round4", cwd=marked_run)
    assert done.returncode == 2 and "needs the module 'this'" in done.stderr, done.stderr[-2000:]
    assert "Beautiful is better than ugly" not in done.stdout + done.stderr


def test_run_and_load_run_take_imports(marked_run):
    from treepe_nb.predict import load_run
    sys.modules.pop("marker_of_round4", None)                      # as in a fresh process
    with pytest.raises(ValueError, match="--import marker_of_round4"): load_run(marked_run / "runs/m", "best")
    sys.path.insert(0, str(marked_run))
    try: assert load_run(marked_run / "runs/m", "best", imports=["marker_of_round4"]).step >= 3
    finally: sys.path.remove(str(marked_run))


# 3. one build folder per environment and source
def test_the_build_folder_is_keyed_by_the_torch_installation(monkeypatch):
    from treepe_nb import kernels
    here = kernels.kernel_build_dir()
    monkeypatch.setattr(torch, "__version__", "0.0.0+another")
    assert kernels.kernel_build_dir() != here and kernels.kernel_build_dir().parent == here.parent
    monkeypatch.undo()
    monkeypatch.setattr(kernels, "_CPU_SOURCE", kernels._CPU_SOURCE + "// changed\n")
    assert kernels.kernel_build_dir() != here


# 5. a run folder's files that are pipes or devices are refused at once (a FIFO made them hang; /dev/zero ran out of memory)
@pytest.mark.parametrize("name", ["vocab.json", "best.pt", "config.yaml"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_run_files_that_are_not_regular_files_are_refused(marked_run, tmp_path, name, kind):
    import os, shutil
    run = tmp_path / "run"
    shutil.copytree(marked_run / "runs/m", run)
    (run / name).unlink()
    if kind == "fifo": os.mkfifo(run / name)
    else: (run / name).symlink_to("/dev/zero")
    done = command("predict", str(run), "-", "--import", "marker_of_round4", cwd=marked_run, stdin="(1 (2 3))\n")
    assert done.returncode == 2 and "not a regular file" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]


# 9. a module named by --import that raises anything is a one-line error naming it
@pytest.mark.parametrize("body, kind", [("raise RuntimeError('broken on purpose')\n", "RuntimeError"),
                                        ("def f(:\n", "SyntaxError"), ("undefined_name\n", "NameError")])
def test_an_import_that_raises_is_a_one_line_error(tmp_path, body, kind):
    (tmp_path / "bad_module.py").write_text(body)
    done = command("train", "--import", "bad_module", "--steps", "1", cwd=tmp_path)
    assert done.returncode == 2 and f"importing 'bad_module' failed: {kind}" in done.stderr, done.stderr[-1500:]
    assert "Traceback" not in done.stderr


# 10. k8s-keys refuses a share of masked keys outside (0, 1]
@pytest.mark.parametrize("value", [2.0, 0, -0.5])
def test_k8s_keys_refuses_a_mask_prob_outside_0_1(value):
    from treepe_nb.tasks import TaskConfig, make_task
    with pytest.raises(ValueError, match=r"mask_prob is the share of keys masked: a number in \(0, 1\]"):
        make_task(TaskConfig("k8s-keys", options={"mask_prob": value}))


# 7. a grid runner killed with -9 leaves no worker behind (it trained on for 19+ minutes, holding the caller's pipes)
def test_a_killed_grid_runner_leaves_no_worker(tmp_path):
    import os, signal, time
    def children(pid):
        found = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try: stat = (d / "stat").read_text()
                except OSError: continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid: found.append(int(d.name))
        return found
    runner = subprocess.Popen([sys.executable, "-c", "from treepe_nb.experiments import experiments_cli; experiments_cli()",
                               "run", "table2a", "--only", "seq-copy-dfs-sinusoidal-s0", "--jobs", "1", "--results",
                               str(tmp_path / "results"), "--dirty", "a test of the runner", "--work",
                               str(tmp_path / "work"), "--set", "steps=100000", "--set", "eval_every=0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        start = time.monotonic()
        while not list((tmp_path / "work").rglob("config.yaml")) and time.monotonic() - start < 120: time.sleep(0.2)
        workers = [p for p in children(runner.pid) if "python" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
        assert workers, "no worker started"
        time.sleep(2)                                              # training
        runner.send_signal(signal.SIGKILL); runner.wait()
        def running(p):                                            # a zombie (ended, not yet reaped) does not count
            try: return Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError: return False
        start = time.monotonic()
        while any(map(running, workers)) and time.monotonic() - start < 60: time.sleep(0.5)
        alive = [p for p in workers if running(p)]
        assert not alive, f"workers {alive} outlived their runner by {time.monotonic() - start:.0f} s"
        assert list((tmp_path / "work").rglob("last.pt")), "the stopped cell saved nothing to resume from"
    finally:                                                       # a worker left by a failure: ended here
        for p in {*workers, *children(runner.pid)}:
            try: os.kill(p, signal.SIGKILL)
            except ProcessLookupError: pass
        if runner.poll() is None: runner.kill()


# 10. positions on another device than the ids: a ValueError naming both (a torch RuntimeError before)
def test_positions_on_another_device_are_named(marked_run):
    from treepe_nb.runs import Run
    from treepe_nb.trees import Tree, batch_positions
    sys.path.insert(0, str(marked_run))
    try: model = Run(marked_run / "runs/m", imports=["marker_of_round4"]).model
    finally: sys.path.remove(str(marked_run))
    ids = torch.tensor([[4, 5]])
    pos = batch_positions([Tree.from_sexpr("(1 2)")])
    with pytest.raises(ValueError, match="src_pos is on meta but src_ids on cpu"): model(ids, pos.to("meta"), ids, pos)
    with pytest.raises(ValueError, match="tgt_pos is on meta but tgt_ids on cpu"): model(ids, pos, ids, pos.to("meta"))


# 9. treepe-predict: options after the file, and a full disk
def test_predict_takes_options_after_the_file_and_reports_a_full_disk(marked_run, tmp_path):
    (tmp_path / "in.txt").write_text("(1 2)\n")
    done = command("predict", "runs/m", "--format", "sexpr", str(tmp_path / "in.txt"), "--import", "marker_of_round4", cwd=marked_run)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.stderr[-1500:]
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", f"{COMMANDS['predict']}; c()", "runs/m", str(tmp_path / "in.txt"),
                               "--import", "marker_of_round4"], cwd=marked_run, stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 2 and "cannot write the output: No space left on device" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# 4. a signal during a step that takes minutes (a compile) stops within STOP_WAIT, not at the step's end
def test_a_signal_during_a_long_step_stops_within_stop_wait(tmp_path, monkeypatch):
    import os, signal, threading, time
    from treepe_nb import train as training
    from treepe_nb.model import ModelConfig
    from treepe_nb.tasks import TaskConfig
    real, calls = training.batch_loss, []
    def slow(*a, **kw):                                          # the second step "compiles" for 60 s
        calls.append(1)
        if len(calls) == 2:                                      # a SIGTERM half a second into it
            threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
            time.sleep(60)
        return real(*a, **kw)
    monkeypatch.setattr(training, "batch_loss", slow)
    monkeypatch.setattr(training, "STOP_WAIT", 1)
    cfg = training.TrainConfig(TaskConfig("tree-copy", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
                               enc_layers=1, dec_layers=1), steps=5, eval_every=0, out=str(tmp_path / "run"))
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt) as stopped: training.train(cfg, progress=False, test=False)
    assert not isinstance(stopped.value, training.Interrupted)   # not at a boundary: inside the step, at once
    assert time.monotonic() - start < 30 and len(calls) == 2     # long before the step's 60 s


# 9. --tensorboard where the curves cannot be written: one line naming the folder
def test_tensorboard_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "run").mkdir(); (tmp_path / "run" / "tensorboard").write_text("a file in the way")
    done = command("train", "--steps", "1", "--tensorboard", "--out", "run", "--d-model", "16", "--num-heads", "2",
                   "--sizes", "40", "4", "4", "--batch-size", "8", "--no-progress", cwd=tmp_path)
    assert done.returncode == 2 and "run/tensorboard is in the way of a folder of the run" in done.stderr, done.stderr[-1500:]


# 9. treepe-eval on a checkpoint whose config is a string: one line
def test_a_checkpoint_whose_config_is_a_string_is_one_line(marked_run, tmp_path):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(marked_run / "runs/m", run)
    ck = load_checkpoint(run / "last.pt")
    ck["config"] = "not a configuration"
    torch.save(ck, run / "last.pt")
    done = command("eval", str(run), "--checkpoint", "last", "--import", "marker_of_round4", cwd=marked_run)
    assert done.returncode == 2 and "holds no run configuration" in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["metrics.jsonl", "summary.json"])
def test_resume_refuses_or_skips_run_files_that_are_pipes(marked_run, tmp_path, name):
    "The files --resume reads or writes besides the checkpoint: a FIFO is refused (round 5: every run file), never read."
    import shutil
    run = tmp_path / "run"
    shutil.copytree(marked_run / "runs/m", run)
    (run / name).unlink(missing_ok=True); os.mkfifo(run / name)
    done = command("train", "--resume", "--out", str(run), "--steps", "4", "--no-progress", "--import", "marker_of_round4",
                   cwd=marked_run)
    assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr[-1500:]
