"""OpenMMLab 1.x hooks (``mmcv.runner``, mmcv 1.x) inside lightning.Trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning_hooks.core.config_kind import OPENMMLAB_1X
from lightning_hooks.core.errors import ConfigError
from lightning_hooks.core.family import (
    Family,
    Later,
    TrainCommand,
    adapter_options,
    check_keys,
    expect,
    lazy_exports,
    message,
)
from lightning_hooks.families.mmcv import logging as mmcv_logging
from lightning_hooks.families.mmcv import names, train
from lightning_hooks.families.mmcv.demo import available, demo_hooks

if TYPE_CHECKING:
    from lightning_hooks.families.mmcv.adapter import MMCVAdapter

__all__ = ["FAMILY", "MMCVAdapter"]

#: the adapter's module, which imports Lightning: imported on first use, not by the registry
_ADAPTER = Later("lightning_hooks.families.mmcv.adapter", "MMCVAdapter")
__getattr__ = lazy_exports(__name__, _ADAPTER)

#: the hook keys of an ``mmcv:`` section, as in an mmcv config
_HOOK_KEYS = ("lr_config", "optimizer_config", "checkpoint_config", "log_config", "momentum_config", "custom_hooks",
              "fp16", "timer_config", "profiler_config")  # fmt: skip  # names wrapped at 120


def build_section(section: Any, path: str) -> MMCVAdapter:
    """``mmcv:``: the hook configs of an mmcv 1.x config (``lr_config``, ``optimizer_config``, ``checkpoint_config``,
    ``log_config``, ``momentum_config``, ``custom_hooks``, ...), registered as ``runner.register_training_hooks``
    does; other keys are :class:`MMCVAdapter` options (``runner``, ``work_dir``, ...)."""
    section = dict(expect(section, dict, path, FAMILY.section_example))
    hooks = {k: section.pop(k) for k in _HOOK_KEYS if k in section}
    if not hooks:
        raise ConfigError(f"{path}: no hook configs; write e.g. {path}: {FAMILY.section_example}")
    check_keys(section, adapter_options(FAMILY.adapter), path, "MMCVAdapter option")
    try:
        return FAMILY.adapter.from_config(**hooks, **section)
    except ConfigError:
        raise
    except Exception as err:
        raise ConfigError(f"{path}: {message(err)}") from err


FAMILY = Family("mmcv", _ADAPTER.as_adapter(), build_section, demo_hooks=demo_hooks if available() else None,
                section_example="{lr_config: {policy: step, step: [8, 11]}, checkpoint_config: {interval: 1}}",
                hook_example="CheckpointHook(interval=1)",
                config_example="MMCVAdapter.from_config(lr_config=..., custom_hooks=[dict(type=...)])",
                configure_logging=mmcv_logging.configure_logging, batches_per_step=mmcv_logging.batches_per_step,
                accepts="mmcv.runner.Hook (mmcv 1.x)",
                train=(TrainCommand(legacy="OpenMMLab 1.x tools/train.py (mmcls 0.x, mmdet 2.x, mmseg 0.x)",
                                    usage=train.USAGE, kind=OPENMMLAB_1X, main=train.main,
                                    explain=names.explain),))  # fmt: skip  # TrainCommand's arguments aligned under the call
