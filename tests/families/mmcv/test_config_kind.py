"""Every config file the installed OpenMMLab 1.x libraries ship (mmdet 2.x, mmcls 0.x, mmseg 0.x) is a 1.x config to
``lightning-hooks train`` (:mod:`lightning_hooks.core.config_kind`), those that set a top-level ``train_cfg`` beside
``lr_config`` included; the library's own ``mmcv.Config`` confirms each file that gets none (a missing ``_base_``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_corpus import expected_kind, installed, wrong_kinds

pytest.importorskip("mmcv.runner", reason="mmcv 1.x lives in .venv-mmcv1 (bash scripts/setup.sh test)")

from mmcv import Config  # noqa: E402

from lightning_hooks.core.config_kind import OPENMMLAB_1X, config_kind  # noqa: E402

V1 = [name for name in installed() if expected_kind(name) == OPENMMLAB_1X]


@pytest.mark.parametrize("library", V1)
def test_every_shipped_1x_config_is_1x(library):
    files, problems = wrong_kinds(library, Config)
    assert files > 100 and not problems, "\n".join(problems)


def test_a_1x_config_with_a_top_level_train_cfg_is_1x():
    import mmdet

    shipped = Path(mmdet.__file__).parent / ".mim" / "configs" / "guided_anchoring" / "ga_retinanet_r101_caffe_fpn_mstrain_2x.py"
    keys = set(Config.fromfile(str(shipped)).keys())
    assert {"train_cfg", "lr_config"} <= keys
    assert config_kind(str(shipped)) == OPENMMLAB_1X
