"""``lightning-hooks train``: the config kind picks the entry point (:mod:`lightning_hooks.core.config_kind`), and a bad
input is one short message naming it, without a traceback.

A 1.x config goes to the mmcv family's entry point, which says what it needs where mmcv 1.x is not installed (the
main venv has mmcv-lite 2.x, no ``mmcv.runner``); the training itself is tested in .venv-mmcv1
(tests/families/mmcv/test_train*.py). Each bad file is given to the real CLI (``lightning_hooks.cli.main``), which
must print the file (the ``_base_``, the line) and the way out, exit 1, and print no traceback.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from lightning_hooks import cli
from lightning_hooks import train as dispatcher
from lightning_hooks.core.config_kind import MMENGINE, OPENMMLAB_1X, config_kind

MMENGINE_CFG = "train_cfg = dict(by_epoch=True, max_epochs=1)\noptim_wrapper = dict(optimizer=dict(type='SGD'))\n"
MMCV_CFG = "runner = dict(type='EpochBasedRunner', max_epochs=1)\nlr_config = dict(policy='fixed')\n"


def _has_mmcv_runner() -> bool:
    try:
        return importlib.util.find_spec("mmcv.runner") is not None
    except ImportError:
        return False


def train_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``lightning-hooks train argv``'s stderr, which must be one short error (exit 1, no traceback)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 1, err
    assert "Traceback" not in err and "usage:" not in err, err
    assert err.startswith("lightning-hooks train: error: ") and len(err.splitlines()) <= 4, err
    return err


def test_a_1x_config_goes_to_the_mmcv_family_which_names_what_it_needs(tmp_path):
    if _has_mmcv_runner():
        pytest.skip("mmcv 1.x is installed here: tests/families/mmcv/test_train.py trains such configs")
    config = tmp_path / "old.py"
    config.write_text(MMCV_CFG)
    assert config_kind(str(config)) == OPENMMLAB_1X
    with pytest.raises(RuntimeError, match=r"an OpenMMLab 1.x config .* needs mmcv 1.x with mmcv.runner"):
        dispatcher.main([str(config)])


def test_an_mmengine_config_is_not_the_mmcv_familys(tmp_path):
    config = tmp_path / "new.py"
    config.write_text(MMENGINE_CFG)
    only_base = tmp_path / "derived.py"  # the _base_ decides
    only_base.write_text(f"_base_ = [{str(config)!r}]\n")
    assert config_kind(str(config)) == config_kind(str(only_base)) == MMENGINE


def test_exactly_one_entry_point_trains_each_kind(tmp_path):
    (tmp_path / "a.py").write_text(MMENGINE_CFG)
    (tmp_path / "b.py").write_text(MMCV_CFG)
    (tmp_path / "c.json").write_text("{}")
    for first in (str(tmp_path / "a.py"), str(tmp_path / "b.py"), str(tmp_path / "c.json"), "config=test/x"):
        claimed = [c.legacy for f in dispatcher.families.registered() for c in f.train if c.claims(first)]
        assert len(claimed) == 1, (first, claimed)


def test_an_unknown_kind_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "notes.txt"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "usage: lightning-hooks train CONFIG" in err
    assert "no registered family trains 'notes.txt'" in err


@pytest.mark.parametrize("body", [MMENGINE_CFG, MMCV_CFG], ids=["mmengine", "openmmlab-1.x"])
def test_a_mistyped_config_path_is_named_with_the_files_that_look_alike(capsys, tmp_path, monkeypatch, body):
    (tmp_path / "retinanet_r50_fpn_1x_coco.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    err = train_error(capsys, "retinanet_r50_fpn_1x_cocoo.py")
    assert "config file retinanet_r50_fpn_1x_cocoo.py does not exist" in err
    assert "Did you mean: retinanet_r50_fpn_1x_coco.py?" in err and str(tmp_path) in err


@pytest.mark.parametrize("body", [MMENGINE_CFG, MMCV_CFG], ids=["mmengine", "openmmlab-1.x"])
def test_a_missing_base_is_named_with_the_config_that_names_it(capsys, tmp_path, body):
    (tmp_path / "base.py").write_text(body)
    derived = tmp_path / "derived.py"
    derived.write_text("_base_ = ['./base.py', '../_base_/schedule_1x.py']\nmodel = dict(num_classes=3)\n")
    err = train_error(capsys, str(derived))
    assert f"{derived}: its _base_ '../_base_/schedule_1x.py' is {tmp_path.parent / '_base_' / 'schedule_1x.py'}" in err
    assert "does not exist" in err


def test_a_missing_base_of_a_base_is_named(capsys, tmp_path):
    (tmp_path / "base.py").write_text("_base_ = 'runtime.py'\n" + MMENGINE_CFG)
    (tmp_path / "derived.py").write_text("_base_ = 'base.py'\n")
    err = train_error(capsys, str(tmp_path / "derived.py"))
    assert f"{tmp_path / 'base.py'}: its _base_ 'runtime.py' is {tmp_path / 'runtime.py'}, which does not exist" in err


def test_a_base_in_a_package_that_is_not_installed_is_named(capsys, tmp_path):
    (tmp_path / "derived.py").write_text("_base_ = 'mmnothere::retinanet/retinanet_r50_fpn_1x_coco.py'\n")
    err = train_error(capsys, str(tmp_path / "derived.py"))
    assert "the package 'mmnothere', which is not installed" in err


@pytest.mark.parametrize("base", [True, False], ids=["derived", "alone"])
def test_a_line_that_does_not_parse_is_shown(capsys, tmp_path, base):
    (tmp_path / "base.py").write_text(MMENGINE_CFG)
    config = tmp_path / "derived.py"
    config.write_text(("_base_ = ['./base.py']\n" if base else "") + "model = dict(num_classes=3\ntrain_cfg = 1\n")
    err = train_error(capsys, str(config))
    assert f"{config}, line {2 if base else 1}:\n    model = dict(num_classes=3\n" in err
    assert "syntax error: '(' was never closed" in err


def test_a_syntax_error_in_a_base_names_the_base(capsys, tmp_path):
    (tmp_path / "base.py").write_text("train_cfg = dict(max_epochs=1))\n")
    (tmp_path / "derived.py").write_text("_base_ = ['./base.py']\n")
    err = train_error(capsys, str(tmp_path / "derived.py"))
    assert f"{tmp_path / 'base.py'}, line 1:" in err and "unmatched ')'" in err


def test_a_py_file_that_is_no_training_config_says_which_keys_it_lacks(capsys, tmp_path):
    (tmp_path / "tta.py").write_text("tta_model = dict(type='DetTTAModel')\n")
    err = train_error(capsys, str(tmp_path / "tta.py"))
    assert "tta.py: not an OpenMMLab training config" in err and "optim_wrapper" in err and "lr_config" in err


def test_a_missing_classy_task_config_is_named(capsys, tmp_path, monkeypatch):
    (tmp_path / "template_config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    err = train_error(capsys, "template_confg.json")
    assert "Classy task config template_confg.json does not exist. Did you mean: template_config.json?" in err


def test_a_classy_task_config_that_is_not_json_shows_the_line(capsys, tmp_path):
    config = tmp_path / "task.json"
    config.write_text(json.dumps({"name": "classification_task", "num_epochs": 2}, indent=2).replace('2\n', '2,\n'))
    err = train_error(capsys, str(config))
    assert f"{config}, line 4 column 1: not valid JSON" in err
