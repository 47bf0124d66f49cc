"""The package as a user installs it: a wheel built from this repository ships the YAML sample corpus (every file,
with its NOTICE and licence texts) that `make_task("yaml-keys")` reads by default."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import treepe_nb
from treepe_nb.corpora import YAML_SAMPLE

ROOT = Path(__file__).resolve().parents[1]


def test_yaml_sample_lives_inside_the_package():
    assert YAML_SAMPLE.resolve().is_relative_to(Path(treepe_nb.__file__).resolve().parent)
    assert (YAML_SAMPLE / "NOTICE").is_file() and len(list(YAML_SAMPLE.rglob("*.y*ml"))) >= 1000


def test_k8s_manifests_live_inside_the_package_apart_from_the_sample():
    from treepe_nb.yaml_keys import K8S_MANIFESTS
    assert K8S_MANIFESTS.resolve().is_relative_to(Path(treepe_nb.__file__).resolve().parent)
    assert not K8S_MANIFESTS.resolve().is_relative_to(YAML_SAMPLE.resolve())   # no task trains on the probe's set
    assert (K8S_MANIFESTS / "README.md").is_file() and len(list(K8S_MANIFESTS.glob("*.yaml"))) >= 10


def test_wheel_ships_the_yaml_sample(tmp_path):
    # pip builds in the source folder (build/, *.egg-info): build a copy, so that the checkout stays clean
    src = tmp_path / "src"
    skip = {".git", "nbs", "tests", "_docs", "_proc", "build", "dist", "runs", ".pytest_cache", ".hypothesis", ".quarto"}
    def ignore(folder, names):             # top-level folders only: the sample has folders named tests/ too
        if Path(folder) != ROOT: return [n for n in names if n == "__pycache__"]
        return [n for n in names if n in skip or n.endswith(".egg-info") or n.startswith(".venv")]
    shutil.copytree(ROOT, src, ignore=ignore)
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(tmp_path / "dist")],
                         capture_output=True, text=True)
    assert run.returncode == 0, f"pip wheel failed:\n{run.stderr[-3000:]}"
    wheel, = (tmp_path / "dist").glob("treepe_nb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    sample = ROOT / "treepe_nb" / "data" / "yaml"
    files = {p.relative_to(ROOT).as_posix() for p in sample.rglob("*") if p.is_file()}
    assert {f"treepe_nb/data/yaml/{n}" for n in ("NOTICE", "LICENSE-Apache-2.0.txt", "LICENSE-MIT-0.txt")} <= names
    assert files <= names, f"not in the wheel: {sorted(files - names)[:5]}"
    assert sum(n.endswith((".yml", ".yaml")) for n in names) >= 1000
    k8s = {p.relative_to(ROOT).as_posix() for p in (ROOT / "treepe_nb" / "data" / "k8s").iterdir()}
    assert k8s and k8s <= names, f"k8s manifests not in the wheel: {sorted(k8s - names)[:5]}"
