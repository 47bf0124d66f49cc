"""The `code-names` task end to end (issue: function names from real code): a function's tokens, split by the task's
own BPE tokenizer, carry their places in the syntax tree through batching (`TokenCollator`) into any source encoding;
the run folder keeps the tokenizer (`tokenizer.json`, read back as data) and `treepe-predict RUN file.py` names the
file's functions."""
import json, os, subprocess, sys

import pytest

from treepe_nb.code_names import TokenCollator
from treepe_nb.model import ModelConfig
from treepe_nb.runs import RunFolder
from treepe_nb.tasks import TaskConfig, make_task
from treepe_nb.train import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")      # conftest.py
OPTIONS = {"vocab_size": 500}
SAMPLE = '''import os

def read_config_file(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]

class Box:
    def __init__(self, size):
        self.size = size

    def compute_area(self, other):
        total = self.size * other
        return total
'''


def tiny(out, src_pe, **options):
    cfg = TrainConfig(TaskConfig("code-names", sizes=(48, 8, 8), options={**OPTIONS, **options}),
                      ModelConfig(pe="sinusoidal", src_pe=src_pe, d_model=16, num_heads=2, enc_layers=1, dec_layers=1),
                      steps=2, eval_every=0, eval_examples=1, batch_size=8, threads=1, out=str(out))
    train(cfg, progress=False)
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return tiny(tmp_path_factory.mktemp("names") / "run", "stack")


def test_the_task_carries_positions_into_its_batches():
    task = make_task("code-names", sizes=(16, 4, 4), options=OPTIONS)
    assert task.spec.src_given and task.spec.src_format == "python" and task.tokenizer is not None
    assert isinstance(task.collate, TokenCollator)
    batch = next(iter(task.loader("train", batch_size=4)))
    assert batch.src_pos.paths.shape[:2] == batch.src_ids.shape and batch.src_pos.paths.shape[2] == task.spec.max_depth
    assert int(batch.src_pos.depth.max()) <= task.spec.max_depth        # truncated paths: depth at most their width


def test_a_run_keeps_its_tokenizer_and_names_a_files_functions(run, tmp_path):
    from treepe_nb.predict import load_run, predict_names
    assert (run / RunFolder.TOKENIZER).is_file()
    rows = predict_names(load_run(run), SAMPLE)
    assert [(r["line"], r["name"]) for r in rows] == [(3, "read_config_file"), (8, "__init__"), (11, "compute_area")]
    assert all(r["error"] is None and isinstance(r["predicted"], list) for r in rows)
    (tmp_path / "sample.py").write_text(SAMPLE)
    done = subprocess.run([sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()", str(run),
                           str(tmp_path / "sample.py"), "--jsonl"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert [json.loads(l)["name"] for l in done.stdout.splitlines()] == ["read_config_file", "__init__", "compute_area"]


def test_a_planted_tokenizer_link_is_refused(run, tmp_path):
    import shutil
    from treepe_nb.predict import load_run, predict_names
    r = tmp_path / "r"
    shutil.copytree(run, r)
    (r / RunFolder.TOKENIZER).unlink()
    (tmp_path / "elsewhere.json").write_text((run / RunFolder.TOKENIZER).read_text())
    (r / RunFolder.TOKENIZER).symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ValueError, match="not a plain file"): predict_names(load_run(r), SAMPLE)


@pytest.mark.long   # most of a minute: run by --long (CI)
@pytest.mark.parametrize("src_pe,options", [("none", {}), ("rotary", {}), ("additive", {"kinds": True})])
def test_every_kind_of_source_encoding_trains_on_the_tokens(tmp_path, src_pe, options):
    out = tiny(tmp_path / src_pe, src_pe, **options)
    assert (out / RunFolder.LAST).is_file()
