"""Classy's ``use_sharded_ddp`` and VISSL's FSDP configs have no Lightning counterpart: each is refused, naming the
option and saying why and what to do instead (``lightning-hooks train`` on VISSL's FSDP task: test_vissl_module.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lightning_hooks.core.errors import ConfigError
from lightning_hooks.families.classy.module import build_classy_task
from lightning_hooks.families.classy.vissl_module import check_fsdp


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
