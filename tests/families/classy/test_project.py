"""A Classy project as ``classy-project`` generates it trains under ``lightning-hooks train`` from its folder exactly
as under its own ``classy_train.py``, which imports the project's packages; ``import_project`` does that for us.

The differential runs (classy_project_runs.py) generate the project with Classy's own ``classy-project``, add a small
config next to the template's (and 2 spawned loader workers to its train loader, which both sides start), and train it
in the project folder with the project's ``classy_train.py`` and with ``lightning-hooks train``: the console script on
one process, ``python -m lightning_hooks`` on two (``--devices 2``, whose second process Lightning starts) against
``classy_train.py --distributed_backend ddp`` under ``torchrun``. Every checkpoint file (weights, optimizer state,
losses, meters, counters) is equal bitwise, and so are the log lines.
"""

from __future__ import annotations

import sys

import pytest
import real_torchvision
from classy_train_runs import same

from lightning_hooks.families.classy.project import ProjectImportError, import_project, import_user_modules, user_function
from lightning_hooks.families.classy.train import classy_parser


@pytest.fixture
def clean_path(monkeypatch):
    """``sys.path`` and ``sys.modules`` as before the test (import_project changes both for the process)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_import_project_imports_every_package_of_the_folder(tmp_path, clean_path):
    (tmp_path / "lhp_models").mkdir()
    (tmp_path / "lhp_models" / "__init__.py").write_text("import lhp_models.net\n")
    (tmp_path / "lhp_models" / "net.py").write_text("REGISTERED = ['my_model']\n")
    (tmp_path / "lhp_script.py").write_text("raise SystemExit('a module file is not imported')\n")
    (tmp_path / "NOTES").write_text("not a package\n")
    assert import_project(str(tmp_path)) == ["lhp_models"]  # NOTES: not a package; lhp_script.py: a dot
    assert sys.modules["lhp_models.net"].REGISTERED == ["my_model"]
    assert sys.path[0] == str(tmp_path)
    assert "lhp_script" not in sys.modules


def test_a_project_package_that_does_not_import_names_itself_and_its_cause(tmp_path, clean_path):
    (tmp_path / "lhp_losses").mkdir()
    (tmp_path / "lhp_losses" / "__init__.py").write_text("import lhp_not_installed\n")
    with pytest.raises(ProjectImportError, match=r"lhp_losses: the project package 'lhp_losses' does not import "
                       r"\(ModuleNotFoundError: No module named 'lhp_not_installed'\)") as info:  # fmt: skip
        import_project(str(tmp_path))
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_a_missing_project_folder_is_named(tmp_path):
    with pytest.raises(ProjectImportError, match="--project_folder .*nowhere: no such folder"):
        import_project(str(tmp_path / "nowhere"))


def test_the_usage_line_shows_the_task_config_positional_not_config_file():
    usage = classy_parser().format_usage()
    assert "TASK.json" in usage and "--config_file" not in usage
    assert classy_parser().parse_args(["my.json", "--log_freq", "3"]).config_file == "my.json"


# ------------------------------------------------------------------------------------------- against classy_train.py
needs_torchvision = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test`")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import classy_project_runs

    project = classy_project_runs.make_project(tmp_path_factory.mktemp("classy_project"))
    return {(side, n): classy_project_runs.run(project, side, n)
            for side, n in (("host", 1), ("console", 1), ("host", 2), ("module", 2))}  # fmt: skip


def _same_checkpoints(ours: dict, theirs: dict) -> None:
    assert sorted(ours) == sorted(theirs) and theirs
    for file, ref in theirs.items():
        mine = ours[file]
        assert mine["input_args"]["config"] == ref["input_args"]["config"], file
        mine, ref = mine["classy_state_dict"], ref["classy_state_dict"]
        assert set(mine) - {"iteration"} == set(ref), file
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "meters", "base_model", "loss"):
            assert same(mine[key], ref[key]), (file, key)
        assert same(mine["optimizer"]["optim"]["state"], ref["optimizer"]["optim"]["state"]), file


@needs_torchvision
@pytest.mark.parametrize("side,processes", [("console", 1), ("module", 2)], ids=["console-script", "python-m-devices-2"])
def test_a_generated_project_trains_as_under_its_classy_train_py(runs, side, processes):
    theirs, ours = runs["host", processes], runs[side, processes]
    _same_checkpoints(ours["checkpoints"], theirs["checkpoints"])
    assert theirs["log"] and sorted(ours["log"]) == sorted(theirs["log"])  # every rank's


# ------------------------------------------------------------------------------------------ VISSL: --import, --hook-generator
def test_import_user_modules_imports_from_the_current_folder(tmp_path, clean_path, monkeypatch):
    (tmp_path / "lhp_ext.py").write_text("def hook_generator(config):\n    return ['hook']\n")
    monkeypatch.chdir(tmp_path)
    import_user_modules(["lhp_ext"])
    assert user_function("lhp_ext:hook_generator", "--hook-generator")(None) == ["hook"]


def test_a_user_module_that_does_not_import_is_named_with_the_flag(tmp_path, clean_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProjectImportError, match=r"--import lhp_missing: the module does not import \(ModuleNotFound"):
        import_user_modules(["lhp_missing"])
    (tmp_path / "lhp_ext2.py").write_text("")
    with pytest.raises(ProjectImportError, match="--hook-generator lhp_ext2:gen: module 'lhp_ext2' has no function"):
        user_function("lhp_ext2:gen", "--hook-generator")
    with pytest.raises(ProjectImportError, match="give MODULE:FUNCTION"):
        user_function("lhp_ext2", "--hook-generator")


def test_a_hook_generator_needs_a_vissl_config():
    from lightning_hooks import ClassyAdapter

    with pytest.raises(ValueError, match="hook_generator= builds the hooks of a VISSL config: pass vissl=... too"):
        ClassyAdapter([], hook_generator=lambda config: [])
