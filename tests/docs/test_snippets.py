"""Every ```python and ```bash block of README.md and docs/*.md runs as written, extracted from the files.

- Python: the blocks of one page run in order in one interpreter and one namespace, as a reader runs them top to
  bottom, after README's visible setup block (the one under ``<!-- snippet-setup -->``, which defines the
  ``model``, ``train_loader`` and ``val_loader`` the snippets use).
- Bash: each block runs with ``bash -e`` in the repository root: a copy of the checkout, whose ``.venv`` is the
  environment running this test (what ``bash scripts/setup.sh [test]`` built; CI runs that first, from ``.ci/run``).
  So ``bash scripts/setup.sh`` in a block is a no-op here. Two blocks are run by a test of their own, as written:
  the one that runs this very test suite is CI's own command (``tests/docs/test_readme.py`` checks that CI runs it
  verbatim), and the notebook's ``jupyter-execute`` is ``tests/notebooks/test_quickstart.py``'s, which checks the
  executed notebook's outputs.

A new block in any of these files is picked up without changing this test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
SETUP_MARK = "<!-- snippet-setup -->\n"
CI_COMMAND = "bash scripts/setup.sh test && .venv/bin/python -m pytest"
NOTEBOOK_COMMAND = ".venv/bin/jupyter-execute notebooks/quickstart.ipynb"  # tests/notebooks/test_quickstart.py runs it
RUN_ELSEWHERE = (CI_COMMAND, NOTEBOOK_COMMAND)
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv*", "__pycache__", "*.egg-info", ".pytest_cache", "work_dirs",
                                     "demo_output", "lightning_logs", "outputs", "runs")  # fmt: skip


def blocks(page: Path, language: str) -> list[tuple[str, str]]:
    """``(where, code)`` of every block of ``language`` in ``page``; ``where`` is ``file:line`` of its first line."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        if match.group(1) == language:
            line = text.count("\n", 0, match.start(2)) + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(2)))
    return found


def setup_block() -> tuple[str, str]:
    readme = (ROOT / "README.md").read_text()
    assert readme.count(SETUP_MARK) == 1, "README.md needs exactly one <!-- snippet-setup --> block"
    start = readme.index(SETUP_MARK) + len(SETUP_MARK)
    where = next(w for w, code in blocks(ROOT / "README.md", "python") if readme.startswith(f"```python\n{code}", start))
    return where, FENCE.match(readme, start).group(2)


def python_pages() -> list[Path]:
    return [page for page in PAGES if blocks(page, "python")]


def bash_blocks() -> list[tuple[str, str]]:
    return [block for page in PAGES for block in blocks(page, "bash") if block[1].strip() not in RUN_ELSEWHERE]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the checkout whose ``.venv`` is this test's environment."""
    copy = tmp_path_factory.mktemp("checkout") / "lightning-hooks"
    shutil.copytree(ROOT, copy, ignore=COPY_IGNORE)
    (copy / ".venv").symlink_to(sys.prefix)
    (copy / "scripts" / "setup.sh").write_text("# built already: this test runs in the environment it builds\n")
    return copy


def environment(repo: Path) -> dict[str, str]:
    path = os.pathsep.join([str(repo / ".venv" / "bin"), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "PYTHONPATH": str(repo), "MPLBACKEND": "Agg", "COLUMNS": "120"}


DRIVER = """
import json, sys, traceback
snippets, openmmlab, vissl = json.load(sys.stdin)
if openmmlab:  # mmcv-lite here, compiled mmcv at the user's: stub exactly the compiled ops module (see the module)
    import openmmlab_stubs
    openmmlab_stubs.import_openmmlab()
if vissl:  # VISSL and its torchvision live outside the venv's import path here (tests/helpers/real_torchvision.py)
    import real_torchvision
    real_torchvision.activate()
namespace = {"__name__": "__main__"}
for where, code in snippets:
    try:
        exec(compile(code, where, "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"snippet at {where} failed")
"""


def test_the_extraction_sees_every_fence():
    for page in PAGES:
        fences = re.findall(r"^```(python|bash)\n", page.read_text(), re.M)
        assert len(fences) == len(blocks(page, "python")) + len(blocks(page, "bash")), page
    assert setup_block()[0].startswith("README.md:")
    assert len(python_pages()) >= 4 and len(bash_blocks()) >= 3


@pytest.mark.parametrize("page", python_pages(), ids=lambda p: p.name)
def test_python_snippets_run_in_order(page, repo):
    setup = setup_block()
    snippets = [setup, *(block for block in blocks(page, "python") if block != setup)]
    work = repo / "work" / page.stem
    work.mkdir(parents=True)
    # a page using an OpenMMLab library's scope needs its compiled mmcv ops, which mmcv-lite lacks
    openmmlab = any(f'default_scope="{lib}"' in code for _, code in snippets for lib in ("mmdet", "mmpretrain", "mmseg"))
    vissl = any(re.search(r"^import vissl|^from vissl", code, re.M) for _, code in snippets)
    env = environment(repo)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT / "tests" / "helpers")])
    result = subprocess.run([python_for(snippets), "-c", DRIVER], input=json.dumps([snippets, openmmlab, vissl]), cwd=work,
                            text=True, env=env, capture_output=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]


def python_for(snippets: list[tuple[str, str]]) -> str:
    """This environment's Python, or ``.venv-mmcv1``'s for a page whose snippets use mmcv 1.x (``mmcv.runner``), which
    the main venv's mmcv-lite 2.x lacks (tests/families/mmcv/test_venv.py)."""
    if not any(re.search(r"^(from|import) mmcv\.runner", code, re.M) for _, code in snippets):
        return sys.executable
    mmcv1 = ROOT / ".venv-mmcv1" / "bin" / "python"
    if not mmcv1.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{mmcv1} is missing: CI must run `bash scripts/setup.sh test`, which creates it")
        pytest.skip("no .venv-mmcv1 for this page's mmcv 1.x snippets: `bash scripts/setup.sh test` creates it")
    return str(mmcv1)


@pytest.mark.parametrize("where,code", bash_blocks(), ids=[where for where, _ in bash_blocks()])
def test_bash_commands_run(where, code, repo, tmp_path):
    """Each block as written; its ``mktemp`` folders land in the test's own temporary folder, which pytest prunes."""
    env = {**environment(repo), "TMPDIR": str(tmp_path)}
    result = subprocess.run(["bash", "-e", "-c", code], cwd=repo, env=env, text=True, capture_output=True, timeout=600)
    assert result.returncode == 0, f"{where}:\n{code}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
