"""Reliability, round 3: the failures an adversarial run found (issue "Reliability, round 3"), one test each,
each seen to fail before its fix."""
from pathlib import Path

import pytest
import torch

from treepe_nb.cli import config_from_args
from treepe_nb.model import ModelConfig
from treepe_nb.runs import load_checkpoint, read_metrics
from treepe_nb.tasks import TaskConfig
from treepe_nb.train import RUN_PE, TrainConfig, train


pytestmark = pytest.mark.usefixtures("one_thread")      # conftest.py


# 1. one default encoding for a run, however its model settings are given
@pytest.mark.parametrize("argv", [[], ["--d-model", "16"], ["--dropout", "0.1"], ["--num-heads", "2"]])
def test_model_flags_keep_the_default_encoding(argv):
    assert config_from_args(argv)[0].model.pe == RUN_PE == "ape-tree"


@pytest.mark.parametrize("text", ["model: {d_model: 16}\n", "model: {dropout: 0.1}\n", "task: tree-copy\nmodel: {src_pe: stack}\n"])
def test_a_model_section_without_pe_keeps_the_default_encoding(tmp_path, text):
    (tmp_path / "c.yaml").write_text(text)
    assert config_from_args(["--config", str(tmp_path / "c.yaml")])[0].model.pe == RUN_PE
    assert TrainConfig.from_dict(__import__("yaml").safe_load(text)).model.pe == RUN_PE


def test_a_flat_record_keeps_the_default_encoding_and_a_flat_file_of_yours_is_refused(tmp_path, capsys):
    assert TrainConfig.from_dict({"d_model": 16}).model.pe == RUN_PE            # a record of before the sections
    (tmp_path / "c.yaml").write_text("d_model: 16\n")
    with pytest.raises(SystemExit): config_from_args(["--config", str(tmp_path / "c.yaml")])
    assert "d_model at the top level is the flat form of records" in capsys.readouterr().err


def test_a_mapping_or_the_pe_flag_still_choose():
    assert TrainConfig(model={"d_model": 16}).model.pe == RUN_PE
    assert config_from_args(["--d-model", "16", "--pe", "stack"])[0].model.pe == "stack"
    assert TrainConfig(model=ModelConfig(d_model=16)).model.pe == "sinusoidal"   # a ModelConfig says what it is


