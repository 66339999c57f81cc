"""The README is a contract: its two commands, and its table of legacy hooks backed by named tests."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
MODULES = {
    "mmengine": ["mmengine.hooks"],
    "classy": ["classy_vision.hooks"],
    "imix": ["imix.engine.hooks", "imix.engine.hooks.periods", "lightning_hooks.compat.imix"],
    "mmdet": ["mmdet.engine.hooks"],
    "mmpretrain": ["mmpretrain.engine.hooks"],
    "mmseg": ["mmseg.engine.hooks"],
    "mmyolo": ["mmyolo.engine.hooks"],
    "mmpose": ["mmpose.engine.hooks"],
}


def _import_openmmlab() -> None:
    """OpenMMLab's hook modules import with the test stubs of tests/helpers/openmmlab_stubs.py."""
    spec = importlib.util.spec_from_file_location("openmmlab_stubs", ROOT / "tests" / "helpers" / "openmmlab_stubs.py")
    stubs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stubs)
    stubs.import_openmmlab([*stubs.LIBRARIES, "mmyolo"])
    stubs.import_modules(["mmpose.engine.hooks"])  # mmpose's register_all_modules needs the compiled xtcocotools


def test_ci_runs_the_readme_test_command_verbatim():
    demo, test = [c for c in re.findall(r"```bash\n(.+?)\n```", README) if "setup.sh" in c]
    assert "lightning-hooks demo" in demo and "pytest" in test
    assert test in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_hook_in_the_readme_table_is_a_real_class_with_a_real_test():
    table = README.split("<!-- hooks:start -->")[1].split("<!-- hooks:end -->")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.strip().splitlines()[2:]]
    files = [p.read_text() for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(rows) >= 35
    _import_openmmlab()
    for hook, family, _status, test in rows:
        modules = [importlib.import_module(m) for m in MODULES[family]]
        assert any(hasattr(m, hook) for m in modules), f"{hook} is not a {family} hook"
        source = next((f for f in files if f"def {test}(" in f), None)
        assert source is not None, f"README names {test} for {hook}, but no such test exists"
        assert hook in source, f"the file of {test} never mentions {hook}"
