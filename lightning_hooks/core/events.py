"""Event tables: which legacy mount points each Lightning event fires, written down once per family as data.

A family adapter's Lightning methods update its facade and then call ``fire(trigger, **context)``; the table decides
which mount points that trigger fires, in which order, under which condition, and with which keyword arguments.
Triggers are typed (:mod:`lightning_hooks.core.triggers`); ``docs/lifecycle.md`` is generated from these tables
(``lightning-hooks lifecycle``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lightning_hooks.core.triggers import Patch, Trigger


@dataclass(frozen=True)
class Mount:
    """One row of an event table.

    Args:
        event: the trigger that fires the mount point: a Lightning ``Callback`` method or a patch the adapter installs.
        mount: the legacy hook method called.
        args: keyword arguments the mount point receives, taken by name from the event's context.
        when: name of an adapter predicate; the row fires only when it returns True. ``None`` fires always.
    """

    event: Trigger
    mount: str
    args: tuple[str, ...] = ()
    when: str | None = None


class EventTable:
    """An ordered, immutable list of :class:`Mount` rows for one legacy family."""

    def __init__(self, family: str, rows: Iterable[Mount], conditions: dict[str, str] | None = None) -> None:
        self.family = family
        self.rows = tuple(rows)
        self.conditions = dict(conditions or {})
        untyped = [r.event for r in self.rows if not isinstance(r.event, Trigger)]
        if untyped:
            raise TypeError(f"{family} event table: {untyped} are not triggers (lightning_hooks.core.triggers)")
        missing = {r.when for r in self.rows if r.when is not None} - self.conditions.keys()
        if missing:
            raise ValueError(f"{family} event table: conditions {sorted(missing)} are not described")

    def events(self) -> tuple[Trigger, ...]:
        """Triggers that fire something, in first-row order."""
        return tuple(dict.fromkeys(r.event for r in self.rows))

    def patches(self) -> tuple[Patch, ...]:
        """One trigger per patch the adapter installs for a run (triggers sharing a patch appear once)."""
        patches: dict[object, Patch] = {}
        for trigger in self.events():
            if isinstance(trigger, Patch):
                patches.setdefault(trigger.key, trigger)
        return tuple(patches.values())

    def mount_points(self) -> tuple[str, ...]:
        """Every legacy mount point the table fires, in first-row order."""
        return tuple(dict.fromkeys(r.mount for r in self.rows))

    def to_markdown(self) -> str:
        lines = ["| trigger | legacy mount point | receives | fires when |", "|---|---|---|---|"]
        for r in self.rows:
            args = ", ".join(f"`{a}`" for a in r.args) or "-"
            when = self.conditions[r.when] if r.when else "always"
            lines.append(f"| `{r.event}` | `{r.mount}` | {args} | {when} |")
        return "\n".join(lines)
