"""Reliability, round 5 (issue "Reliability, round 5"), items 1-3: a run folder is written only inside itself, a
config file chooses no code, and sizes read from a file are refused before they are allocated. Each test was seen to
fail before its fix."""
import json, os, shutil, subprocess, sys
from pathlib import Path

import pytest

TINY = ["--task", "tree-copy", "--steps", "2", "--eval-every", "0", "--d-model", "16", "--num-heads", "2",
        "--enc-layers", "1", "--dec-layers", "1", "--batch-size", "4", "--sizes", "16", "4", "4", "--pe", "ape-tree",
        "--no-progress", "--threads", "1", "--no-test"]
COMMANDS = {"train": "from treepe_nb.cli import train_cli as c", "eval": "from treepe_nb.cli import eval_cli as c",
            "predict": "from treepe_nb.predict import predict_cli as c"}
MEASURED = """import resource, sys, time
t0 = time.perf_counter()
try:
    {call}
except SystemExit as e: code = e.code
else: code = 0
print("MEASURED", time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, file=sys.stderr)
sys.exit(code)
"""


def command(name, *args, cwd, stdin=""):
    "One of the commands in a process of its own; stderr ends with the seconds and peak bytes (`measured`)."
    code = MEASURED.format(call=f"{COMMANDS[name]}; c()")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, input=stdin,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


