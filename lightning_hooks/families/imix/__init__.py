"""iMIX hooks inside lightning.Trainer."""

from __future__ import annotations

from typing import Any

from lightning_hooks.core.errors import ConfigError
from lightning_hooks.core.family import Family, build_adapter, build_each, expect
from lightning_hooks.families.imix import logging as imix_logging
from lightning_hooks.families.imix.adapter import IMIXAdapter
from lightning_hooks.families.imix.demo import demo_hooks

__all__ = ["FAMILY", "IMIXAdapter"]


def build_section(section: Any, path: str) -> IMIXAdapter:
    """``imix:``: iMIX's ``custom_hooks`` list of ``{type: ..., level: ..., **kwargs}``; other keys are
    :class:`IMIXAdapter` options."""
    options = dict(expect(section, dict, path, FAMILY.section_example))
    if "custom_hooks" not in options:
        raise ConfigError(f"{path}.custom_hooks: missing; IMIXAdapter needs at least one hook. Write e.g. "
                          f"{path}.custom_hooks: [{{type: IterationTimerHook}}]")  # fmt: skip  # the message continues under its first half
    custom = expect(options.pop("custom_hooks"), list, f"{path}.custom_hooks", "[{type: IterationTimerHook}]")
    return build_adapter(IMIXAdapter, build_each(IMIXAdapter, custom, f"{path}.custom_hooks"), options, path)


FAMILY = Family("imix", IMIXAdapter, build_section, demo_hooks=demo_hooks,
                section_example="{custom_hooks: [{type: ...}]}", hook_example="IterationTimerHook()",
                config_example="IMIXAdapter([dict(type=...)])", configure_logging=imix_logging.configure_logging,
                batches_per_step=imix_logging.batches_per_step,
                accepts="imix.engine.hooks.HookBase or lightning_hooks.compat.imix.HookBase")  # fmt: skip  # the registry line, options aligned
