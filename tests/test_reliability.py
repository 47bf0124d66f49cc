"""Reliability, round 3: the failures an adversarial run found (issue "Reliability, round 3"), one test each,
each seen to fail before its fix."""
import pytest
import torch

from treepe_nb.cli import config_from_args
from treepe_nb.model import ModelConfig
from treepe_nb.runs import load_checkpoint, read_metrics
from treepe_nb.tasks import TaskConfig
from treepe_nb.train import RUN_PE, TrainConfig, train


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# 1. one default encoding for a run, however its model settings are given
@pytest.mark.parametrize("argv", [[], ["--d-model", "16"], ["--dropout", "0.1"], ["--num-heads", "2"]])
def test_model_flags_keep_the_default_encoding(argv):
    assert config_from_args(argv)[0].model.pe == RUN_PE == "ape-tree"


@pytest.mark.parametrize("text", ["model: {d_model: 16}\n", "model: {dropout: 0.1}\n", "d_model: 16\n",
                                  "task: tree-copy\nmodel: {src_pe: stack}\n"])
def test_a_model_section_without_pe_keeps_the_default_encoding(tmp_path, text):
    (tmp_path / "c.yaml").write_text(text)
    assert config_from_args(["--config", str(tmp_path / "c.yaml")])[0].model.pe == RUN_PE
    assert TrainConfig.from_dict(__import__("yaml").safe_load(text)).model.pe == RUN_PE


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
