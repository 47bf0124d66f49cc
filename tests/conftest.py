"""Shared pytest set-up: a headless plotting backend, the `--long` set (left out by default), the `--slow` option for
notebook cells, the `--quick` subset, the CPU kernels built before any test, and the `one_thread` fixture."""
import os

import pytest
import torch

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config):
    config.addinivalue_line("markers", "long: a single test that takes most of a minute (a task built from a large corpus, "
                                       "several trainings); left out by default like the LONG files, run by --long")
    # Notebooks gate their long benchmarks on this variable (so that Run All in JupyterLab stays short); `--slow`
    # runs them.
    if config.getoption("--slow", default=False): os.environ["TREEPE_BENCHMARKS"] = "1"


def pytest_sessionstart(session):
    # Build (or load) the CPU kernels of the position maps once, before any test: on a fresh machine the first build
    # takes about a minute and says so on stderr, which would otherwise land in whichever test, or test's
    # subprocess, rotates first.
    from treepe_nb.kernels import cpu_kernels
    cpu_kernels()


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run notebook cells flagged with a test flag from settings.ini (e.g. `#| slow`)")
    parser.addoption("--long", action="store_true", default=False,
                     help="also run the long tests: every notebook top to bottom, the documentation site in a browser, "
                          "the kill-and-resume and adversarial drills (CI runs them; `--slow` implies `--long`)")
    parser.addoption("--quick", action="store_true", default=False,
                     help="only the tests that check an install (the package, the encodings, the model, the tasks and "
                          "the README's quick start): a few minutes, where the whole suite takes a quarter of an hour or more")


# What `--quick` keeps: one test file per layer of the library, and the README's own commands (not the notebooks, the
# browser, the crash-and-resume drills or the fuzzing, which the full suite runs).
QUICK = ("test_package.py", "test_trees.py", "test_sequence.py", "test_stack.py", "test_tracking.py", "test_additive.py",
         "test_attention.py", "test_model.py", "test_tasks.py", "test_readme.py")


# What `--long` adds to the default run: the files whose tests take minutes together (each notebook run top to bottom,
# the site built and read in a browser, processes killed and resumed, the adversarial and fuzzing drills), and the single
# tests marked `@pytest.mark.long`. CI runs them.
LONG = ("test_notebooks.py", "test_docs.py", "test_reliability.py", "test_reliability4.py", "test_reliability5.py",
        "test_fuzz.py", "test_runs.py")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--quick"): keep = [i for i in items if i.path.name in QUICK]
    elif config.getoption("--long") or config.getoption("--slow"): return
    else: keep = [i for i in items if i.path.name not in LONG and i.get_closest_marker("long") is None]
    kept = set(map(id, keep))
    config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
    items[:] = keep


@pytest.fixture
def one_thread():
    "Torch on one thread for the test (models this small train fastest so, and no result depends on the count)."
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
