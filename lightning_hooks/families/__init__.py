"""The legacy hook families, one folder each: the registry below is the one place that lists them.

A family folder exports ``FAMILY`` (a :class:`~lightning_hooks.core.family.Family`); adding a family is its folder
plus its folder name in ``NAMES``. ``adapt`` tries families in this order. Importing the registry imports neither
torch nor Lightning (``lightning-hooks train --help``): each family imports its adapter when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lightning_hooks.core.family import Family

if TYPE_CHECKING:
    from lightning_hooks.core.adapter import LegacyHookAdapter

#: the family folders, in the order ``adapt`` tries them
NAMES = ("mmengine", "classy", "imix", "mmcv")

FAMILIES: list[Family] = [importlib.import_module(f"{__name__}.{name}").FAMILY for name in NAMES]


def registered() -> tuple[Family, ...]:
    """The registered families, in registry order."""
    return tuple(FAMILIES)


def adapters_in(trainer: Any) -> list[tuple[Family, LegacyHookAdapter]]:
    """The registered families' adapters among ``trainer.callbacks``, in callback order, each with its family."""
    from lightning_hooks.core.adapter import LegacyHookAdapter  # a Trainer exists: Lightning is imported

    by_name = {family.name: family for family in FAMILIES}
    return [
        (by_name[callback.family], callback)
        for callback in trainer.callbacks
        if isinstance(callback, LegacyHookAdapter) and callback.family in by_name
    ]