# 3. a setting given twice, or the flat form mixed with sections, is refused
@pytest.mark.parametrize("d, message", [
    ({"model": {"d_model": 16}, "d_model": 32}, "cannot be mixed with a model: section"),
    ({"task": {"name": "tree-copy"}, "task_options": {"depth_mean": 3}}, "cannot be mixed with a task: section"),
    ({"task": {"name": "tree-copy", "order": "bfs"}, "order": "dfs"}, "order (task: has order)"),
])
def test_a_setting_given_twice_is_refused(d, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")): TrainConfig.from_dict(d)


# 2. --resume on a folder with best.pt but no last.pt continues from best.pt and deletes nothing
def test_resume_without_last_pt_continues_from_best_pt(tmp_path, capsys):
    cfg = dict(task=TaskConfig(sizes=(96, 8, 8)), model=ModelConfig(pe="stack", d_model=16, dropout=0.1), steps=20,
               eval_every=10, eval_examples=2, batch_size=16, best_metric="perplexity", checkpoint_every=0)
    train(TrainConfig(**cfg, out=str(tmp_path / "whole")), progress=False)
    part = tmp_path / "part"
    train(TrainConfig(**cfg, out=str(part)), progress=False, stop_at=10)
    (part / "last.pt").unlink()                                    # e.g. lost, or a copy of best.pt only
    assert load_checkpoint(part / "best.pt")["step"] == 10
    train(TrainConfig(**cfg, out=str(part)), progress=False, resume=True)
    assert "resuming from best.pt at step 10" in capsys.readouterr().err
    assert [r["loss"] for r in read_metrics(part)[0]] == [r["loss"] for r in read_metrics(tmp_path / "whole")[0]]
    assert read_metrics(part)[1] == read_metrics(tmp_path / "whole")[1]


# 4. one rule for repeats: a file's repeats by content (whatever the text), across splits make_task's source rule
def test_pairs_repeats_are_judged_by_content(tmp_path):
    import json
    from treepe_nb.tasks import make_task
    lines = [{"source": f"(a b{i})", "target": f"(b{i} a)"} for i in range(40)]
    lines.append({"source": "(a  b0 )", "target": "( b0 a)"})                # pair 0 again, other whitespace
    (tmp_path / "train.jsonl").write_text("\n".join(map(json.dumps, lines)))
    (tmp_path / "dev.jsonl").write_text("\n".join(map(json.dumps, [{"source": "(a  b1 )", "target": "(b1 a)"},
                                                                     {"source": "(c d)", "target": "(d c)"}])))
    (tmp_path / "test.jsonl").write_text(json.dumps({"source": "(e f)", "target": "(f e)"}))
    task = make_task(TaskConfig("pairs", options={"data": str(tmp_path / "train.jsonl"), "dev": str(tmp_path / "dev.jsonl"),
                                                  "test": str(tmp_path / "test.jsonl")}))
    assert task.info["dropped_repeats"] == [1, 0, 0]
    assert task.info["duplicates_removed"] == {"dev": 1, "test": 0}
    assert [len(s) for s in task.splits.values()] == [40, 1, 1]


# 5. dev and test the training file: an error, not "dev perplexity 1.000" from 0 tokens
def test_dev_and_test_that_repeat_training_are_refused(tmp_path):
    import json
    from treepe_nb.tasks import make_task
    (tmp_path / "f.jsonl").write_text("\n".join(json.dumps({"source": f"(a b{i})", "target": f"(b{i} a)"}) for i in range(9)))
    f = str(tmp_path / "f.jsonl")
    with pytest.raises(ValueError, match="the dev split is empty: each of its 9 examples"):
        make_task(TaskConfig("pairs", options={"data": f, "dev": f, "test": f}))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    "A tiny trained run, and a second one on another task, for the run-folder tests."
    d = tmp_path_factory.mktemp("runs")
    torch.set_num_threads(1)
    for name, task in (("copy", "tree-copy"), ("rotate", "tree-rotate")):
        train(TrainConfig(TaskConfig(task, sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2),
                          steps=4, eval_every=2, eval_examples=2, out=str(d / name)), progress=False)
    return d


# 6. a run's checkpoint and its config.yaml must agree: predict and eval use the checkpoint's, and say when they differ
def test_an_edited_config_or_a_foreign_checkpoint_is_refused(tiny_run, tmp_path, capsys):
    import shutil, yaml
    from treepe_nb.predict import load_run
    from treepe_nb.cli import eval_cli
    edited = tmp_path / "edited"
    shutil.copytree(tiny_run / "copy", edited)
    cfg = yaml.safe_load((edited / "config.yaml").read_text())
    cfg["model"]["pe"] = "ape-tree"
    (edited / "config.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(ValueError, match="model.pe 'stack' in the checkpoint, 'ape-tree' in config.yaml"):
        load_run(edited)
    foreign = tmp_path / "foreign"
    shutil.copytree(tiny_run / "copy", foreign)
    for f in ("best.pt", "last.pt"): shutil.copy(tiny_run / "rotate" / f, foreign / f)
    with pytest.raises(SystemExit): eval_cli([str(foreign), "--device", "cpu"])
    assert "task.name 'tree-rotate' in the checkpoint, 'tree-copy' in config.yaml" in capsys.readouterr().err
    moved = tmp_path / "moved"                                     # a whole run folder moved: still the same run
    shutil.copytree(tiny_run / "copy", moved)
    assert load_run(moved).config.task.name == "tree-copy"


# 7. arguments out of range are errors, not an empty list or a silent default
def test_predict_and_registry_arguments_are_checked(tiny_run):
    from treepe_nb.predict import load_run, predict
    from treepe_nb.attention import register_encoding
    run = load_run(tiny_run / "copy")
    for kw, message in ((dict(batch_size=-1), "batch_size must be an integer >= 1"),
                        (dict(batch_size=0), "batch_size must be an integer >= 1"),
                        (dict(max_output_nodes=0), "max_output_nodes must be an integer >= 1")):
        with pytest.raises(ValueError, match=message): predict(run, ["(a b)"], **kw)
    with pytest.raises(ValueError, match="term of the encoding 'five' must be a function"):
        register_encoding("five", "absolute", ["sequence"], term=5)
    with pytest.raises(ValueError, match="min_count must be an integer >= 1"):
        from treepe_nb.pairs import pairs_task
        pairs_task(0, (4, 1, 1), "dfs", data="x.jsonl", min_count=-1)


# 8. treepe-predict: one output line per input line, blank lines included
def test_predict_cli_keeps_lines_aligned(tiny_run):
    import subprocess, sys
    r = subprocess.run([sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()",
                        str(tiny_run / "copy"), "-"], capture_output=True, text=True, input="(1 2)\n\n(2 1)\n   \n(1 1)\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert len(out) == 6 and out[-1] == "" and out[1] == "" and out[3] == "", r.stdout


# 10, 14. a run folder's files are read by one bounded reader that names the file
@pytest.mark.parametrize("vocab, message", [
    (b"", "vocab.json is empty"),
    (b'{"name": "tree-copy"', "vocab.json is not valid JSON"),
    (b"[1, 2]", "vocab.json is damaged: it has no name"),
    (b'{"name": 1}', "vocab.json is damaged: it has no source"),
    (b"[" * 100_000 + b"]" * 100_000, "vocab.json"),
    (None, "vocab.json is a folder"),
])
def test_a_damaged_vocab_json_is_named(tiny_run, tmp_path, vocab, message):
    import shutil
    from treepe_nb.predict import load_run
    run = tmp_path / "run"
    shutil.copytree(tiny_run / "copy", run)
    (run / "vocab.json").unlink()
    if vocab is None: (run / "vocab.json").mkdir()
    else: (run / "vocab.json").write_bytes(vocab)
    with pytest.raises(ValueError, match=message): load_run(run)


@pytest.mark.parametrize("config, message", [
    (b"model: [unclosed\n", "config.yaml is not valid YAML"),
    (b"!!python/object/apply:os.system ['echo hi']\n", "config.yaml is not valid YAML"),
    (b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n"
     % ((98 + i,) * 2 + (97 + i,) * 10) for i in range(8)), "config.yaml is not valid YAML"),   # a billion laughs
])
def test_a_damaged_config_yaml_is_named(tiny_run, tmp_path, config, message):
    import shutil, time
    from treepe_nb.predict import load_run
    run = tmp_path / "run"
    shutil.copytree(tiny_run / "copy", run)
    (run / "config.yaml").write_bytes(config)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=message): load_run(run)
    assert time.perf_counter() - t0 < 30          # refused by the bounded reader, not expanded


def test_eval_reports_nan_weights_and_bad_devices(tiny_run, tmp_path, capsys):
    import shutil
    from treepe_nb.cli import eval_cli
    from treepe_nb.runs import save_checkpoint
    run = tmp_path / "run"
    shutil.copytree(tiny_run / "copy", run)
    ck = load_checkpoint(run / "best.pt")
    ck["model"] = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in ck["model"].items()}
    save_checkpoint(run / "best.pt", **ck)
    with pytest.raises(SystemExit) as e: eval_cli([str(run), "--device", "cpu"])
    assert e.value.code == 2 and "treepe-eval: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e: eval_cli([str(tiny_run / "copy"), "--device", "xyz"])
    assert e.value.code == 2 and "device must be auto, cpu, cuda" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit): eval_cli([str(tiny_run / "copy"), "--device", "cuda"])
        assert "torch sees no CUDA device" in capsys.readouterr().err
        from treepe_nb.predict import load_run
        with pytest.raises(ValueError, match="torch sees no CUDA device"): load_run(tiny_run / "copy", device="cuda")
    from treepe_nb.predict import load_run
    with pytest.raises(ValueError, match="device must be auto"): load_run(tiny_run / "copy", device="xyz")


