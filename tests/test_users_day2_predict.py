"""A user's day, round 2 (issue "A user's day, round 2"): For programs over several lines, and masked keys on your own
manifests with `treepe-predict` and `treepe-eval --data`; one test each."""
import json, subprocess, sys

import pytest
import torch

from treepe_nb.model import ModelConfig
from treepe_nb.tasks import TaskConfig
from treepe_nb.train import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")      # conftest.py
PREDICT = [sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()"]
EVAL = [sys.executable, "-c", "from treepe_nb.cli import eval_cli; eval_cli()"]
TINY = dict(pe="stack", d_model=16, num_heads=2, enc_layers=1, dec_layers=1)


@pytest.fixture(scope="module")
def f2l(tmp_path_factory):
    "A For2Lam run, trained for two steps: the point is how programs are read, not what it answers."
    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("f2l") / "run"
    train(TrainConfig(TaskConfig("for2lam-short", sizes=(32, 4, 4)), ModelConfig(**TINY), steps=2, eval_every=0,
                      out=str(run)), progress=False, test=False)
    return run


@pytest.fixture(scope="module")
def k8s(tmp_path_factory):
    "A k8s-keys run (its default target, kind::parent::key), trained for two steps."
    torch.set_num_threads(1)
    run = tmp_path_factory.mktemp("k8s") / "run"
    train(TrainConfig(TaskConfig("k8s-keys", sizes=(64, 8, 8)), ModelConfig(pe="additive", d_model=16, num_heads=2,
                      enc_layers=1), steps=2, eval_every=0, out=str(run)), progress=False, test=False)
    return run


MULTI = """x = 1;
for y = 0; y < 3; y = y + 1 do
  x = x + y
endfor

y = 2;
if y < 3 then
  x = 1
else
  x = 2
endif
"""


def test_for_programs_over_several_lines_are_read_per_block(f2l, tmp_path):
    "`--format for` read one program per line: a program over several lines failed with an error that blamed line 1."
    (tmp_path / "multi.for").write_text(MULTI)
    r = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "multi.for"), "--format", "for", "--jsonl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    assert [(x["line"], x["last_line"]) for x in rows] == [(1, 4), (6, 11)]      # one output per program
    assert rows[0]["input"] == "".join(MULTI.splitlines(True)[:4]).rstrip("\n")
    from treepe_nb.predict import load_run, predict
    want = predict(load_run(f2l), [rows[0]["input"], rows[1]["input"]], format="for")
    assert [x["output"] for x in rows] == [p.text for p in want]
    plain = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "multi.for"), "--format", "for"], capture_output=True,
                           text=True)
    assert plain.returncode == 0 and plain.stdout.splitlines() == [p.text or "" for p in want], plain.stderr


def test_for_errors_give_the_files_own_line_and_column(f2l, tmp_path):
    "A one-line program's error read 'progs.for, line 3: line 1, column 25': the column message used the program's lines."
    (tmp_path / "progs.for").write_text("x = 1\n\nx = 1; for y = 0; y < 3; z = y + 1 do x = x endfor\n")
    r = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "progs.for"), "--format", "for"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert "progs.for, line 3, column 26: a for loop updates its own variable 'y'" in r.stderr, r.stderr
    assert "line 1" not in r.stderr, r.stderr
    (tmp_path / "multi.for").write_text(MULTI.replace("x = x + y", "x = x + % y"))
    r = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "multi.for"), "--format", "for"], capture_output=True, text=True)
    assert r.returncode == 2 and "multi.for, line 3, column 11: '%' is not For syntax" in r.stderr, r.stderr
    (tmp_path / "open.for").write_text("x = 1;\nfor y = 0; y < 3; y = y + 1 do\n  x = x + y\n")   # never closed
    r = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "open.for"), "--format", "for", "--skip-errors", "--jsonl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "open.for, line 3, column 12: expected ';' or 'endfor', got the end of the program" in r.stderr, r.stderr
    row = json.loads(r.stdout)
    assert (row["line"], row["last_line"], row["output"]) == (1, 3, None) and "open.for, line 3, column 12" in row["error"]


