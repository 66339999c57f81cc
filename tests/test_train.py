"""``lightning-hooks train`` tells an OpenMMLab 1.x config from an MMEngine one without mmcv 1.x installed (the main
venv has mmcv-lite 2.x, no ``mmcv.runner``): the 1.x config goes to the mmcv family's entry point, which says what it
needs; the MMEngine config is not the mmcv family's. The training itself is tested in .venv-mmcv1
(tests/families/mmcv/test_train*.py)."""

from __future__ import annotations

import importlib.util

import pytest

from lightning_hooks import train as dispatcher
from lightning_hooks.families.mmcv import train as mmcv_train
from lightning_hooks.families.mmengine import train as mmengine_train


def _has_mmcv_runner() -> bool:
    try:
        return importlib.util.find_spec("mmcv.runner") is not None
    except ImportError:
        return False


def test_a_1x_config_goes_to_the_mmcv_family_which_names_what_it_needs(tmp_path):
    if _has_mmcv_runner():
        pytest.skip("mmcv 1.x is installed here: tests/families/mmcv/test_train.py trains such configs")
    config = tmp_path / "old.py"
    config.write_text("runner = dict(type='EpochBasedRunner', max_epochs=1)\nlr_config = dict(policy='fixed')\n")
    assert mmcv_train.claims(str(config)) and not mmengine_train.claims(str(config))
    with pytest.raises(RuntimeError, match=r"an OpenMMLab 1.x config .* needs mmcv 1.x with mmcv.runner"):
        dispatcher.main([str(config)])


def test_an_mmengine_config_is_not_the_mmcv_familys(tmp_path):
    config = tmp_path / "new.py"
    config.write_text("train_cfg = dict(by_epoch=True, max_epochs=1)\noptim_wrapper = dict(optimizer=dict(type='SGD'))\n")
    assert not mmcv_train.claims(str(config)) and mmengine_train.claims(str(config))
    only_base = tmp_path / "derived.py"  # the _base_ decides; without mmcv 1.x the mmcv family cannot read it
    only_base.write_text(f"_base_ = [{str(config)!r}]\n")
    assert not mmcv_train.claims(str(only_base)) and mmengine_train.claims(str(only_base))
