"""Render every family's event table as Markdown: ``lightning-hooks lifecycle`` and ``docs/lifecycle.md``."""

from __future__ import annotations

from lightning_hooks.adapt import ADAPTERS

INTRO = """# Lifecycle: which Lightning event fires which legacy mount point

Generated from the adapters' event tables (`lightning_hooks/families/*/events.py`) by `lightning-hooks lifecycle`;
a test keeps this file in sync. Rows fire in the order shown. Within a row, hooks run in their family's order
(MMEngine priority, iMIX level, Classy list order with `CheckpointHook` last), and only hooks that override the mount
point are called. An exception raised in a hook propagates unchanged, with a note naming the family, the hook, the
mount point, the epoch and the global step. With several adapters in one `Trainer` (`adapt` returns one per family,
in the order their first hook appears), each Lightning event reaches them in callback order; so do the
`training_step` wrappers that the Classy and iMIX adapters install for their in-step mount points (the first
adapter's wrapper is the inner one).
"""


def render() -> str:
    sections = [INTRO]
    for adapter in ADAPTERS:
        sections.append(f"## {adapter.__name__} ({adapter.events.family})\n\n{adapter.events.to_markdown()}\n")
    return "\n".join(sections)
