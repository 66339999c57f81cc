"""Classy Vision and VISSL hooks inside lightning.Trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning_hooks.core.family import Family, Later, build_adapter, build_each, expect, lazy_exports
from lightning_hooks.families.classy.demo import demo_hooks
from lightning_hooks.families.classy.logging import configure_logging as classy_logging
from lightning_hooks.families.classy.train import COMMANDS

if TYPE_CHECKING:
    from lightning_hooks.families.classy.adapter import ClassyAdapter

__all__ = ["FAMILY", "ClassyAdapter"]

#: the adapter's module, which imports Lightning: imported on first use, not by the registry
_ADAPTER = Later("lightning_hooks.families.classy.adapter", "ClassyAdapter")
__getattr__ = lazy_exports(__name__, _ADAPTER)


def build_section(section: Any, path: str) -> ClassyAdapter:
    """``classy:``: Classy's list of ``{name: ..., **kwargs}``, or ``{hooks: [...], **ClassyAdapter options}``."""
    expect(section, (list, dict), path, FAMILY.section_example)
    options, where = ({}, path) if isinstance(section, list) else (dict(section), f"{path}.hooks")
    entries = section if isinstance(section, list) else options.pop("hooks", [])
    hooks = build_each(FAMILY.adapter, expect(entries, list, where, "[{name: precise_bn}]"), where)
    return build_adapter(FAMILY.adapter, hooks, options, path)


FAMILY = Family("classy", _ADAPTER.as_adapter(), build_section, demo_hooks=demo_hooks,
                section_example="[{name: precise_bn}, ...]", hook_example="PreciseBatchNormHook(num_samples=64)",
                config_example="ClassyAdapter([dict(name=...)])", configure_logging=classy_logging,
                train=COMMANDS,
                accepts="classy_vision.hooks.ClassyHook or lightning_hooks.compat.classy.ClassyHook (VISSL hooks derive from it)")  # fmt: skip  # the registry line, options aligned
