"""iMIX hooks inside lightning.Trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning_hooks.core.errors import ConfigError
from lightning_hooks.core.family import Family, Later, build_adapter, build_each, expect, lazy_exports
from lightning_hooks.families.imix import logging as imix_logging
from lightning_hooks.families.imix.demo import demo_hooks

if TYPE_CHECKING:
    from lightning_hooks.families.imix.adapter import IMIXAdapter

__all__ = ["FAMILY", "IMIXAdapter"]

#: the adapter's module, which imports Lightning: imported on first use, not by the registry
_ADAPTER = Later("lightning_hooks.families.imix.adapter", "IMIXAdapter")
__getattr__ = lazy_exports(__name__, _ADAPTER)


def build_section(section: Any, path: str) -> IMIXAdapter:
    """``imix:``: iMIX's ``custom_hooks`` list of ``{type: ..., level: ..., **kwargs}``; other keys are
    :class:`IMIXAdapter` options."""
    options = dict(expect(section, dict, path, FAMILY.section_example))
    if "custom_hooks" not in options:
        raise ConfigError(f"{path}.custom_hooks: missing; IMIXAdapter needs at least one hook. Write e.g. "
                          f"{path}.custom_hooks: [{{type: IterationTimerHook}}]")  # fmt: skip  # the message continues under its first half
    custom = expect(options.pop("custom_hooks"), list, f"{path}.custom_hooks", "[{type: IterationTimerHook}]")
    return build_adapter(FAMILY.adapter, build_each(FAMILY.adapter, custom, f"{path}.custom_hooks"), options, path)


FAMILY = Family("imix", _ADAPTER.as_adapter(), build_section, demo_hooks=demo_hooks,
                section_example="{custom_hooks: [{type: ...}]}", hook_example="IterationTimerHook()",
                config_example="IMIXAdapter([dict(type=...)])", configure_logging=imix_logging.configure_logging,
                batches_per_step=imix_logging.batches_per_step,
                accepts="imix.engine.hooks.HookBase or lightning_hooks.compat.imix.HookBase")  # fmt: skip  # the registry line, options aligned