def measured(done) -> tuple[float, int]:
    line = [l for l in done.stderr.splitlines() if l.startswith("MEASURED")][-1].split()
    return float(line[1]), int(line[2])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("round5")
    done = command("train", *TINY, "--out", "run", cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def fresh(run, tmp_path) -> Path:
    "A copy of the fixture's run folder and a precious file outside it."
    shutil.copytree(run / "run", tmp_path / "r")
    (tmp_path / "precious").write_text("precious")
    return tmp_path / "r"


# 1. nothing is written through a link: the symlinked temporary files, in-place files and tensorboard/
@pytest.mark.parametrize("name", ["last.pt.tmp", "best.pt.tmp", "vocab.json.tmp", "summary.json.tmp", "config.yaml",
                                  "metrics.jsonl", "last.pt", "summary.json"])
def test_a_resume_never_writes_through_a_link(run, tmp_path, name):
    r = fresh(run, tmp_path)
    (r / name).unlink(missing_ok=True)
    (r / name).symlink_to(tmp_path / "precious")
    done = command("train", "--resume", "--out", str(r), "--steps", "4", "--no-progress", cwd=tmp_path)
    assert done.returncode == 2 and f"{name} is a symbolic link" in done.stderr, done.stderr[-2000:]
    assert (tmp_path / "precious").read_text() == "precious"


def test_eval_never_writes_through_a_link(run, tmp_path):
    r = fresh(run, tmp_path)
    (r / "eval_test.json").unlink(missing_ok=True)
    (r / "eval_test.json").symlink_to(tmp_path / "precious")
    done = command("eval", str(r), cwd=tmp_path)
    assert done.returncode != 0 and "eval_test.json is a symbolic link" in done.stderr, done.stderr[-2000:]
    assert (tmp_path / "precious").read_text() == "precious"


def test_tensorboard_is_not_written_through_a_link(run, tmp_path):
    pytest.importorskip("tensorboard")
    r = fresh(run, tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (r / "tensorboard").symlink_to(tmp_path / "elsewhere")
    done = command("train", "--resume", "--out", str(r), "--steps", "4", "--tensorboard", "--no-progress", cwd=tmp_path)
    assert done.returncode == 2 and "tensorboard is a symbolic link" in done.stderr, done.stderr[-2000:]
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_stale_temporary_link_is_removed_not_followed(tmp_path):
    from treepe_nb.runs import save_checkpoint
    (tmp_path / "precious").write_text("precious")
    (tmp_path / "x.pt.tmp").symlink_to(tmp_path / "precious")
    save_checkpoint(tmp_path / "x.pt", model={}, step=1)
    assert (tmp_path / "precious").read_text() == "precious"
    assert (tmp_path / "x.pt").is_file() and not (tmp_path / "x.pt").is_symlink()


# 2. a config file is data: its imports need --import, --help imports nothing, the working folder shadows nothing
EVIL = 'from pathlib import Path\nPath(__file__).with_name("RAN").write_text("ran")\n'


@pytest.mark.parametrize("extra", [["--help"], ["--steps", "1"]])
def test_a_config_file_imports_nothing(tmp_path, extra):
    (tmp_path / "evilmod.py").write_text(EVIL)
    (tmp_path / "recv.yaml").write_text("imports: [evilmod]\ntask: {name: tree-copy}\n")
    done = command("train", "--config", "recv.yaml", *extra, cwd=tmp_path)
    assert not (tmp_path / "RAN").exists(), done.stderr[-2000:]
    if extra != ["--help"]:
        assert done.returncode == 2 and "--import evilmod" in done.stderr and "chooses no code" in done.stderr


def test_a_config_file_imports_what_import_names(tmp_path):
    (tmp_path / "evilmod.py").write_text(EVIL)
    (tmp_path / "recv.yaml").write_text("imports: [evilmod]\n")
    done = command("train", "--config", "recv.yaml", "--import", "evilmod", *TINY, "--out", "o", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "RAN").exists()


def test_import_does_not_let_the_working_folder_shadow_a_package(tmp_path):
    (tmp_path / "mymod.py").write_text("X = 1\n")
    (tmp_path / "wave.py").write_text(EVIL)      # a module of the standard library, not imported yet, in the working folder
    script = tmp_path / "elsewhere" / "check.py"      # run as a script: `python -c` would put the working folder first
    script.parent.mkdir()
    script.write_text("import sys, os\nfrom treepe_nb.config import import_modules\nimport_modules(['mymod'])\n"
                      "import wave\nprint(wave.__file__, os.getcwd() in sys.path)\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert str(tmp_path) not in done.stdout.split()[0] and done.stdout.split()[1] == "False", done.stdout
    assert not (tmp_path / "RAN").exists()


# 3. a forged run folder or model settings: refused in one line, under 1 GB (and, measured on an idle machine, 2-4 s
# of which the start of Python and torch is most)
@pytest.mark.parametrize("forge", [{"n": 10**7}, {"n": 3}, {"max_depth": 10**6, "n": 5}])
def test_a_forged_spec_is_refused_before_it_is_built(run, tmp_path, forge):
    r = fresh(run, tmp_path)
    v = json.loads((r / "vocab.json").read_text())
    v["spec"].update(forge)
    (r / "vocab.json").write_text(json.dumps(v))
    done = command("predict", str(r), "-", cwd=tmp_path, stdin="(1 2)\n")
    seconds, peak = measured(done)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "does not fit" in done.stderr or "over the limit" in done.stderr, done.stderr[-2000:]
    assert peak < 2**30, (seconds, peak)             # (seconds: printed on failure, never asserted)


@pytest.mark.parametrize("setting", [("enc-layers", "1000000"), ("d-model", "16384"), ("d-ff", "1000000000"),
                                     ("max-distance", "100000000")])
def test_model_settings_are_bounded_by_their_memory(tmp_path, setting):
    flag, value = setting
    pe = ["--pe", "relative"] if flag == "max-distance" else []
    done = command("train", *TINY, *pe, f"--{flag}", value, "--out", "o", cwd=tmp_path)   # (the last --d-model counts)
    seconds, peak = measured(done)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert flag.replace("-", "_") in done.stderr.splitlines()[-2], done.stderr[-2000:]
    assert peak < 2**30, (seconds, peak)             # (seconds: printed on failure, never asserted)


def test_a_large_vocab_json_is_refused_quickly(run, tmp_path):
    r = fresh(run, tmp_path)
    (r / "vocab.json").write_text('{"spec": [' + ", ".join(['"abcdefgh"'] * 5_000_000) + "]}")   # 55 MB
    done = command("predict", str(r), "-", cwd=tmp_path, stdin="(1 2)\n")
    seconds, peak = measured(done)
    assert done.returncode == 2 and "over the limit" in done.stderr, done.stderr[-2000:]
    assert peak < 2**30, (seconds, peak)             # (seconds: printed on failure, never asserted)
