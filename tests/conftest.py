"""Shared pytest set-up: a headless plotting backend and the `--slow` option for notebook cells."""
import os

os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run notebook cells flagged with a test flag from settings.ini (e.g. `#| slow`)")
