"""docs/lifecycle.md is generated from the event tables and must not drift from them."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import Callback

from lightning_hooks.adapt import ADAPTERS
from lightning_hooks.lifecycle import render


def test_lifecycle_doc_matches_the_event_tables():
    doc = Path(__file__).parents[2] / "docs" / "lifecycle.md"
    assert doc.read_text() == render(), "regenerate with: lightning-hooks lifecycle > docs/lifecycle.md"


def test_every_table_event_is_a_callback_method_the_adapter_implements():
    for adapter in ADAPTERS:
        for event in adapter.events.events():
            if not hasattr(Callback, event):  # e.g. "LightningModule.on_load_checkpoint": a wrapped module method
                continue
            assert getattr(adapter, event) is not getattr(Callback, event), f"{adapter.__name__} ignores {event}"
