"""Issue #74 ("A user's day, round 3"): the library without the notebook stack, stored measurements shipped with the
package, one kernel warning per environment without a compiler, and the smaller items."""
import os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python(code, env=None, cwd="/"):
    "Run `code` in a fresh interpreter (one thread, outside the clone: the installed package); return the finished process."
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=cwd)


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
