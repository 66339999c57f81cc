"""Classy Vision and VISSL hooks inside lightning.Trainer."""

from __future__ import annotations

from typing import Any

from lightning_hooks.core.family import Family, build_adapter, build_each, expect
from lightning_hooks.families.classy.adapter import ClassyAdapter
from lightning_hooks.families.classy.demo import demo_hooks
from lightning_hooks.families.classy.logging import configure_logging as classy_logging
from lightning_hooks.families.classy.train import COMMANDS

__all__ = ["FAMILY", "ClassyAdapter"]


def build_section(section: Any, path: str) -> ClassyAdapter:
    """``classy:``: Classy's list of ``{name: ..., **kwargs}``, or ``{hooks: [...], **ClassyAdapter options}``."""
    expect(section, (list, dict), path, FAMILY.section_example)
    options, where = ({}, path) if isinstance(section, list) else (dict(section), f"{path}.hooks")
    entries = section if isinstance(section, list) else options.pop("hooks", [])
    hooks = build_each(ClassyAdapter, expect(entries, list, where, "[{name: precise_bn}]"), where)
    return build_adapter(ClassyAdapter, hooks, options, path)


FAMILY = Family("classy", ClassyAdapter, build_section, demo_hooks=demo_hooks,
                section_example="[{name: precise_bn}, ...]", hook_example="PreciseBatchNormHook(num_samples=64)",
                config_example="ClassyAdapter([dict(name=...)])", configure_logging=classy_logging,
                train=COMMANDS,
                accepts="classy_vision.hooks.ClassyHook or lightning_hooks.compat.classy.ClassyHook (VISSL hooks derive from it)")  # fmt: skip  # the registry line, options aligned