# 13, 15. treepe-predict errors name the file and the line; BOM, U+2028, bad UTF-8, folders
def _predict(run, *args, stdin=None):
    import subprocess, sys
    return subprocess.run([sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()", str(run), *args],
                          capture_output=True, text=stdin is None or isinstance(stdin, str), input=stdin)


def test_predict_errors_name_file_and_line(tiny_run, tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("(1 2)\n\n(2 1)\n(1 (2 3)\n")
    r = _predict(tiny_run / "copy", str(f))
    assert r.returncode == 2 and f"{f}, line 4:" in r.stderr and "never closed" in r.stderr, r.stderr
    f.write_bytes(b"\xef\xbb\xbf(1 2)\n(2 1)\n")                        # a byte-order mark is not a syntax error
    r = _predict(tiny_run / "copy", str(f))
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2, r.stderr
    f.write_bytes(b"(1 2)\n(2 \xff)\n")
    r = _predict(tiny_run / "copy", str(f))
    assert r.returncode == 2 and "line 2: not UTF-8" in r.stderr, r.stderr
    r = _predict(tiny_run / "copy", str(tmp_path))
    assert r.returncode == 2 and "is a folder" in r.stderr, r.stderr
    j = tmp_path / "in.jsonl"
    j.write_text('{"source": "(1 2)", "note": "a\u2028b"}\n{"x": 1}\n', encoding="utf-8")   # U+2028 inside a string
    r = _predict(tiny_run / "copy", str(j), "--field", "source")
    assert r.returncode == 2 and "in.jsonl, line 2: not a JSON object with the field 'source'" in r.stderr, r.stderr
    r = _predict(tiny_run / "copy", "-", "--device", "xyz", stdin="(1 2)\n")
    assert r.returncode == 2 and "device must be auto" in r.stderr, r.stderr


def test_pairs_files_are_read_line_by_line_with_names(tmp_path):
    import json
    from treepe_nb.pairs import read_pairs
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"source": "(a b)", "target": "(b a)", "note": "x\u2028y"}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert len(read_pairs(f, "sexpr", "sexpr")[0]) == 1
    f.write_bytes(b'{"source": "(a b)", "target": "(b \xff a)"}\n')
    with pytest.raises(ValueError, match="p.jsonl, line 1: not UTF-8"): read_pairs(f, "sexpr", "sexpr")
    f.write_text('{"source": ' + "[" * 100_000 + "]" * 100_000 + ', "target": "(a)"}\n')
    with pytest.raises(ValueError, match="p.jsonl, line 1"): read_pairs(f, "json", "sexpr")


BOMB = ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8)))


