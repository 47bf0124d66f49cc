"""Issue #74 ("A user's day, round 3"): the library without the notebook stack, stored measurements shipped with the
package, one kernel warning per environment without a compiler, and the smaller items."""
import json, os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _python(code, env=None, cwd="/"):
    "Run `code` in a fresh interpreter (one thread, outside the clone: the installed package); return the finished process."
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=cwd)


@pytest.mark.long   # most of a minute: run by --long (CI)
def test_no_compiler_warns_once_in_ten_runs(tmp_path):
    "Without a C++ compiler, ten processes print the kernel warning once in all, and it says how to silence it."
    env = {"CXX": str(tmp_path / "no-such-c++"), "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "TREEPE_CPU_KERNELS": "1"}
    code = "from treepe_nb.kernels import cpu_kernels; assert cpu_kernels() is None"
    runs = [_python(code, env) for _ in range(10)]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs if r.returncode]
    said = [r.stderr for r in runs if "could not be built" in r.stderr]
    assert len(said) == 1, [r.stderr for r in runs]
    assert "no C++ compiler" in said[0] and "TREEPE_CPU_KERNELS=0" in said[0]
    assert not any("compiler" in r.stderr.lower() and "not compatible" in r.stderr.lower() for r in runs)  # torch's banner
    assert "could not be built" in _python(code, {**env, "CXX": str(tmp_path / "other-c++")}).stderr  # another compiler: tried again


NOTEBOOK_STACK = ("matplotlib", "scipy", "ipywidgets", "IPython")   # what the library alone does not install
BLOCK = f"import sys\nfor m in {NOTEBOOK_STACK!r}: sys.modules[m] = None   # as if not installed\n"


def _settings():
    from configparser import ConfigParser
    cfg = ConfigParser(delimiters=["="]); cfg.read(ROOT / "settings.ini")
    return cfg["DEFAULT"]


def test_the_library_alone_needs_no_notebook_stack():
    "`pip install .` installs neither matplotlib, scipy nor the widgets; the extras and `dev` do."
    s = _settings()
    names = lambda key: {r.split(">")[0].split("=")[0].split("<")[0].lower() for r in s[key].split()}
    assert not names("requirements") & {m.lower() for m in NOTEBOOK_STACK}, s["requirements"]
    assert names("requirements") <= {"torch", "numpy", "pyyaml", "fastcore", "conllu", "tqdm", "ninja"}
    assert (names("plots_requirements"), names("stats_requirements")) == ({"matplotlib"}, {"scipy"})
    assert "ipywidgets" in names("dev_requirements")


def test_import_and_every_command_without_the_notebook_stack():
    "`import treepe_nb` and each console command's `--help` work where matplotlib, scipy, ipywidgets and IPython are missing."
    scripts = dict(e.split("=") for e in _settings()["console_scripts"].split())
    r = _python(BLOCK + "import treepe_nb, treepe_nb.tasks\nfrom treepe_nb import TreeAPE, Tree, batch_positions")
    assert r.returncode == 0, r.stderr
    for name, target in scripts.items():
        module, func = target.split(":")
        r = _python(BLOCK + f"sys.argv = [{name!r}, '--help']\nfrom {module} import {func}\n{func}()")
        assert r.returncode == 0 and "usage:" in r.stdout, (name, r.stderr[-2000:])


def test_a_plot_without_matplotlib_names_the_extra(tmp_path):
    "Where matplotlib is missing, a plot says which package and which extra install it (not a bare ImportError)."
    code = BLOCK + ("from treepe_nb import Tree\n"
                    "try: Tree.from_sexpr('(a b)').draw()\nexcept ModuleNotFoundError as e: print(e)\n"
                    "from treepe_nb.evidence import seed_interval\n"
                    "try: seed_interval([0.1, 0.2, 0.3])\nexcept ModuleNotFoundError as e: print(e)\n")
    out = _python(code).stdout.splitlines()
    assert out[0].startswith("Tree.draw needs matplotlib, which the library alone does not install") and '".[plots]"' in out[0], out
    assert out[1].startswith("seed_interval needs scipy") and '".[stats]"' in out[1], out


