"""notebooks/quickstart.ipynb runs top to bottom, so it never rots: README's command for it, as written, in a copy of
the checkout's layout (the notebook beside a ``.venv`` that is this environment), with ``jupyter-execute`` told by its
own config file (``JUPYTER_CONFIG_DIR``) to save the executed notebook, whose outputs are then checked. This is that
README block's run (tests/docs/test_snippets.py leaves it to this test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
from lh_testing import subprocess_env

ROOT = Path(__file__).parents[2]
COMMAND = ".venv/bin/jupyter-execute notebooks/quickstart.ipynb"


def test_quickstart_notebook_executes(tmp_path):
    assert f"```bash\n{COMMAND}\n```" in (ROOT / "README.md").read_text()
    checkout = tmp_path / "checkout"
    (checkout / "notebooks").mkdir(parents=True)
    (checkout / "notebooks" / "quickstart.ipynb").write_bytes((ROOT / "notebooks" / "quickstart.ipynb").read_bytes())
    (checkout / ".venv").symlink_to(sys.prefix)
    config = tmp_path / "jupyter"
    config.mkdir()
    (config / "jupyter_execute_config.py").write_text('c.NbClientApp.output_base = "executed"\n')
    env = subprocess_env(JUPYTER_CONFIG_DIR=str(config))
    result = subprocess.run(["bash", "-e", "-c", COMMAND], cwd=checkout, env=env, capture_output=True, text=True,
                            timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    notebook = nbformat.read(checkout / "notebooks" / "executed.ipynb", as_version=4)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the raw vs EMA plot
    report = "".join(o.get("text", "") for o in outputs)
    assert all(word in report for word in ("EMAHook", "PreciseBatchNormHook", "after_train_iter", "on_phase_end"))
