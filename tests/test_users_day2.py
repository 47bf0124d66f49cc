"""A user's day, round 2 (issue "A user's day, round 2"): what landed of it, one test each."""
import json, re

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


def test_resume_says_where_it_resumes(tmp_path, capsys):
    "`--resume` printed no 'resumed from step N'."
    cfg = TrainConfig(TaskConfig("tree-copy", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
                      enc_layers=1, dec_layers=1), steps=4, eval_every=0, out=str(tmp_path / "run"))
    train(cfg, progress=False, test=False)
    capsys.readouterr()
    train(TrainConfig.from_dict({**cfg.to_dict(), "steps": 6}), resume=True, progress=False, test=False)
    assert f"resuming {tmp_path / 'run'} from last.pt at step 4 of 6" in capsys.readouterr().err


def test_the_time_to_go_leaves_out_the_first_step(tmp_path, capsys):
    "The first ETA read 'about 67583 s to go': step 1 (a kernel build, cold caches) set the pace; now the steps after it do."
    cfg = TrainConfig(TaskConfig("tree-copy", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
                      enc_layers=1, dec_layers=1), steps=4, eval_every=0, out=str(tmp_path / "run"))
    train(cfg, progress=None, test=False, log_every=1e-9)
    lines = [l for l in capsys.readouterr().err.splitlines() if re.match(r"step \d+/4:", l)]   # not the evaluation's
    assert lines[0].startswith("step 1/4") and "to go" not in lines[0], lines
    assert len(lines) >= 3 and all("to go" in l for l in lines[1:]), lines


def test_every_drop_is_counted_at_the_start_and_in_the_summary(tmp_path, capsys):
    "Of a user's pairs file, repeated pairs and pairs over max_example_nodes were removed with no word but in vocab.json."
    rows = [{"source": f"(f a{i} b{i % 7})", "target": f"(g b{i % 7} a{i})"} for i in range(60)]
    rows += rows[:5]                                                       # 5 repeats
    rows.append({"source": "(f " + " ".join(f"x{i}" for i in range(40)) + ")", "target": "(g a)"})   # 41 nodes
    (tmp_path / "d.jsonl").write_text("\n".join(map(json.dumps, rows)))
    cfg = TrainConfig(TaskConfig("pairs", sizes=(40, 5, 5), options={"data": str(tmp_path / "d.jsonl"), "max_example_nodes": 30}),
                      ModelConfig(pe="stack", d_model=16, num_heads=2), steps=1, eval_examples=1, out=str(tmp_path / "r"))
    summary = train(cfg, progress=False)
    err = capsys.readouterr().err
    assert "left out: 5 repeated in a file, 1 over max_example_nodes (30), 10 beyond sizes (40, 5, 5)" in err, err
    assert summary["dropped"] == json.loads((tmp_path / "r/summary.json").read_text())["dropped"] == \
        {"repeated in a file": 5, "over max_example_nodes": 1, "beyond sizes": 10}


