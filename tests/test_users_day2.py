"""A user's day, round 2 (issue "A user's day, round 2"): what landed of it, one test each."""
import json

import pytest

from treepe_nb.cli import evaluate_run
from treepe_nb.model import ModelConfig
from treepe_nb.tasks import TaskConfig
from treepe_nb.train import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")      # conftest.py


def test_a_beam_evaluation_keeps_the_greedy_one(tmp_path):
    "`treepe-eval --beam 4` wrote over the greedy eval_test.json and recorded no beam."
    run = tmp_path / "run"
    train(TrainConfig(TaskConfig("tree-copy", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
                      enc_layers=1, dec_layers=1), steps=4, eval_every=0, out=str(run)), progress=False, test=False)
    greedy, beam = evaluate_run(run, "test", "last"), evaluate_run(run, "test", "last", beam=2)
    assert (greedy["beam"], beam["beam"]) == (None, 2)
    assert json.loads((run / "eval_test.json").read_text()) == greedy
    assert json.loads((run / "eval_test_beam2.json").read_text()) == beam
