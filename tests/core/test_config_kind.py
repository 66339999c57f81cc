"""The one config-kind decision of ``lightning-hooks train`` (:mod:`lightning_hooks.core.config_kind`): its tie-break,
and every config file the installed OpenMMLab 2.0 libraries ship (the 1.x ones: tests/families/mmcv/test_config_kind.py,
in .venv-mmcv1). The command-line errors are tested in tests/test_train.py."""

from __future__ import annotations

import pytest
from config_corpus import expected_kind, installed, wrong_kinds
from mmengine.config import Config

from lightning_hooks.core.config_kind import CLASSY, MMENGINE, OPENMMLAB_1X, VISSL, ConfigFileError, config_kind

V2 = [name for name in installed() if expected_kind(name) == MMENGINE]


@pytest.mark.parametrize("library", V2)
def test_every_shipped_2_0_config_is_mmengines(library):
    files, problems = wrong_kinds(library, Config)
    assert files > 100 and not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("optim_wrapper = dict()\nrunner = dict(type='IterBasedRunner')\n", MMENGINE),  # 1.x leftovers: 2.0 wins
        ("train_cfg = dict(rpn=dict())\nlr_config = dict(policy='step')\n", OPENMMLAB_1X),  # old mmdet 2.x
        ("train_cfg = dict(by_epoch=True, max_epochs=1)\n", MMENGINE),
        ("data = dict()\ntotal_epochs = 12\n", OPENMMLAB_1X),
        ("if True:\n    default_scope = 'mmdet'\n", MMENGINE),  # keys set in a block count
    ],
)
def test_the_tie_break(tmp_path, text, kind):
    (tmp_path / "c.py").write_text(text)
    assert config_kind(str(tmp_path / "c.py")) == kind


def test_the_bases_decide_and_what_a_derived_config_deletes_is_gone(tmp_path):
    (tmp_path / "schedule.py").write_text("lr_config = dict(policy='step')\n")
    (tmp_path / "runtime.py").write_text("train_cfg = dict(by_epoch=True)\n")
    (tmp_path / "a.py").write_text("_base_ = ['schedule.py', 'runtime.py']\n")
    (tmp_path / "b.py").write_text("_base_ = ['schedule.py', 'runtime.py']\ndel _base_.lr_config\n")
    (tmp_path / "c.py").write_text("_base_ = '{{fileDirname}}/runtime.py'\n")
    assert config_kind(str(tmp_path / "a.py")) == OPENMMLAB_1X
    assert config_kind(str(tmp_path / "b.py")) == config_kind(str(tmp_path / "c.py")) == MMENGINE


def test_a_base_in_an_installed_package_is_read_from_its_shipped_configs(tmp_path):
    (tmp_path / "c.py").write_text("_base_ = 'mmpretrain::resnet/resnet18_8xb16_cifar10.py'\n")
    assert config_kind(str(tmp_path / "c.py")) == MMENGINE


def test_a_base_cycle_is_named(tmp_path):
    (tmp_path / "a.py").write_text("_base_ = 'b.py'\n")
    (tmp_path / "b.py").write_text("_base_ = 'a.py'\n")
    with pytest.raises(ConfigFileError, match=r"b.py: its _base_ 'a.py' includes it again \(a cycle\)"):
        config_kind(str(tmp_path / "a.py"))


def test_classy_vissl_and_nothing(tmp_path):
    (tmp_path / "task.json").write_text("{}")
    assert config_kind(str(tmp_path / "task.json")) == CLASSY
    assert config_kind("config=pretrain/simclr/simclr_8node_resnet") == VISSL
    assert config_kind("notes.txt") is None