# 9. every YAML input has a budget of its own: bombs are refused at once, by pairs and by predict
def test_yaml_inputs_have_a_budget(tiny_run, tmp_path):
    import json, time
    from treepe_nb.pairs import read_pairs
    f = tmp_path / "bombs.jsonl"
    f.write_text("\n".join(json.dumps({"source": BOMB, "target": "(a)"}) for _ in range(60)))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"bombs.jsonl, line 1, source: .*more than max_nodes=8192"):
        read_pairs(f, "yaml", "sexpr")
    f.write_text("\n".join(json.dumps({"source": BOMB}) for _ in range(100)))
    r = _predict(tiny_run / "copy", str(f), "--field", "source", "--format", "yaml")
    assert r.returncode == 2 and "line 1: " in r.stderr and "max_nodes=100000" in r.stderr, r.stderr
    assert time.perf_counter() - t0 < 60


# 11. For2Lam's options have a size budget, checked before anything is drawn
@pytest.mark.parametrize("settings", [dict(max_const=10**9), dict(expr_depth=10**6), dict(sizes=(100_000_000, 4, 4))])
def test_for2lam_options_have_a_budget(settings):
    from treepe_nb.tasks import make_task
    with pytest.raises(ValueError, match="over the budget max_size=20000000"): make_task("for2lam-long", **settings)


