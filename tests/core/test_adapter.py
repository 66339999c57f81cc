"""``core/adapter.py``: ``LegacyHookAdapter``'s shared lifecycle, on the toy family (tests/helpers/toy_family): a train
epoch ends at its last batch, or at ``on_train_epoch_end`` when cut short; the epoch a fit resumes into is started
(mid-epoch); each train epoch's and each evaluation's iterator is made where the family declares; the hook list is checked; the facade is
handed a caller, never the adapter."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from lh_testing import TinyModule, tiny_loader
from toy_family import Counter, ToyAdapter, ToyHook

from lightning_hooks.core.adapter import AdapterCaller
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.triggers import ON

ModelCheckpoint = pl.callbacks.ModelCheckpoint


class ValidationMark(pl.Callback):
    """Appends ("validation", batches so far) to a counter's record when Lightning validates."""

    def __init__(self, counter: Counter, adapter: ToyAdapter) -> None:
        self.counter, self.adapter = counter, adapter

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.counter.seen.append(("validation", self.adapter.host.batches))


def _fit(tmp_path, adapter: ToyAdapter, ckpt_path: str | None = None, **kwargs: Any) -> pl.Trainer:
    data = tiny_loader(n=3, batch_size=1)  # 3 batches an epoch
    callbacks = [adapter, *kwargs.pop("callbacks", [])]
    trainer = pl.Trainer(callbacks=callbacks, default_root_dir=tmp_path, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu", **kwargs)  # fmt: skip  # Trainer kwargs
    trainer.fit(TinyModule(), data, data, ckpt_path=ckpt_path)
    return trainer


def test_a_train_epoch_ends_at_its_last_batch_or_when_cut_short_at_its_end(tmp_path):
    whole, cut = Counter(), Counter()
    adapter = ToyAdapter([whole])
    _fit(tmp_path, adapter, max_epochs=2, num_sanity_val_steps=0, callbacks=[ValidationMark(whole, adapter)])
    assert whole.seen == [("batch", 1), ("batch", 2), ("batch", 3), ("epoch_done", 3), ("validation", 3),
                          ("batch", 4), ("batch", 5), ("batch", 6), ("epoch_done", 6), ("validation", 6)]  # fmt: skip  # two epochs
    _fit(tmp_path / "cut", ToyAdapter([cut]), max_steps=2, limit_val_batches=0)
    assert cut.seen == [("batch", 1), ("batch", 2), ("epoch_done", 2)]  # ended once, at on_train_epoch_end


def recording_loader(n: int, events: list[str]) -> torch.utils.data.DataLoader:
    """A loader of ``n`` one-sample batches that records each ``iter()`` of it in ``events``."""

    class Loader(torch.utils.data.DataLoader):
        def __iter__(self) -> Any:
            events.append("iter")
            return super().__iter__()

    return Loader(tiny_loader(n=n, batch_size=1).dataset, batch_size=1)


class IteratorAt(ToyAdapter):
    """Declares where its host makes each train epoch's iterator; records the epoch starts and what it prepares."""

    def __init__(self, hooks: Any, at: str | None, record: list[str]) -> None:
        super().__init__(hooks)
        self.train_iterator_at, self.record = at, record  # type: ignore[misc]  # the declaration, per instance here

    def prepare_train_iterator(self, trainer: Any, mid_epoch: bool) -> None:
        self.record.append("prepare")

    def start_train_epoch(self, trainer: Any, pl_module: Any, mid_epoch: bool) -> None:
        self.record.append("start mid" if mid_epoch else "start")
        super().start_train_epoch(trainer, pl_module, mid_epoch)


@pytest.mark.parametrize(("at", "expected"), [
    ("before_epoch_start", ["prepare", "iter", "start"] * 3),
    ("after_epoch_start", ["start", "iter"] * 3),
    (None, ["iter", "start", "start", "iter", "start", "iter"]),  # Lightning's: the first at its data setup
])  # fmt: skip  # one case a line
def test_every_train_epochs_iterator_is_made_where_the_family_declares(tmp_path, at, expected):
    """``train_iterator_at``: each epoch's train iterator (``iter()`` of the loader), the first and the later ones, is
    made before the epoch-start steps, after ``prepare_train_iterator`` (Classy's ``advance_phase``), or after them
    (MMEngine's ``run_epoch``); undeclared, where Lightning makes it. Once an epoch."""
    events: list[str] = []

    data = recording_loader(3, events)
    trainer = pl.Trainer(callbacks=[IteratorAt([Counter()], at, events)], default_root_dir=tmp_path, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", max_epochs=3,
                         limit_val_batches=0)  # fmt: skip  # Trainer kwargs
    trainer.fit(TinyModule(), data)
    assert events == expected


@pytest.mark.parametrize(("at", "expected"), [
    (None, ["iter", "start mid", "start", "iter"]),  # Lightning's: the first at its data setup
    ("before_epoch_start", ["prepare", "iter", "start mid", "prepare", "iter", "start"]),
    ("after_epoch_start", ["start mid", "iter", "start", "iter"]),
])  # fmt: skip  # one case a line
def test_the_epoch_a_fit_resumes_into_is_started_mid_epoch_with_its_iterator_where_declared(tmp_path, at, expected):
    """A fit resumed from a Lightning checkpoint written inside an epoch (after batch 2 of 3): the host starts that
    epoch as resumed (mid-epoch), on Lightning 2.4 (which calls ``on_train_epoch_start`` for it) as on 2.6 (which does
    not: its first batch is drawn first), and makes its iterator where the family declares, after
    ``prepare_train_iterator`` or the epoch start, before that batch is drawn; the next epoch starts as usual."""
    every_2 = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=2, save_top_k=-1, save_on_train_epoch_end=False)
    _fit(tmp_path, ToyAdapter([Counter()]), max_epochs=1, callbacks=[every_2])
    [checkpoint] = tmp_path.glob("*step=2.ckpt")  # written after batch 2 of epoch 0's 3
    events: list[str] = []
    trainer = pl.Trainer(callbacks=[IteratorAt([Counter()], at, events)], default_root_dir=tmp_path / "resumed",
                         logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                         max_epochs=2, limit_val_batches=0)  # fmt: skip  # Trainer kwargs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's caution on a resume inside an epoch
        trainer.fit(TinyModule(), recording_loader(3, events), ckpt_path=str(checkpoint))
    assert events == expected


