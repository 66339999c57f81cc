"""docs/lifecycle.md is generated from the event tables and must not drift from them."""

from __future__ import annotations

from pathlib import Path

from lightning_hooks.lifecycle import render


def test_lifecycle_doc_matches_the_event_tables():
    doc = Path(__file__).parents[2] / "docs" / "lifecycle.md"
    assert doc.read_text() == render(), "regenerate with: lightning-hooks lifecycle > docs/lifecycle.md"
