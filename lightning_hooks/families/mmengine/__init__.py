"""MMEngine hooks inside lightning.Trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning_hooks.core.config_kind import MMENGINE
from lightning_hooks.core.family import (
    Family,
    Later,
    TrainCommand,
    build_adapter,
    build_each,
    build_one,
    expect,
    lazy_exports,
)
from lightning_hooks.families.mmengine import names, train
from lightning_hooks.families.mmengine.demo import demo_hooks

if TYPE_CHECKING:
    from lightning_hooks.families.mmengine.adapter import MMEngineAdapter

__all__ = ["FAMILY", "LightningLoggerVisBackend", "MMEngineAdapter", "MMEngineData", "MMEngineModule", "build_hooks"]

#: names this package exports from modules that import Lightning or mmengine (not a dependency of lightning-hooks):
#: imported on first read, so that the registry (``lightning-hooks train --help``) imports neither
_ADAPTER = Later("lightning_hooks.families.mmengine.adapter", "MMEngineAdapter")
__getattr__ = lazy_exports(
    __name__, _ADAPTER, Later("lightning_hooks.families.mmengine.module", "MMEngineModule"),
    Later("lightning_hooks.families.mmengine.data", "MMEngineData"),
    Later("lightning_hooks.families.mmengine.vis_backend", "LightningLoggerVisBackend"),
    Later("lightning_hooks.families.mmengine.config", "build_hooks"),
)


def build_section(section: Any, path: str) -> MMEngineAdapter:
    """``mmengine:``: MMEngine's ``default_hooks`` / ``custom_hooks``; other keys are :class:`MMEngineAdapter` options.

    Each hook config is built once, with its path in any error; MMEngine then merges the instances over its default
    hooks (a ``default_hooks`` entry replaces the default of that name) and orders them by priority."""
    from lightning_hooks.families.mmengine.config import build_hooks as mmengine_hooks

    section = dict(expect(section, dict, path, FAMILY.section_example))
    defaults = expect(section.pop("default_hooks", None) or {}, dict, f"{path}.default_hooks",
                      "{checkpoint: {type: CheckpointHook, interval: 1}}")  # fmt: skip  # arguments aligned under the call
    default_hooks = {
        key: None if entry is None else build_one(FAMILY.adapter, entry, f"{path}.default_hooks.{key}")
        for key, entry in defaults.items()
    }
    custom = expect(section.pop("custom_hooks", None) or [], list, f"{path}.custom_hooks", "[{type: EMAHook}]")
    custom_hooks = build_each(FAMILY.adapter, custom, f"{path}.custom_hooks")
    hooks = mmengine_hooks(default_hooks=default_hooks, custom_hooks=custom_hooks)
    return build_adapter(FAMILY.adapter, hooks, section, path)


FAMILY = Family("mmengine", _ADAPTER.as_adapter(), build_section, demo_hooks=demo_hooks,
                section_example="{work_dir: ..., custom_hooks: [...]}", hook_example="EMAHook()",
                config_example="MMEngineAdapter.from_config(custom_hooks=[...]) or MMEngineAdapter([dict(type=...)])",
                accepts="mmengine.hooks.Hook",
                train=(TrainCommand(legacy="OpenMMLab tools/train.py", usage=train.USAGE, kind=MMENGINE,
                                    main=train.main, explain=names.explain),))  # fmt: skip  # the registry line, options aligned