class BatchesRun(pl.Callback):
    """Records each train batch run as ``(epoch, batch_idx)``."""

    def __init__(self) -> None:
        self.run: list[tuple[int, int]] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.run.append((trainer.current_epoch, batch_idx))


@pytest.mark.parametrize("at", [None, "before_epoch_start", "after_epoch_start"])
def test_a_fit_resumed_from_a_checkpoint_written_in_validation_runs_the_next_epoch_whole(tmp_path, at):
    """A checkpoint written in the validation after epoch 0's last batch (``ModelCheckpoint`` saving at
    ``on_validation_end``: ``save_on_train_epoch_end=False``, ``check_val_every_n_epoch > 1``): the resumed fit draws
    nothing in epoch 0, and the next epoch's iterator, held back since the data setup, runs all 3 batches, as without
    the adapter (the count Lightning adds for epoch 0's batches is not carried into epoch 1)."""
    at_validation = ModelCheckpoint(dirpath=tmp_path, save_on_train_epoch_end=False, save_top_k=-1)
    _fit(tmp_path, ToyAdapter([Counter()]), max_epochs=1, callbacks=[at_validation], num_sanity_val_steps=0)
    [checkpoint] = tmp_path.glob("*.ckpt")
    batches = BatchesRun()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's caution on a resume inside an epoch
        _fit(tmp_path / "resumed", IteratorAt([Counter()], at, []), ckpt_path=str(checkpoint), max_epochs=3,
             callbacks=[batches], num_sanity_val_steps=0)  # fmt: skip  # Trainer kwargs
    assert batches.run == [(epoch, index) for epoch in (1, 2) for index in range(3)]


class EvalIteratorAt(ToyAdapter):
    """Declares where its host makes each evaluation's iterator; records the evaluation steps and what it prepares."""

    def __init__(self, hooks: Any, at: str | None, record: list[str]) -> None:
        super().__init__(hooks)
        self.eval_iterator_at, self.record = at, record  # type: ignore[misc]  # the declaration, per instance here

    def prepare_eval_iterator(self, trainer: Any, run: Any) -> None:
        self.record.append(f"prepare {run.stage}")

    def start_eval(self, trainer: Any, run: Any) -> None:
        self.record.append("sanity" if run.sanity_check else "start")
        super().start_eval(trainer, run)

    def start_eval_epoch(self, trainer: Any, run: Any) -> None:
        self.record.append("epoch start")
        super().start_eval_epoch(trainer, run)


#: the sanity check's evaluation, where Lightning makes its iterator whatever the family declares
SANITY = ["iter", "sanity", "epoch start", "next callback"]


class NextCallback(pl.Callback):
    """A callback after the adapter: its ``on_validation_epoch_start`` follows the adapter's."""

    def __init__(self, record: list[str]) -> None:
        self.record = record

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.record.append("next callback")


@pytest.mark.parametrize(("at", "expected"), [
    ("before_epoch_start", [*SANITY, *["start", "prepare val", "iter", "epoch start", "next callback"] * 3]),
    ("after_epoch_start", [*SANITY, *["start", "epoch start", "iter", "next callback"] * 3]),  # before other callbacks'
    (None, [*SANITY, *["iter", "start", "epoch start", "next callback"] * 3]),  # Lightning's: in the loop's reset
])  # fmt: skip  # one case a line
def test_every_evaluations_iterator_is_made_where_the_family_declares(tmp_path, at, expected):
    """``eval_iterator_at``: each evaluation's iterator (``iter()`` of the loader; the fit's validations and a
    ``trainer.validate``) is made after the evaluation's start and ``prepare_eval_iterator``, before its epoch-start
    step (Classy's ``advance_phase`` of a test phase), or right after that step, before other callbacks' (MMEngine's
    ``ValLoop.run``); the sanity check's, and every one when undeclared, where Lightning makes it, before the start."""
    events: list[str] = []

    data = recording_loader(2, events)
    trainer = pl.Trainer(callbacks=[EvalIteratorAt([Counter()], at, events), NextCallback(events)],
                         default_root_dir=tmp_path, logger=False, enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu", max_epochs=2, limit_train_batches=1,
                         num_sanity_val_steps=1)  # fmt: skip  # Trainer kwargs
    trainer.fit(TinyModule(), tiny_loader(n=2, batch_size=1), data)
    trainer.validate(TinyModule(), data, verbose=False)  # outside the fit too
    assert events == expected


def test_the_hook_list_is_checked():
    with pytest.raises(ValueError, match="ToyAdapter needs at least one toy hook"):
        ToyAdapter([])
    with pytest.raises(TypeError, match="ToyHook"):
        ToyAdapter([object()])


def test_the_facade_is_handed_a_caller_that_goes_through_the_adapter():
    class Recording(ToyAdapter):
        def trigger(self, trigger: Any, **context: Any) -> None:
            self.triggered = str(trigger)

    adapter = Recording([ToyHook()])
    caller = adapter.hook_caller
    assert isinstance(caller, AdapterCaller) and caller is not adapter
    caller.fire(ON["on_train_end"])
    assert adapter.triggered == "on_train_end"