def test_whole_file_reads_one_program(f2l, tmp_path):
    "There was no way to read a whole file, blank lines and all, as one program."
    (tmp_path / "multi.for").write_text(MULTI.replace("\n\n", ";\n\n"))
    r = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "multi.for"), "--format", "for", "--whole-file", "--jsonl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (row,) = [json.loads(l) for l in r.stdout.splitlines()]
    assert (row["line"], row["last_line"]) == (1, 11)
    bad = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "multi.for"), "--format", "for", "--whole-file",
                          "--field", "source"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--whole-file reads the file as one input: --field cannot be given with it" in bad.stderr


MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  ?: 3
  selector:
    matchLabels:
      app: web
  template:
    spec:
      containers:
        - ?: web
          image: nginx:1.27
---
apiVersion: v1
kind: Service
metadata:
  name: web
"""


def test_suggest_keys_names_each_marked_position_with_scores(k8s, tmp_path):
    "`predict` refused yaml-keys / k8s-keys runs ('labels tokens'): no way to ask which key belongs where."
    from treepe_nb.predict import load_run, suggest_keys
    run = load_run(k8s)
    (tmp_path / "m.yaml").write_text(MANIFEST)
    recs = suggest_keys(run, tmp_path / "m.yaml", k=3)
    assert [(r["document"], r["line"], r["column"], r["path"]) for r in recs] == \
        [(0, 6, 3, "spec"), (0, 13, 11, "spec.template.spec.containers[0]"), (1, 16, 1, None)]
    first = recs[0]
    assert first["file"] == str(tmp_path / "m.yaml") and first["error"] is None and len(first["suggestions"]) == 3
    scores = [s["logprob"] for s in first["suggestions"]]
    assert all(s <= 0 for s in scores) and scores == sorted(scores, reverse=True)
    vocab = run.tgt_vocab
    assert all(s["target"] == f"Deployment::spec::{s['key']}" and s["target"] in vocab for s in first["suggestions"])
    assert recs[2]["suggestions"] == [] and "document 1 has no key written as ?" in recs[2]["error"]
    assert suggest_keys(run, MANIFEST, k=1)[0]["suggestions"] == first["suggestions"][:1]      # text works too


def test_suggest_keys_errors_name_file_line_and_column(k8s, tmp_path):
    "A manifest that is not YAML, with no ? key, a ? the run cannot represent, or unknown tokens: one clear line each."
    from treepe_nb.predict import load_run, suggest_keys
    run = load_run(k8s)
    (tmp_path / "bad.yaml").write_text("spec:\n  ?: [1, 2\n")
    with pytest.raises(ValueError, match=r"bad.yaml: invalid YAML at line 3, column 1"): suggest_keys(run, tmp_path / "bad.yaml")
    with pytest.raises(ValueError, match=r"none.yaml: no key written as \? in its 1 document"):
        (tmp_path / "none.yaml").write_text("kind: Pod\nspec: {}\n"); suggest_keys(run, tmp_path / "none.yaml")
    odd = "kind: Deployment\nnotakeyparent:\n  ?: 1\n"
    with pytest.raises(ValueError, match=r"line 3, column 3: the run's vocabulary has no key under 'notakeyparent' "
                                         r"in a Deployment"):
        suggest_keys(run, odd, name="odd.yaml")
    (rec,) = suggest_keys(run, odd, errors="skip")
    assert rec["suggestions"] == [] and "no key under 'notakeyparent'" in rec["error"]
    with pytest.raises(ValueError, match=r"m.yaml, line 4, column 9: token 'zzz-web' is not in the run's source vocabulary"):
        suggest_keys(run, MANIFEST.replace("name: web", "name: zzz-web", 1), unknown="raise", name="m.yaml")
    recs = suggest_keys(run, MANIFEST.replace("name: web", "name: zzz-web", 1), unknown="unk")
    assert recs[0]["unknown"] >= 1 and recs[0]["unknown"] == recs[1]["unknown"]
    deep = "kind: Pod\nspec:\n" + "".join("  " * (i + 1) + f"a{i}:\n" for i in range(20)) + "  " * 21 + "?: 1\n"
    with pytest.raises(ValueError, match=r"document 0 \(line 1\) has depth 23, deeper than the run's max_depth="):
        suggest_keys(run, deep)
    with pytest.raises(ValueError, match=r"duplicate key '\?'.*to mark two keys of one mapping, write \?1 and \?2"):
        suggest_keys(run, "spec:\n  ?: 1\n  ?: 2\n")
    assert [r["line"] for r in suggest_keys(run, "kind: Deployment\nspec:\n  ?1: 1\n  ?2: {}\n")] == [3, 4]
    with pytest.raises(ValueError, match=r"line 3, column 5: its parent key is marked too \(\?1\)"):
        suggest_keys(run, "kind: Deployment\n?1:\n    ?2: 3\n")


def test_predict_cli_suggests_keys(k8s, tmp_path):
    "`treepe-predict RUN manifest.yaml` stopped with 'labels tokens' for a k8s-keys run."
    (tmp_path / "m.yaml").write_text(MANIFEST)
    r = subprocess.run([*PREDICT, str(k8s), str(tmp_path / "m.yaml"), "--nbest", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{tmp_path / 'm.yaml'}, document 0, line 6, column 3 (spec.?): "), lines
    assert len(lines[0].split(": ", 1)[1].split(", ")) == 2
    assert "document 1 has no key written as ?: nothing to suggest" in r.stderr
    j = subprocess.run([*PREDICT, str(k8s), "-", "--nbest", "2", "--jsonl"], input=MANIFEST, capture_output=True, text=True)
    rows = [json.loads(l) for l in j.stdout.splitlines()]
    assert j.returncode == 0 and [(x["document"], x["line"]) for x in rows] == [(0, 6), (0, 13)], j.stderr
    assert rows[0]["file"] == "standard input" and len(rows[0]["suggestions"]) == 2
    bad = subprocess.run([*PREDICT, str(k8s), str(tmp_path / "m.yaml"), "--format", "sexpr"], capture_output=True, text=True)
    assert bad.returncode == 2 and "a k8s-keys run reads YAML manifests: --format sexpr cannot be given" in bad.stderr


def test_eval_data_scores_your_manifests_with_the_tasks_masking(k8s, tmp_path):
    "`treepe-eval` scored only the run's own splits: no way to score a folder of your own manifests."
    from treepe_nb.cli import evaluate_run
    from treepe_nb.corpora import mask_keys, yaml_corpus, yaml_example, yaml_key_nodes
    from treepe_nb.generators import task_rng
    from treepe_nb.runs import Run
    from treepe_nb.tasks import Task
    from treepe_nb.batching import TaskDataset
    from treepe_nb.train import evaluate
    from treepe_nb.yaml_keys import K8S_MANIFESTS
    rec = evaluate_run(k8s, checkpoint="last", data=[K8S_MANIFESTS], device="cpu")
    loaded = Run(k8s, "last")
    spec, info, seed = loaded.spec, loaded.info, loaded.config.task.seed
    docs, _ = yaml_corpus(K8S_MANIFESTS, info["max_example_nodes"])
    rng, examples = task_rng(seed, "yaml-keys-mask", 2), []
    for d in docs:                           # the task's own masking, by hand: its stream of the test split
        if int(d["tree"].depth.max()) > spec.max_depth or int(d["tree"].slot.max()) >= spec.n:
            continue
        if not yaml_key_nodes(d["kinds"]).any(): continue
        mask = mask_keys(d["kinds"], rng, info["mask_prob"])
        examples.append(yaml_example(d["tree"], d["kinds"], mask, loaded.src_vocab, loaded.tgt_vocab, info["target"]))
    task = Task(spec, TaskDataset([]), TaskDataset([]), TaskDataset(examples), loaded.src_vocab, loaded.tgt_vocab)
    want = evaluate(loaded.model, task, "test")
    for key in ("perplexity", "token_accuracy", "exact_match", "tokens"): assert rec[key] == pytest.approx(want[key])
    assert rec["documents"] == len(examples) and rec["masked_keys"] == want["tokens"]
    assert rec["data"] == [str(K8S_MANIFESTS)] and not (k8s / "eval_test.json").exists()
    assert json.loads((k8s / "eval_data_k8s.json").read_text()) == rec
    r = subprocess.run([*EVAL, str(k8s), "--checkpoint", "last", "--device", "cpu", "--data", str(K8S_MANIFESTS)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout) == rec, r.stderr


def test_eval_data_errors(k8s, f2l, tmp_path):
    "`treepe-eval --data` on what it cannot score: one line naming the file."
    from treepe_nb.cli import evaluate_run
    (tmp_path / "bad.yaml").write_text("kind: Pod\nspec: [1, 2\n")
    with pytest.raises(ValueError, match=r"bad.yaml: invalid YAML at line 3"):
        evaluate_run(k8s, checkpoint="last", data=[tmp_path / "bad.yaml"], device="cpu")
    (tmp_path / "flat.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match=r"no document of .*flat.yaml has a key to mask"):
        evaluate_run(k8s, checkpoint="last", data=[tmp_path / "flat.yaml"], device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty: a folder with no \.yaml or \.yml file"):
        evaluate_run(k8s, checkpoint="last", data=[tmp_path / "empty"], device="cpu")
    with pytest.raises(ValueError, match=r"--data scores YAML manifests for a yaml-keys or k8s-keys run; this run is "
                                         r"for2lam-short"):
        evaluate_run(f2l, checkpoint="last", data=[tmp_path / "flat.yaml"], device="cpu")
    r = subprocess.run([*EVAL, str(k8s), "--checkpoint", "last", "--data", str(tmp_path / "nothing.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "treepe-eval: error: no file or folder" in r.stderr and "nothing.yaml" in r.stderr


def test_old_mac_line_breaks_keep_the_files_own_line_numbers(f2l, tmp_path):
    "Round 5, item 7: a file with CR-only line breaks read as one line, so errors named line 1."
    (tmp_path / "progs.for").write_bytes(b"x = 1\r\rx = 1; for y = 0; y < 3; z = y + 1 do x = x endfor\r")
    r = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "progs.for"), "--format", "for"], capture_output=True, text=True)
    assert r.returncode == 2 and "progs.for, line 3, column 26: a for loop updates its own variable 'y'" in r.stderr, r.stderr


def test_skip_errors_skips_only_the_input_that_is_not_utf8(f2l, tmp_path):
    "Round 5, item 7: with --skip-errors one invalid UTF-8 line refused the whole file; now only its input fails."
    (tmp_path / "mixed.for").write_bytes(b"x = 1\n\ny = 2;\nx = \xff\n\nx = 3\n")
    r = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "mixed.for"), "--format", "for", "--skip-errors", "--jsonl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(l) for l in r.stdout.splitlines()]
    assert [(x["line"], x["last_line"], x["output"] is None) for x in rows] == [(1, 1, False), (3, 4, True), (6, 6, False)]
    assert "mixed.for, line 4: not UTF-8 (byte 4: b'\\xff')" in rows[1]["error"], rows[1]
    strict = subprocess.run([*PREDICT, str(f2l), str(tmp_path / "mixed.for"), "--format", "for"], capture_output=True,
                            text=True)
    assert strict.returncode == 2 and "mixed.for, line 4: not UTF-8" in strict.stderr, strict.stderr
