"""Classy's ``use_sharded_ddp`` and VISSL's FSDP configs have no Lightning counterpart: each is refused, naming the
option and saying why and what to do instead."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import real_torchvision
import vissl_train_runs

from lightning_hooks.core.errors import ConfigError
from lightning_hooks.families.classy.module import build_classy_task
from lightning_hooks.families.classy.vissl_module import check_fsdp
from lh_testing import HELPERS


def test_use_sharded_ddp_is_refused_saying_why():
    with pytest.raises(ConfigError, match=r"^use_sharded_ddp: .*fairscale's ShardedDataParallel.*use_sharded_ddp: false"):
        build_classy_task({"name": "classification_task", "use_sharded_ddp": True})


def _vissl(task="self_supervision_task", trunk="resnet", optimizer="sgd", heads=(("mlp", {}),)):
    """The config keys :func:`check_fsdp` reads, as VISSL's defaults.yaml names them."""
    return SimpleNamespace(TRAINER=SimpleNamespace(TASK_NAME=task), OPTIMIZER=SimpleNamespace(name=optimizer),
                           MODEL=SimpleNamespace(TRUNK=SimpleNamespace(NAME=trunk),
                                                 HEAD=SimpleNamespace(PARAMS=[list(h) for h in heads])))  # fmt: skip


@pytest.mark.parametrize(("config", "option"), [
    (_vissl(task="self_supervision_fsdp_task"), r"config\.TRAINER\.TASK_NAME=self_supervision_fsdp_task"),
    (_vissl(trunk="regnet_fsdp"), r"config\.MODEL\.TRUNK\.NAME=regnet_fsdp"),
    (_vissl(optimizer="sgd_fsdp"), r"config\.OPTIMIZER\.name=sgd_fsdp"),
    (_vissl(heads=(("mlp", {}), ("swav_head_fsdp", {}))), r"config\.MODEL\.HEAD\.PARAMS\[1\]=swav_head_fsdp"),
])  # fmt: skip
def test_vissl_fsdp_names_are_refused_naming_the_option(config, option):
    with pytest.raises(ConfigError, match=f"^{option}: VISSL's FSDP .+fairscale.+VISSL's own launcher"):
        check_fsdp(config)
    check_fsdp(_vissl())  # the same config without FSDP names passes


@pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")
def test_lightning_hooks_train_refuses_vissls_fsdp_task_before_training(tmp_path):
    command = [sys.executable, str(HELPERS / "vissl_cli.py"), "lightning", *vissl_train_runs.overrides("swav", tmp_path),
               "config.TRAINER.TASK_NAME=self_supervision_fsdp_task"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=vissl_train_runs.fresh_shell())
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "config.TRAINER.TASK_NAME=self_supervision_fsdp_task: VISSL's FSDP" in proc.stderr
    assert not list(tmp_path.glob("*.json"))  # no training: no stdout.json / metrics.json