def test_unknown_tokens_are_counted(tmp_path):
    "`--unknown unk` mapped tokens to <unk> without a count."
    import subprocess, sys
    run = tmp_path / "run"
    train(TrainConfig(TaskConfig("tree-copy", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
                      enc_layers=1, dec_layers=1), steps=2, eval_every=0, out=str(run)), progress=False, test=False)
    from treepe_nb.predict import load_run, predict
    got = predict(load_run(run), ["(1 (2 zz) yy)", "(1 2)"], unknown="unk")
    assert [p.unknown for p in got] == [2, 0]
    done = subprocess.run([sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()", str(run), "-",
                           "--unknown", "unk", "--jsonl"], input="(1 (2 zz) yy)\n(1 2)\n", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [json.loads(l).get("unknown") for l in done.stdout.splitlines()] == [2, None]
    assert "2 token(s) of 1 input(s) are not in the run's vocabulary and were read as <unk>" in done.stderr


def test_a_depth_mean_below_min_depth_is_refused():
    "`depth_mean` was clamped silently: a mean below min_depth drew every tree at min_depth."
    from treepe_nb.tasks import make_task
    with pytest.raises(ValueError, match=r"tree-copy: depth_mean=-5 is below min_depth=1"):
        make_task(TaskConfig("tree-copy", sizes=(8, 2, 2), options={"depth_mean": -5}))
    assert len(make_task(TaskConfig("tree-copy", sizes=(8, 2, 2), options={"depth_mean": 1})).train) == 8


def test_one_input_without_a_finite_hypothesis_does_not_stop_its_batch(tmp_path):
    "With --skip-errors, one input's decoding failure ('no hypothesis has a finite score') stopped its whole batch."
    import torch
    from treepe_nb.predict import load_run, predict
    run = tmp_path / "run"
    train(TrainConfig(TaskConfig("tree-copy", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
                      enc_layers=1, dec_layers=1), steps=2, eval_every=0, out=str(run)), progress=False, test=False)
    loaded = load_run(run)
    small, big = "(1 2)", "(17 10 (18 (15 1 (16 10 (18 1 2))) (13 (12 (14 10 2) (13 10 10)) (14 10 (18 1 2)))))"
    real = loaded.model.generate
    def one_fails(ids, *a, **kw):                             # the second input of the batch ends with no finite hypothesis
        out = real(ids, *a, **kw)
        return [out[0], []] + out[2:] if len(out) > 1 else out
    loaded.model.generate = one_fails
    got = predict(loaded, [small, big], errors="skip")
    assert got[0].error is None and got[0].text is not None
    assert got[1].output is None and "input 1: no hypothesis has a finite score" in got[1].error
    with pytest.raises(ValueError, match="input 1: no hypothesis has a finite score"): predict(loaded, [small, big])


def test_a_task_read_from_your_files_uses_all_of_it_by_default(tmp_path, capsys):
    "A file of one's own was capped at 1,000 / 100 / 100 by default ('661 examples of your files unused')."
    from treepe_nb.tasks import make_task
    rows = [{"source": f"(f a{i} b{i % 7})", "target": f"(g b{i % 7} a{i})"} for i in range(1500)]
    (tmp_path / "d.jsonl").write_text("\n".join(map(json.dumps, rows)))
    task = make_task(TaskConfig("pairs", options={"data": str(tmp_path / "d.jsonl")}))
    assert [len(s) for s in task.splits.values()] == [1200, 150, 150]                 # all of it, 80 / 10 / 10
    assert sum(task.info["unused"]) == 0
    capped = make_task(TaskConfig("pairs", sizes=(100, 10, 10), options={"data": str(tmp_path / "d.jsonl")}))
    assert [len(s) for s in capped.splits.values()] == [100, 10, 10]                  # --sizes caps when given
    assert len(make_task(TaskConfig("tree-copy")).train) == 1000                      # a generated task: 1,000 / 100 / 100


def test_no_test_is_stored_in_the_runs_config(tmp_path):
    "`--no-test` was not stored in the run's config: config.yaml could not tell whether the test split was scored."
    import yaml
    from treepe_nb.cli import config_from_args
    args = ["--task", "tree-copy", "--sizes", "32", "4", "4", "--pe", "stack", "--d-model", "16", "--num-heads", "2",
            "--enc-layers", "1", "--dec-layers", "1", "--steps", "2", "--eval-every", "0"]
    for flag, scored in (("--no-test", False), (None, True)):
        cfg, _ = config_from_args(args + ["--out", str(tmp_path / str(scored))] + ([flag] if flag else []))
        assert cfg.test is scored
        summary = train(cfg, progress=False)
        assert yaml.safe_load((tmp_path / str(scored) / "config.yaml").read_text())["test"] is scored
        assert ("test" in summary) is scored
    resumed, _ = config_from_args(["--resume", "--out", str(tmp_path / "False"), "--steps", "3"])
    assert resumed.test is False                                                      # a resume keeps the run's choice


def test_a_tie_in_best_metric_is_broken_by_dev_perplexity():
    "A tie in best_metric kept the first checkpoint with no tie-break."
    from treepe_nb.train import _improves
    assert _improves("exact_match", {"exact_match": 0.6, "perplexity": 2.0}, 0.6, 2.5)
    assert not _improves("exact_match", {"exact_match": 0.6, "perplexity": 3.0}, 0.6, 2.5)


def test_a_flat_task_options_in_your_config_file_is_refused(tmp_path):
    "A flat task_options in a config file implied the paper preset (and flat model fields that era's settings) unsaid."
    import subprocess, sys
    (tmp_path / "c.yaml").write_text("task: tree-copy\ntask_options: {depth_mean: 3}\n")
    done = subprocess.run([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--config",
                           str(tmp_path / "c.yaml"), "--out", str(tmp_path / "r")], capture_output=True, text=True)
    assert done.returncode == 2 and "task_options at the top level is the flat form of records" in done.stderr, done.stderr
    assert not (tmp_path / "r").exists()


def test_the_quick_subset_names_test_files_that_exist_and_the_readme_gives_it():
    "The README's test command gave no duration and no quick subset."
    from pathlib import Path
    import conftest
    here = Path(__file__).parent
    assert conftest.QUICK and all((here / f).is_file() for f in conftest.QUICK), conftest.QUICK
    readme = (here.parent / "README.md").read_text()
    assert "python -m pytest tests --quick" in readme and "minutes" in readme.split("## Develop")[1]
