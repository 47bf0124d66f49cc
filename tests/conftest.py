"""Shared pytest set-up: a headless plotting backend, the `--slow` option for notebook cells, the CPU kernels built
before any test, and the `one_thread` fixture."""
import os

import pytest
import torch

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config):
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


@pytest.fixture
def one_thread():
    "Torch on one thread for the test (models this small train fastest so, and no result depends on the count)."
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