# 12. a byte limit per input line, with its line number
def test_an_endless_line_is_refused(tiny_run, tmp_path):
    from treepe_nb.pairs import read_lines
    if Path("/dev/zero").exists():
        with pytest.raises(ValueError, match="/dev/zero, line 1: longer than 1048576 bytes"): read_lines("/dev/zero")
    f = tmp_path / "big.txt"
    f.write_text("(1 2)\n" + "(" * (1 << 20 + 1) + "\n")
    r = _predict(tiny_run / "copy", str(f))
    assert r.returncode == 2 and "big.txt, line 2: longer than 1048576 bytes" in r.stderr, r.stderr


# 16. a full disk is named as such, leaves no .tmp behind, and the checkpoints already there stay readable
def test_a_checkpoint_that_does_not_fit_is_named_a_full_disk(tmp_path, monkeypatch):
    from treepe_nb import runs
    def full(obj, f, *a, **k):
        f.write(b"x" * 100)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")
    runs.save_checkpoint(tmp_path / "last.pt", step=1)
    monkeypatch.setattr(runs.torch, "save", full)
    with pytest.raises(OSError, match=r"could not write .*last.pt \(the disk is full"):
        runs.save_checkpoint(tmp_path / "last.pt", step=2)
    assert not (tmp_path / "last.pt.tmp").exists()
    monkeypatch.undo()
    assert load_checkpoint(tmp_path / "last.pt", require=("step",))["step"] == 1


