"Your own data end to end: the pairs task trained by treepe-train, then load_run / predict / treepe-predict on it; early stopping and progress lines."
import json, subprocess, sys
from pathlib import Path
import pytest, torch, yaml
from treepe_nb.cli import train_cli
from treepe_nb.predict import load_run, predict
from treepe_nb.runs import load_vocab
from treepe_nb.train import TrainConfig, train
from treepe_nb.tasks import TaskConfig
from treepe_nb.model import ModelConfig

TINY = ["--d-model", "16", "--num-heads", "2", "--enc-layers", "1", "--dec-layers", "1", "--batch-size", "8",
        "--threads", "1", "--no-progress"]


@pytest.fixture(scope="module")
def pairs_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs")
    rows = [{"source": f"(f {a} {b})", "target": f"(g {b} {a})"} for a in "abcde" for b in "abcde"]
    (d / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    train_cli(["--task", "pairs", "--task-option", f"data={d / 'train.jsonl'}", "--task-option", "format=sexpr",
               "--sizes", "20", "3", "2", "--steps", "20", "--eval-every", "10", "--out", str(d / "run"), *TINY])
    return d


def test_pairs_run_predicts(pairs_run):
    run = load_run(pairs_run / "run")
    assert load_vocab(pairs_run / "run")["spec"].name == "pairs"
    out = predict(run, ["(f a b)", "(f c d)"])
    assert len(out) == 2 and all(p.output is None or p.text == p.output.to_sexpr() for p in out)
    with pytest.raises(ValueError, match="token 'zz' is not in the run's source vocabulary"):
        predict(run, ["(f zz a)"])


def test_predict_cli(pairs_run):
    (pairs_run / "in.jsonl").write_text(json.dumps({"source": "(f a b)"}) + "\n" + json.dumps({"source": "(f b a)"}))
    r = subprocess.run([sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()",
                        str(pairs_run / "run"), str(pairs_run / "in.jsonl"), "--field", "source", "--jsonl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    assert [l["input"] for l in lines] == ["(f a b)", "(f b a)"]
    r = subprocess.run([sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()",
                        str(pairs_run / "nothing"), "-"], capture_output=True, text=True, input="")
    assert r.returncode == 2 and "not a run folder" in r.stderr


def test_bad_line_names_file_and_line(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"source": "(a b)", "target": "(b a)"}\nnot json\n')
    with pytest.raises(SystemExit) as done:
        train_cli(["--task", "pairs", "--task-option", f"data={tmp_path / 'd.jsonl'}", "--out", str(tmp_path / "r"), *TINY])
    assert done.value.code == 2


def test_early_stopping_and_patience(tmp_path):
    torch.set_num_threads(1)
    base = dict(task=TaskConfig(sizes=(64, 8, 8)), model=ModelConfig(pe="ape-tree", d_model=16, num_heads=2, enc_layers=1,
                dec_layers=1), steps=40, eval_every=5, lr=1e-9, warmup=0)
    s = train(TrainConfig(**base, patience=2, out=str(tmp_path / "p")), progress=False)     # no learning: no improvement
    assert s["step"] == 15 and "patience=2" in s["stopped_early"]
    s = train(TrainConfig(**base, patience=0, stop_when_perfect=False, out=str(tmp_path / "q")), progress=False)
    assert s["step"] == 40 and s["stopped_early"] is None
    s = train(TrainConfig(**base, patience=2, min_steps=30, out=str(tmp_path / "m")), progress=False)   # a floor
    assert s["step"] == 30 and "patience=2" in s["stopped_early"]


def test_progress_lines_without_terminal(tmp_path, capsys):
    cfg = TrainConfig(TaskConfig(sizes=(64, 8, 8)), ModelConfig(pe="ape-tree", d_model=16, num_heads=2, enc_layers=1,
                      dec_layers=1), steps=6, eval_every=0, out=str(tmp_path / "r"))
    train(cfg, log_every=1e-9)                       # stderr is captured (not a terminal): a line per step
    err = capsys.readouterr().err
    assert "step 1/6: loss" in err and "step 6/6: loss" in err


def _readme_section(title, end="\n## "):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    start = readme.index(title)
    return readme[start:readme.index(end, start + len(title))]


@pytest.mark.long   # several trainings in subprocesses: run by --long (CI)
def test_readme_predict_and_pairs_commands_work(tmp_path):
    """The README's "Predict with a trained run", "Train on your own pairs" and own-encoding commands, run as written in a fresh
    folder (after a short `treepe-train` into runs/default, the README's default run): only the training commands
    get options that make them short (steps, model size); the data file, the task options, `treepe-predict` and
    `load_run`/`predict` are the README's own."""
    import os, re, shutil
    text = _readme_section("### Predict with a trained run")
    sh = re.findall(r"```sh\n(.*?)```", text, re.S)
    py = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(sh) == 3 and len(py) == 1, (len(sh), len(py))
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    if not shutil.which("treepe-predict"): env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    short = " --steps 20 --eval-every 10 " + " ".join(TINY)
    def bash(script):
        script = re.sub(r"^(treepe-train .*)$", lambda m: m.group(1) + short, script, flags=re.M)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{script}\n{done.stderr[-3000:]}"
        return done.stdout
    bash("treepe-train --out runs/default")                                   # the README's default, shortened
    out = bash(sh[0])
    assert len(out.splitlines()) == 1                                          # one output per input line
    done = subprocess.run([sys.executable, "-c", py[0]], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("[") and len(eval(done.stdout)) == 1
    out = bash(sh[1])
    assert len((tmp_path / "pairs.jsonl").read_text().splitlines()) == 210
    summary, predicted = out[:out.rindex("}") + 1], out[out.rindex("}") + 1:]   # treepe-train's summary, then the output
    assert json.loads(summary)["step"] == 20 and load_vocab(tmp_path / "runs/swap")["spec"].name == "pairs"
    assert len(predicted[1:].splitlines()) == 1                                # one line (empty: not printable)
    out = bash(sh[2])                                                          # an encoding of your own, by --import
    assert json.loads(out[out.rindex("{\n"):])["split"] == "test"           # treepe-eval's result, the last object
    assert yaml.safe_load((tmp_path / "runs/depth/config.yaml").read_text())["imports"] == ["my_encodings"]


def test_predict_cli_reads_for_programs(tmp_path):
    "A For2Lam run asked from the command line in For's own syntax: one output line per program (blank lines between), errors with their line."
    torch.set_num_threads(1)
    run = tmp_path / "f2l"
    train(TrainConfig(TaskConfig("for2lam-short", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
                      enc_layers=1, dec_layers=1), steps=4, eval_every=0, out=str(run)), progress=False)
    (tmp_path / "in.txt").write_text("x = 1; for y = 0; y < 3; y = y + 1 do x = x + y endfor\n\nx = 2\n")
    cli = [sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()", str(run)]
    r = subprocess.run([*cli, str(tmp_path / "in.txt"), "--format", "for"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2
    (tmp_path / "bad.txt").write_text("x = 1\n\nx = 1 +\n")
    r = subprocess.run([*cli, str(tmp_path / "bad.txt"), "--format", "for"], capture_output=True, text=True)
    assert r.returncode != 0 and "bad.txt, line 3, column 8" in r.stderr and "expected a number, a variable or '('" in r.stderr
