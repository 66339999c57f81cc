"""notebooks/quickstart.ipynb runs top to bottom, so it never rots."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient
from lh_testing import python_path

ROOT = Path(__file__).parents[2]


def test_quickstart_notebook_executes(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", python_path())
    notebook = nbformat.read(ROOT / "notebooks" / "quickstart.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the raw vs EMA plot
    report = "".join(o.get("text", "") for o in outputs)
    assert all(word in report for word in ("EMAHook", "PreciseBatchNormHook", "after_train_iter", "on_phase_end"))
