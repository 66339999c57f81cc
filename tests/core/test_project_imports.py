"""``core.project_imports``: a config's ``custom_imports`` imported from the folder the command runs in, with the
library's own ``import_modules_from_strings``; a module that does not import is an ``ImportError`` naming it.
The whole-project runs are tests/families/mmengine/test_project.py and tests/families/mmcv/test_project.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mmengine.utils import import_modules_from_strings

from lightning_hooks.core.project_imports import import_project, working_dir_on_path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with ``projects/demo_proj_pi/`` (a package setting a flag when imported), the current folder, and
    ``sys.path`` / ``sys.modules`` restored afterwards."""
    package = tmp_path / "projects" / "demo_proj_pi"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("IMPORTED = True\n")
    (package / "broken.py").write_text("import demo_proj_pi_missing_dependency\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield tmp_path
    for name in [m for m in sys.modules if m == "projects" or m.startswith("projects.")]:
        del sys.modules[name]


def test_the_working_folder_goes_first_on_the_path_once(project: Path) -> None:
    assert working_dir_on_path() == str(project) == sys.path[0]
    working_dir_on_path()
    assert sys.path.count(str(project)) == 1


def test_the_configs_modules_import_from_the_working_folder(project: Path) -> None:
    import_project({"custom_imports": {"imports": ["projects.demo_proj_pi"]}}, "my_config.py", import_modules_from_strings)
    assert sys.modules["projects.demo_proj_pi"].IMPORTED
    import_project({}, "my_config.py", import_modules_from_strings)  # no custom_imports: nothing to do


@pytest.mark.parametrize(("module", "missing"), [
    ("projects.demo_proj_pi.broken", "demo_proj_pi_missing_dependency"),  # a dependency the module lacks
    ("projects.demo_proj_pi.misspelt", "projects.demo_proj_pi.misspelt"),  # a name in custom_imports
])  # fmt: skip
def test_a_module_that_does_not_import_is_named_with_the_error_it_met(project: Path, module: str, missing: str) -> None:
    cfg = {"custom_imports": {"imports": ["projects.demo_proj_pi", module]}}
    with pytest.raises(ImportError) as raised:
        import_project(cfg, "configs/my_config.py", import_modules_from_strings)
    message = str(raised.value)
    assert message.startswith(f"configs/my_config.py: custom_imports: {module!r} does not import: "
                              f"ModuleNotFoundError: No module named {missing!r}")  # fmt: skip
    assert str(project) in message and "pip install -e ." in message
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)


def test_allowed_failures_warn_and_go_on_as_the_library_does(project: Path) -> None:
    cfg = {"custom_imports": {"imports": ["projects.demo_proj_pi.broken", "projects.demo_proj_pi"],
                              "allow_failed_imports": True}}  # fmt: skip
    with pytest.warns(UserWarning, match="projects.demo_proj_pi.broken failed to import and is ignored"):
        import_project(cfg, "my_config.py", import_modules_from_strings)
    assert "projects.demo_proj_pi" in sys.modules and os.getcwd() == str(project)