def test_a_full_tmpfs_ends_training_with_a_message(tmp_path):
    "On a real 1 MB tmpfs where this machine lets a test mount one (root on Linux), else skipped."
    import os, subprocess, sys
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        r = subprocess.run([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--sizes", "32", "4", "4",
                            "--steps", "4", "--eval-every", "2", "--eval-examples", "2", "--d-model", "64", "--no-progress",
                            "--threads", "1", "--out", str(mnt / "run")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "the disk is full" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert not list(mnt.glob("run/*.tmp"))
        r = subprocess.run([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--resume",
                            "--no-progress", "--out", str(mnt / "run")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


# 17. an --out that cannot be written is a one-line error
def test_an_unwritable_out_is_a_command_error(tmp_path):
    import subprocess, sys
    (tmp_path / "file").write_text("not a folder")
    r = subprocess.run([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--sizes", "8", "2", "2",
                        "--steps", "1", "--no-progress", "--out", str(tmp_path / "file" / "run")], capture_output=True, text=True)
    assert r.returncode == 2 and "treepe-train: error:" in r.stderr and "Traceback" not in r.stderr, r.stderr


# 18. a signal while the task is built stops at once, says so, and leaves no lock
def test_sigterm_while_the_task_builds(tmp_path):
    import signal, subprocess, sys, time
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--task", "for2lam-short",
                          "--sizes", "20000", "100", "100", "--steps", "5", "--no-progress", "--out", str(out)],
                         stderr=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    while not (out / ".lock").exists() and p.poll() is None and time.perf_counter() - t0 < 120: time.sleep(0.005)
    assert p.poll() is None, p.stderr.read()
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 130 and "SIGTERM before training started: nothing was trained or saved" in err, err
    assert not (out / ".lock").exists() and "Traceback" not in err


# 19. inputs refused or misread before
def test_old_inputs(tmp_path):
    import numpy as np
    from treepe_nb.tasks import make_task
    from treepe_nb.trees import Tree, batch_positions
    from treepe_nb.algebraic import TreeAPE
    assert TaskConfig(sizes=np.array([2, 2, 2])).sizes == (2, 2, 2)
    with pytest.raises(ValueError, match="modules is empty"): make_task("py-docstring2ast", sizes=(4, 2, 2), modules=[])
    t, s = make_task("tree-copy", sizes=(8, 2, 2)), make_task("seq-copy", sizes=(8, 2, 2))
    with pytest.raises(TypeError, match="example 1: collate takes Examples, got str"): t.collate([t.train[0], "x"])
    with pytest.raises(TypeError, match="example 1: its src is a ndarray, but this task's src side is a tree"):
        t.collate([t.train[0], s.train[0]])
    p = batch_positions([Tree.from_sexpr("(a b c)")], "dfs", 4).to("meta")
    with pytest.raises(ValueError, match="on the meta device"): TreeAPE(8, 2).prepare(p)
    import subprocess, sys
    r = subprocess.run([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--task", "py-docstring2ast",
                        "--task-option", "modules=json/decoder.py", "--no-progress", "--out", str(tmp_path / "r")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "modules must be a list" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_seed_beyond_64_bits_is_an_option_error(capsys):
    with pytest.raises(SystemExit) as e: config_from_args(["--seed", "18446744073709551621"])
    assert e.value.code == 2 and "seed must be in [0, 2**63 - 1]" in capsys.readouterr().err


def test_two_quick_sigints_end_without_a_traceback(tmp_path):
    import signal, subprocess, sys, time
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--sizes", "256", "8", "8",
                          "--steps", "100000", "--no-progress", "--threads", "1", "--out", str(out)],
                         stderr=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    while not (out / "metrics.jsonl").exists() and p.poll() is None and time.perf_counter() - t0 < 120: time.sleep(0.01)
    assert p.poll() is None, p.stderr.read()
    p.send_signal(signal.SIGINT); time.sleep(0.01); p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 130 and "Traceback" not in err, err
    assert not (out / ".lock").exists()


# "One home for a run" (the newcomer's items 2 and 8): a run says what it starts with, and a finished run is not retrained
def test_resuming_a_run_that_stopped_early_does_not_train_again(tmp_path, capsys):
    base = dict(task=TaskConfig(sizes=(64, 8, 8)), model=ModelConfig(pe="stack", d_model=16, num_heads=2), steps=40,
                eval_every=5, lr=1e-9, warmup=0, patience=2, out=str(tmp_path / "p"))
    s = train(TrainConfig(**base), progress=False)
    assert s["step"] == 15 and "patience=2" in s["stopped_early"]
    steps = len(read_metrics(tmp_path / "p")[0])
    again = train(TrainConfig(**base), progress=False, resume=True)
    assert again == s and len(read_metrics(tmp_path / "p")[0]) == steps
    assert "stopped early at step 15" in capsys.readouterr().err
    more = train(TrainConfig(**{**base, "patience": 4}), progress=False, resume=True)    # asked for more: trains on
    assert more["step"] > 15


def test_a_run_says_what_it_starts_with(tmp_path, capsys):
    import json
    rows = [{"source": f"(f a{i} b{i % 7})", "target": f"(g b{i % 7} a{i})"} for i in range(3000)]
    (tmp_path / "d.jsonl").write_text("\n".join(map(json.dumps, rows)))
    cfg = TrainConfig(TaskConfig("pairs", sizes=(1000, 100, 100), options={"data": str(tmp_path / "d.jsonl")}),
                      ModelConfig(pe="stack", d_model=16, num_heads=2), steps=1, eval_examples=1, out=str(tmp_path / "r"))
    train(cfg, progress=False)
    err = capsys.readouterr().err
    assert "pairs (dfs): 1000/100/100 train/dev/test examples" in err and "left out: 1800 beyond sizes (1000, 100, 100)" in err, err
    assert " parameters; encodings stack/stack" in err