def test_the_time_to_go_leaves_the_evaluations_out_of_the_pace(tmp_path, capsys, monkeypatch):
    "After an evaluation the time to go was several times too high: the evaluation was folded into the step rate."
    import re
    from treepe_nb.model import ModelConfig
    from treepe_nb.tasks import TaskConfig
    from treepe_nb.train import TrainConfig, TrainRecipe, train
    slow, real = 3.0, TrainRecipe.evaluate_dev
    def evaluate_slowly(self):
        import time; time.sleep(slow); real(self)
    monkeypatch.setattr(TrainRecipe, "evaluate_dev", evaluate_slowly)
    cfg = TrainConfig(TaskConfig("tree-copy", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
                      enc_layers=1, dec_layers=1), steps=8, eval_every=3, eval_examples=1, out=str(tmp_path / "run"))
    train(cfg, progress=None, test=False, log_every=1e-9)
    lines = [l for l in capsys.readouterr().err.splitlines() if re.match(r"step [4-8]/8:", l)]   # after the first evaluation
    assert lines, "no progress lines"
    for l in lines:
        steps_left, step = float(re.search(r"about (\d+) s of steps to go", l)[1]), int(re.match(r"step (\d+)", l)[1])
        assert steps_left < slow, l                     # 4 steps of a tiny model: well under one evaluation
        assert f"and {(6 >= step) + 1} evaluation" in l and f"(the last took {slow:.0f} s)" in l, l


README_RECORDS = ("default_run.json", "config_example.json")   # what the README's snippets read


def test_the_readme_records_ship_with_the_package():
    "The copies installed with the package equal the records in nbs/results/ (the tools write those)."
    for name in README_RECORDS:
        shipped, record = ROOT / "treepe_nb/data/results" / name, ROOT / "nbs/results" / name
        assert shipped.read_bytes() == record.read_bytes(), f"{shipped} differs from {record}: cp {record} {shipped}"


def test_the_readme_snippets_work_from_an_installed_package(tmp_path):
    "`default_run_summary()` and `config_example_estimate()` failed after `pip install .`: they read the clone's nbs/."
    import shutil
    site = tmp_path / "site"                                   # the package as a wheel installs it: no nbs/ beside it
    shutil.copytree(ROOT / "treepe_nb", site / "treepe_nb", ignore=shutil.ignore_patterns("data", "__pycache__"))
    shutil.copytree(ROOT / "treepe_nb/data/results", site / "treepe_nb/data/results")
    env = {"PYTHONPATH": str(site)}
    code = ("import treepe_nb; print(treepe_nb.__file__)\nfrom treepe_nb.showdoc import default_run_summary, "
            "config_example_estimate\nprint(default_run_summary()); print(config_example_estimate())")
    r = _python(code, env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(site)) and "`treepe-train` took" in r.stdout and "this run takes about" in r.stdout
    r = _python("from treepe_nb.showdoc import default_run_summary; default_run_summary('results/nothing.json')", env, cwd=tmp_path)
    last = r.stderr.strip().splitlines()[-1]
    assert "results/nothing.json not found here" in last and "among the measurements installed with treepe_nb" in last, last
    assert "clone" not in last, last                          # no clone's notebooks folder inside site-packages


def test_run_runfolder_and_decoder_batch_import_from_the_package():
    "`from treepe_nb import Run, RunFolder, decoder_batch` failed: they were only in treepe_nb.runs and treepe_nb.batching."
    import treepe_nb
    from treepe_nb import Run, RunFolder, decoder_batch
    from treepe_nb.batching import decoder_batch as from_batching
    from treepe_nb.runs import Run as run, RunFolder as folder
    assert (Run, RunFolder, decoder_batch) == (run, folder, from_batching)
    assert {"Run", "RunFolder", "decoder_batch"} <= set(treepe_nb.__all__)


def test_forward_has_the_encodings_own_docstring():
    "`help(TreePositionalEncoding.forward)` showed torch's boilerplate, `TreeAPE.forward` had no docstring."
    import inspect, torch
    from treepe_nb import SequenceAPE, TreeAPE, TreePositionalEncoding
    boilerplate = inspect.getdoc(torch.nn.Module.forward)
    for forward in (TreePositionalEncoding.forward, TreeAPE.forward, SequenceAPE.forward):
        assert inspect.getdoc(forward) not in (None, boilerplate), forward
    assert "the maps `prepare` returned" in inspect.getdoc(TreeAPE.rotate_queries_and_keys)


