"""``LegacyHookAdapter.run_patches``: every change an adapter makes to a run is a ``Patch``, installed at ``setup``
for the stage and removed at ``teardown``, on a failure, and when a later patch of the same setup fails to install
(docs/architecture.md, "What a run leaves behind")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import pytest
from lh_testing import TinyModule, tiny_loader
from toy_family import Counter, ToyAdapter

from lightning_hooks.core.triggers import Patch, Remove


@dataclass(frozen=True)
class Mark(Patch):
    """Sets ``pl_module.<name>`` for the run (fires no row); ``fail`` raises at install instead."""

    name: str
    fail: bool = False

    def __str__(self) -> str:
        return f"LightningModule.{self.name}"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        if self.fail:
            raise RuntimeError(f"{self.name} cannot be installed")
        setattr(pl_module, self.name, True)
        return lambda: delattr(pl_module, self.name)


class MarkingAdapter(ToyAdapter):
    """A toy adapter with one patch of its own in a fit (``marked_fit``), another in the other stages."""

    def __init__(self, hooks: Any, patches: dict[str, tuple[Patch, ...]]) -> None:
        super().__init__(hooks)
        self.extra = patches
        self.seen: list[tuple[str, bool, bool]] = []

    def run_patches(self, stage: str) -> tuple[Patch, ...]:
        return (*super().run_patches(stage), *self.extra.get(stage, ()))

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.seen.append(("train", hasattr(pl_module, "marked_fit"), hasattr(pl_module, "marked_validate")))
        super().on_train_start(trainer, pl_module)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self.seen.append(("validate", hasattr(pl_module, "marked_fit"), hasattr(pl_module, "marked_validate")))
        super().on_validation_start(trainer, pl_module)


def _trainer(adapter: ToyAdapter, tmp_path: Any) -> pl.Trainer:
    return pl.Trainer(callbacks=[adapter], max_epochs=1, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                      default_root_dir=tmp_path)  # fmt: skip


def test_run_patches_are_installed_for_their_stage_and_removed_at_teardown(tmp_path):
    adapter = MarkingAdapter([Counter()], {"fit": (Mark("marked_fit"),), "validate": (Mark("marked_validate"),)})
    module = TinyModule()
    trainer = _trainer(adapter, tmp_path)
    trainer.fit(module, tiny_loader())
    assert not hasattr(module, "marked_fit")
    trainer.validate(module, tiny_loader())
    assert not hasattr(module, "marked_validate")
    assert adapter.seen == [("train", True, False), ("validate", False, True)]


def test_patches_installed_before_one_that_fails_are_removed(tmp_path):
    adapter = MarkingAdapter([Counter()], {"fit": (Mark("marked_fit"), Mark("broken", fail=True))})
    module = TinyModule()
    with pytest.raises(RuntimeError, match="broken cannot be installed"):
        _trainer(adapter, tmp_path).fit(module, tiny_loader())
    assert not hasattr(module, "marked_fit")
    assert adapter._patches == []
