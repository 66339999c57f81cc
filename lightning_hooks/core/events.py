"""Event tables: which legacy mount points each Lightning event fires, written down once per family as data.

A family adapter's Lightning methods update its facade and then call ``fire(event, **context)``; the table decides
which mount points that event fires, in which order, under which condition, and with which keyword arguments.
``docs/lifecycle.md`` is generated from these tables (``python -m lightning_hooks.core.events``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Mount:
    """One row of an event table.

    Args:
        event: the Lightning ``Callback`` method (or adapter-installed trigger) that fires the mount point.
        mount: the legacy hook method called.
        args: keyword arguments the mount point receives, taken by name from the event's context.
        when: name of an adapter predicate; the row fires only when it returns True. ``None`` fires always.
    """

    event: str
    mount: str
    args: tuple[str, ...] = ()
    when: str | None = None


class EventTable:
    """An ordered, immutable list of :class:`Mount` rows for one legacy family."""

    def __init__(self, family: str, rows: Iterable[Mount], conditions: dict[str, str] | None = None) -> None:
        self.family = family
        self.rows = tuple(rows)
        self.conditions = dict(conditions or {})
        missing = {r.when for r in self.rows if r.when is not None} - self.conditions.keys()
        if missing:
            raise ValueError(f"{family} event table: conditions {sorted(missing)} are not described")

    def events(self) -> tuple[str, ...]:
        """Lightning events that fire something, in first-row order."""
        return tuple(dict.fromkeys(r.event for r in self.rows))

    def mount_points(self) -> tuple[str, ...]:
        """Every legacy mount point the table fires, in first-row order."""
        return tuple(dict.fromkeys(r.mount for r in self.rows))

    def to_markdown(self) -> str:
        lines = ["| Lightning event | legacy mount point | receives | fires when |", "|---|---|---|---|"]
        for r in self.rows:
            args = ", ".join(f"`{a}`" for a in r.args) or "-"
            when = self.conditions[r.when] if r.when else "always"
            lines.append(f"| `{r.event}` | `{r.mount}` | {args} | {when} |")
        return "\n".join(lines)