def test_a_tensor_in_the_other_layout_names_the_layout_argument():
    "The shape error for [batch, length, heads, dim] queries did not mention layout=\"BLHD\"."
    import pytest, torch
    from treepe_nb import Tree, TreeAPE, batch_positions
    pos = batch_positions([Tree.from_sexpr("(a b c)").lcrs()])
    q = torch.randn(1, 3, 2, 8)                                           # [B, L, H, D]
    with pytest.raises(ValueError, match=r'got \(1, 3, 2, 8\); for \[batch, length, heads, dim\] .* layout="BLHD"'):
        TreeAPE(n=2, head_dim=8, num_heads=2).rotate_queries_and_keys(q, q, pos)
    with pytest.raises(ValueError, match=r'in layout=.BLHD., got \(1, 2, 3, 8\); .* layout="BHLD"'):
        TreeAPE(n=2, head_dim=8, num_heads=2, layout="BLHD").rotate(q.transpose(1, 2), pos)
    assert TreeAPE(n=2, head_dim=8, num_heads=2, layout="BLHD").rotate(q, pos).shape == q.shape


def test_the_tensorboard_hint_gives_a_command_that_works(tmp_path, monkeypatch):
    "The hint said `pip install treepe_nb[dev]`, which no index serves."
    import pytest
    from treepe_nb.train import _tensorboard
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ValueError, match=r'pip install tensorboard \(or, in a clone of treepe_nb, pip install -e "\.\[dev\]"\)'):
        _tensorboard(tmp_path, 0)


def test_the_start_line_explains_the_target_vocabulary():
    "`vocabularies 11 -> 19` did not say why the target side is larger (a label per pattern of child slots)."
    from treepe_nb.tracking import ArityVocab
    from treepe_nb.train import _target_tokens
    vocab = ArityVocab([("f", (0, 1)), ("f", (0,)), ("a", ())], n=2)
    assert _target_tokens(vocab) == "6 target tokens (2 labels, each once per pattern of child slots it was seen with, and 3 specials)"


def test_the_summary_reads_as_sentences():
    "`treepe-train` ended with 30 lines of JSON; `summary_text` says what each number is (wiring it into the command is 09c's)."
    from treepe_nb.report import summary_text
    m = {"perplexity": 1.25, "token_accuracy": 0.9, "exact_match": 0.5, "decoded": 40}
    s = {"run": "runs/x", "step": 1000, "best_step": 750, "exact_match": 0.5, "stopped_early": None, "seconds": 61.2,
         "dev": {"step": 1000, **m}, "dropped": {"repeated in a file": 3}, "test": {"step": 750, **m}}
    assert summary_text(s).splitlines() == [
        "runs/x: 1,000 steps in 61 s", "best.pt: step 750, the run's best dev exact match, 0.500",
        "last dev evaluation (step 1,000): perplexity 1.250, token accuracy 0.900, exact match 0.500 of 40 decoded",
        "left out of the data: 3 repeated in a file",
        "test split, scored with best.pt: perplexity 1.250, token accuracy 0.900, exact match 0.500 of 40 decoded",
        "runs/x/summary.json holds all of it"]


def test_treepe_train_ends_in_sentences_on_a_terminal_and_in_json_when_piped(tmp_path):
    "Item 8: treepe-train ended with a 30-line JSON dump; a terminal now gets `summary_text`, a pipe still gets JSON."
    import os, pty, subprocess, sys
    args = [sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--task", "tree-copy", "--steps", "2",
            "--eval-every", "0", "--d-model", "16", "--num-heads", "2", "--enc-layers", "1", "--dec-layers", "1",
            "--batch-size", "4", "--sizes", "16", "4", "4", "--no-progress", "--threads", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    main, side = pty.openpty()
    done = subprocess.run([*args, "--out", str(tmp_path / "a")], stdout=side, stderr=subprocess.PIPE, env=env, timeout=300)
    os.close(side)
    out = b""
    while True:
        try: chunk = os.read(main, 65536)
        except OSError: break
        if not chunk: break
        out += chunk
    os.close(main)
    text = out.decode()
    assert done.returncode == 0 and "summary.json holds all of it" in text and "{" not in text, text
    piped = subprocess.run([*args, "--out", str(tmp_path / "b")], capture_output=True, text=True, env=env, timeout=300)
    assert piped.returncode == 0 and json.loads(piped.stdout)["step"] == 2, piped.stdout[:500]
