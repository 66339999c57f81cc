"""iMIX's hook contract without imix installed (it pins torch 1.7).

Same contracts as ``imix.engine.hooks``: six argument-less mount points, the host reached as ``self.trainer``, and a
``level`` that orders hooks. Unlike iMIX, ``level`` accepts upper- or lower-case names (``'HIGH'`` crashes there).
"""

from __future__ import annotations

import enum
from typing import Any


class PriorityStatus(enum.Enum):
    HIGHEST = 0
    HIGHER = 10
    HIGH = 20
    NORMAL = 30
    LOW = 40
    LOWER = 50
    LOWEST = 60


def get_level(level: PriorityStatus | str | int | Any) -> PriorityStatus:
    """A ``PriorityStatus`` from a member (iMIX's or ours), a case-insensitive name or its int value."""
    if isinstance(level, enum.Enum) and type(level).__name__ == "PriorityStatus":
        return PriorityStatus[level.name]
    if isinstance(level, str) and level.upper() in PriorityStatus.__members__:
        return PriorityStatus[level.upper()]
    if isinstance(level, int) and not isinstance(level, bool) and level in {p.value for p in PriorityStatus}:
        return PriorityStatus(level)
    raise ValueError(
        f"unknown iMIX level {level!r}: use a PriorityStatus member, one of {list(PriorityStatus.__members__)} "
        f"or one of {[p.value for p in PriorityStatus]}"
    )


class HookBase:
    """Base class of iMIX-style hooks. The adapter sets ``self.trainer`` to a weak proxy of its trainer facade."""

    trainer: Any

    def __init__(self) -> None:
        self._level = PriorityStatus.NORMAL

    def before_train(self) -> None: ...

    def after_train(self) -> None: ...

    def before_train_iter(self) -> None: ...

    def after_train_iter(self) -> None: ...

    def before_train_epoch(self) -> None: ...

    def after_train_epoch(self) -> None: ...

    @property
    def level(self) -> PriorityStatus:
        return self._level

    @level.setter
    def level(self, level: PriorityStatus | str | int) -> None:
        self._level = get_level(level)
