"""Shared pytest set-up: a headless plotting backend and the `--slow` option for notebook cells."""
import os

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config):
    # Notebooks gate their long benchmarks on this variable (so that Run All in JupyterLab stays short); `--slow`
    # runs them.
    if config.getoption("--slow", default=False): os.environ["TREEPE_BENCHMARKS"] = "1"


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run notebook cells flagged with a test flag from settings.ini (e.g. `#| slow`)")
