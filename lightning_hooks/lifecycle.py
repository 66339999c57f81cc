"""Render every family's event table as Markdown: ``lightning-hooks lifecycle`` and ``docs/lifecycle.md``."""

from __future__ import annotations

from lightning_hooks import families

INTRO = """# Lifecycle: which Lightning event fires which legacy mount point

Generated from the families' event tables (`lightning_hooks/families/*/events.py`) by `lightning-hooks lifecycle`;
a test keeps this file in sync, and another runs every family through the runs that fire each row. Rows fire in the
order shown. Within a row, hooks run in their family's order (MMEngine priority, iMIX level, Classy list order with
`CheckpointHook` last), and only hooks that override the mount point are called. An exception raised in a hook
propagates unchanged, with a note naming the family, the hook, the mount point, the epoch and the global step. With
several adapters in one `Trainer` (`adapt` returns one per family, in the order their first hook appears), each
Lightning event reaches them in callback order; so do the patches the adapters install (the first adapter's
`training_step` wrapper is the inner one).
"""


def render() -> str:
    sections = [INTRO]
    kinds: dict[type, str] = {}
    for family in families.registered():
        adapter = family.adapter
        sections.append(f"## {adapter.__name__} ({family.name})\n\n{adapter.events.to_markdown()}\n")
        for trigger in adapter.events.events():
            kinds.setdefault(type(trigger), str(trigger))
    rows = [f"| `{name}` | `{kind.__name__}` | {_markdown(kind.__doc__)} |" for kind, name in kinds.items()]
    sections.append(
        "## Triggers\n\nEach kind of trigger in the tables above (`lightning_hooks/core/triggers.py`), with one "
        "example.\n\n| example | kind | fires from |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    )
    return "\n".join(sections)


def _markdown(docstring: str | None) -> str:
    """A class docstring as one Markdown table cell."""
    return " ".join((docstring or "").split()).replace("``", "`")
