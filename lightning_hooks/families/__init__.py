"""The legacy hook families, one folder each: the registry below is the one place that lists them.

A family folder exports ``FAMILY`` (a :class:`~lightning_hooks.core.family.Family`); adding a family is its folder
plus one line in ``FAMILIES``. ``adapt`` tries families in this order.
"""

from __future__ import annotations

from typing import Any

from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.core.family import Family
from lightning_hooks.families import classy, imix, mmcv, mmengine

FAMILIES: list[Family] = [
    mmengine.FAMILY,
    classy.FAMILY,
    imix.FAMILY,
    mmcv.FAMILY,
]


def registered() -> tuple[Family, ...]:
    """The registered families, in registry order."""
    return tuple(FAMILIES)


def adapters_in(trainer: Any) -> list[tuple[Family, LegacyHookAdapter]]:
    """The registered families' adapters among ``trainer.callbacks``, in callback order, each with its family."""
    by_name = {family.name: family for family in FAMILIES}
    return [
        (by_name[callback.family], callback)
        for callback in trainer.callbacks
        if isinstance(callback, LegacyHookAdapter) and callback.family in by_name
    ]
