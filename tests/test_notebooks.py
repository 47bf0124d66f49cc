"""Every notebook under nbs/ is one test, run in-process by nbdev (cells flagged with `tst_flags` are skipped
unless pytest gets `--slow`)."""
import pytest
import nbdev.test as nbdev_test  # imported as a module, so pytest does not collect nbdev's `test_nb`
from nbdev.config import get_config

cfg = get_config()
FLAGS = cfg.get("tst_flags", "").split()
NOTEBOOKS = sorted(p for p in cfg.nbs_path.rglob("*.ipynb")
                   if not any(part.startswith((".", "_")) for part in p.relative_to(cfg.nbs_path).parts))


def test_found_notebooks():
    assert len(NOTEBOOKS) >= 2, f"no notebooks found under {cfg.nbs_path}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: str(p.relative_to(cfg.nbs_path)))
def test_notebook(notebook, request):
    force = FLAGS if request.config.getoption("--slow") else None
    ok, seconds = nbdev_test.test_nb(notebook, skip_flags=FLAGS, force_flags=force)
    assert ok, f"{notebook.name} failed (traceback above, in the captured stderr)"
