"""The host loop: one object per run that owns what a legacy host's own loop owns.

MMEngine's ``EpochBasedTrainLoop.run_epoch`` / ``run_iter`` read as the lifecycle in twenty lines: they fire the
hooks and move ``self._epoch`` / ``self._iter`` themselves. Each family has one class that does the same for its host
(:class:`HostLoop`): it holds the counters the hooks read through the facade (the facade reads them, never writes
them), decides when the host's run stops and when it validates, and fires its own rows through the
:class:`~lightning_hooks.core.dispatch.HookCaller` it is given. The adapter (:class:`~lightning_hooks.core.adapter.LegacyHookAdapter`) only
translates Lightning's events into the loop's calls: the train's start (at a :class:`TrainStart`) and end, the train
steps, and the evaluation steps of one :class:`Evaluation` (MMEngine's ``ValLoop.run``: ``before_val``, ``before_val_epoch``, ``run_iter`` per batch,
``after_val_epoch``, ``after_val``), which :class:`EvalRows` gives a loop whose host needs nothing but its rows.

Example, a loop as a family writes it (``tests/core/test_host_loop.py`` runs this one)::

    class CountingLoop(EvalRows):
        def __init__(self, caller):
            self.caller, self.epoch, self.iter, self.inner_iter = caller, 0, 0, 0
        def start_train(self, at):
            self.epoch, self.iter = at.epoch, at.batches_fetched
            self.caller.fire(ON["on_train_start"])
        def start_epoch(self, mid_epoch):
            if not mid_epoch:
                self.inner_iter = 0
            self.caller.fire(ON["on_train_epoch_start"])
        def start_iter(self, batch, batch_idx):
            self.caller.fire(ON["on_train_batch_start"], batch_idx=batch_idx, data_batch=batch)
        def end_iter(self, outputs, batch, batch_idx):
            self.caller.fire(ON["on_train_batch_end"], batch_idx=batch_idx, data_batch=batch, outputs=outputs)
            self.iter += 1
            self.inner_iter += 1
        def end_epoch(self, trigger):
            self.caller.fire(trigger)
            self.epoch += 1
        def end_train(self):
            self.caller.fire(ON["on_train_end"])
        def state_dict(self):
            return {"epoch": self.epoch, "iter": self.iter, "inner_iter": self.inner_iter}
        def load_state_dict(self, state):
            self.epoch, self.iter, self.inner_iter = state["epoch"], state["iter"], state["inner_iter"]
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, Protocol, runtime_checkable

from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.triggers import ON, LightningEvent, Trigger


@dataclass(frozen=True)
class TrainStart:
    """Where Lightning's fit starts training (``on_train_start``, its loop restored if the fit resumed), as the legacy
    hosts read it; the adapter derives it once from the Trainer.

    ``epoch``: Lightning's epoch (``trainer.current_epoch``); ``batches_fetched``: the train batches fetched in the fit
    so far, restored ones included (MMEngine's and iMIX's ``iter`` of a fit resumed without the loop's own state);
    ``epoch_batches``: the train batches of an epoch (``trainer.num_training_batches``; ``inf`` for an endless
    loader)."""

    epoch: int
    batches_fetched: int
    epoch_batches: int | float


@dataclass(frozen=True)
class Evaluation:
    """One run of Lightning's evaluation loop, as the legacy hosts tell them apart (:func:`evaluation` builds it).

    ``stage``: ``"val"`` (Lightning's validation loop: MMEngine's ``runner.val_loop``, mmcv's ``val`` workflow, a
    Classy test phase) or ``"test"`` (``trainer.test``); ``sanity_check``: Lightning's validation batches before a
    fit trains, which no legacy host runs; ``in_fit``: a validation inside a fit (the host's own schedule), not
    ``trainer.validate`` / ``trainer.test``."""

    stage: Literal["val", "test"]
    sanity_check: bool
    in_fit: bool

    def on(self, step: str) -> LightningEvent:
        """The Lightning event of ``step`` (``"start"``, ``"epoch_start"``, ``"batch_start"``, ``"batch_end"``,
        ``"epoch_end"``, ``"end"``) in this evaluation: ``on("batch_end")`` is ``ON["on_validation_batch_end"]``."""
        return ON[f"on_{'validation' if self.stage == 'val' else 'test'}_{step}"]


@cache
def evaluation(stage: Literal["val", "test"], sanity_check: bool, in_fit: bool) -> Evaluation:
    """The :class:`Evaluation` of these values (one instance each: the adapter asks at every evaluation batch)."""
    return Evaluation(stage, sanity_check, in_fit)


@runtime_checkable
class EvalLoop(Protocol):
    """The six steps of an evaluation in a host loop, one per Lightning event of its evaluation loop, in MMEngine's
    ``ValLoop.run`` order; each fires its rows (:class:`EvalRows` fires just them)."""

    def start_eval(self, run: Evaluation) -> None:
        """An evaluation starts (``on_validation_start`` / ``on_test_start``; MMEngine's ``before_val``)."""

    def start_eval_epoch(self, run: Evaluation) -> None:
        """Its epoch starts, the loader set up (``on_*_epoch_start``; ``before_val_epoch``, a Classy test phase)."""

    def start_eval_iter(self, run: Evaluation, batch: Any, batch_idx: int) -> None:
        """An evaluation batch starts (``on_*_batch_start``; ``before_val_iter``)."""

    def end_eval_iter(self, run: Evaluation, outputs: Any, batch: Any, batch_idx: int) -> None:
        """An evaluation batch ended, ``outputs`` its step's (``on_*_batch_end``; ``after_val_iter``)."""

    def end_eval_epoch(self, run: Evaluation) -> None:
        """Its epoch ends (``on_*_epoch_end``; mmcv's ``after_val_epoch``, a Classy test phase's end)."""

    def end_eval(self, run: Evaluation) -> None:
        """The evaluation ends, its metrics logged (``on_*_end``; MMEngine's ``after_val_epoch`` and ``after_val``)."""


@runtime_checkable
class HostLoop(EvalLoop, Protocol):
    """What a family's host loop provides: the counters (read-only here: a loop may derive them, as Classy's does from
    its phases), the train's start and end and the four train steps of the host's own loop, the six steps of an
    evaluation (:class:`EvalRows` fires their rows), and its state. A family's loop may have more steps (a fit's
    setup, a phase of Classy's, mmcv's workflow mode), called by its own adapter."""

    @property
    def epoch(self) -> int:
        """Epochs the host has finished, as it counts them (MMEngine's and mmcv's ``runner.epoch``; Classy's finished
        train phases). A host that sets it only once its epoch loop runs (iMIX) says so in its own loop."""

    @property
    def iter(self) -> int:
        """Train iterations the host has finished in the run (``runner.iter``)."""

    @property
    def inner_iter(self) -> int:
        """Train iterations finished in the open epoch (``runner.inner_iter``)."""

    def start_train(self, at: TrainStart) -> None:
        """Training starts (``on_train_start``; also a fit with nothing left to train): set the counters the host sets
        before its train loop from ``at`` where it reads them from Lightning, then fire ``before_train``."""

    def start_epoch(self, mid_epoch: bool) -> None:
        """Start a train epoch; ``mid_epoch`` when a fit resumed inside it (its counters come from the checkpoint)."""

    def start_iter(self, batch: Any, batch_idx: int) -> None:
        """Start a train iteration (the host's ``before_train_iter``)."""

    def end_iter(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """End a train iteration: fire its rows and move the iteration counters, in the host's order. ``outputs`` is
        None where a hook owns the optimizer step (mmcv, iMIX): the iteration ends when the strategy's step returns,
        before Lightning has the step's outputs."""

    def end_epoch(self, trigger: Trigger) -> None:
        """End the open train epoch, firing ``trigger``'s rows, and move the epoch counter as the host does."""

    def end_train(self) -> None:
        """Training ends (``on_train_end``): fire ``after_train``, and leave what the host's train loop entered."""

    def state_dict(self) -> dict[str, Any]:
        """The counters a checkpoint keeps, as plain values."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s counters (strict: a missing key raises ``KeyError`` naming it)."""


class EvalRows:
    """The evaluation steps of a loop whose host needs nothing but its rows: each fires the Lightning event's rows
    with the standard context (``batch_idx``, ``data_batch``, ``outputs``) through ``self.caller``. A family's loop
    derives from it and overrides the steps its host does more in (MMEngine's metrics, mmcv's ``mode``)."""

    caller: HookCaller

    def start_eval(self, run: Evaluation) -> None:
        self.caller.fire(run.on("start"))

    def start_eval_epoch(self, run: Evaluation) -> None:
        self.caller.fire(run.on("epoch_start"))

    def start_eval_iter(self, run: Evaluation, batch: Any, batch_idx: int) -> None:
        self.caller.fire(run.on("batch_start"), batch_idx=batch_idx, data_batch=batch)

    def end_eval_iter(self, run: Evaluation, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.caller.fire(run.on("batch_end"), batch_idx=batch_idx, data_batch=batch, outputs=outputs)

    def end_eval_epoch(self, run: Evaluation) -> None:
        self.caller.fire(run.on("epoch_end"))

    def end_eval(self, run: Evaluation) -> None:
        self.caller.fire(run.on("end"))
