"""MMEngine hooks inside lightning.Trainer."""

from __future__ import annotations

from typing import Any

from lightning_hooks.core.config_kind import MMENGINE
from lightning_hooks.core.family import Family, TrainCommand, build_adapter, build_each, build_one, expect
from lightning_hooks.families.mmengine import names, train
from lightning_hooks.families.mmengine.adapter import MMEngineAdapter
from lightning_hooks.families.mmengine.demo import demo_hooks

__all__ = ["FAMILY", "LightningLoggerVisBackend", "MMEngineAdapter", "MMEngineData", "MMEngineModule", "build_hooks"]

#: names this package exports from modules that import mmengine (not a dependency of lightning-hooks): imported on use
_LAZY = {
    "MMEngineModule": "lightning_hooks.families.mmengine.module",
    "MMEngineData": "lightning_hooks.families.mmengine.data",
    "LightningLoggerVisBackend": "lightning_hooks.families.mmengine.vis_backend",
}


def build_section(section: Any, path: str) -> MMEngineAdapter:
    """``mmengine:``: MMEngine's ``default_hooks`` / ``custom_hooks``; other keys are :class:`MMEngineAdapter` options.

    Each hook config is built once, with its path in any error; MMEngine then merges the instances over its default
    hooks (a ``default_hooks`` entry replaces the default of that name) and orders them by priority."""
    from lightning_hooks.families.mmengine.config import build_hooks as mmengine_hooks

    section = dict(expect(section, dict, path, FAMILY.section_example))
    defaults = expect(section.pop("default_hooks", None) or {}, dict, f"{path}.default_hooks",
                      "{checkpoint: {type: CheckpointHook, interval: 1}}")  # fmt: skip  # arguments aligned under the call
    default_hooks = {
        key: None if entry is None else build_one(MMEngineAdapter, entry, f"{path}.default_hooks.{key}")
        for key, entry in defaults.items()
    }
    custom = expect(section.pop("custom_hooks", None) or [], list, f"{path}.custom_hooks", "[{type: EMAHook}]")
    custom_hooks = build_each(MMEngineAdapter, custom, f"{path}.custom_hooks")
    hooks = mmengine_hooks(default_hooks=default_hooks, custom_hooks=custom_hooks)
    return build_adapter(MMEngineAdapter, hooks, section, path)


FAMILY = Family("mmengine", MMEngineAdapter, build_section, demo_hooks=demo_hooks,
                section_example="{work_dir: ..., custom_hooks: [...]}", hook_example="EMAHook()",
                config_example="MMEngineAdapter.from_config(custom_hooks=[...]) or MMEngineAdapter([dict(type=...)])",
                accepts="mmengine.hooks.Hook",
                train=(TrainCommand(legacy="OpenMMLab tools/train.py", usage=train.USAGE, kind=MMENGINE,
                                    main=train.main, explain=names.explain),))  # fmt: skip  # the registry line, options aligned


def __getattr__(name: str) -> Any:
    if name == "build_hooks":  # imports mmengine, which lightning-hooks does not depend on
        from lightning_hooks.families.mmengine.config import build_hooks as mmengine_hooks

        return mmengine_hooks
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
