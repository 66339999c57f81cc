"""``MMCVLoop``: mmcv 1.x's runner loop (``EpochBasedRunner.train`` / ``val``, ``IterBasedRunner.train`` / ``val``)
run by Lightning's events, a :class:`~lightning_hooks.core.host_loop.HostLoop`.

It owns what mmcv's runner loop owns: the counters (``epoch``, ``iter``, ``inner_iter``; IterBasedRunner's epoch is
its ``IterLoader``'s pass), the stop rule's lengths (``max_epochs`` / ``max_iters``, mmcv's ``_max_epochs`` /
``_max_iters``), the workflow's ``mode`` with its loader, and the open iteration's ``data_batch``. The
:class:`~lightning_hooks.families.mmcv.runner.Runner` facade reads them here and writes none. The loop fires the
train and validation rows through the :class:`~lightning_hooks.core.dispatch.HookCaller` it is given, in the
runners' order. The adapter calls it at Lightning's events:

=============================================  ===================================================================
Lightning event (adapter)                      loop call: rows fired, counters moved
=============================================  ===================================================================
``setup`` (fit)                                :meth:`start_run`: counters at 0, or where an mmcv checkpoint left
                                               them (``MMCVAdapter.start_after``); a resumed fit then loads its own
``on_fit_start`` / each train epoch's start    :meth:`set_limits`: ``max_epochs`` / ``max_iters`` of the Trainer
``on_train_start``                             :meth:`start_train`: IterBasedRunner's ``IterLoader`` (the train
                                               iterator, ``make_train_iterator``), then its ``before_epoch``
``on_train_epoch_start`` (or the 1st batch)    :meth:`start_mode` ``"train"``, :meth:`start_epoch`:
                                               ``before_train_epoch``
``on_train_batch_start``                       :meth:`start_iter`: ``inner_iter``, ``data_batch``;
                                               ``before_train_iter`` when Lightning steps
wrapped ``training_step``                      :meth:`before_step`: ``before_train_iter`` when a hook steps
after the step / ``on_train_batch_end``        :meth:`end_iter`: ``after_train_iter``, then ``iter += 1``
                                               (IterBasedRunner: ``inner_iter += 1``)
last batch / ``on_train_epoch_end``            :meth:`end_epoch`: ``after_train_epoch``, then ``epoch += 1``
                                               (IterBasedRunner: the loader's pass ends)
``on_validation_epoch_start``                  :meth:`start_mode` ``"val"`` (the adapter: it has the loader),
                                               then ``before_val_epoch``
``on_validation_batch_start`` / ``_end``       :meth:`start_eval_iter` / :meth:`end_eval_iter`: ``inner_iter``,
                                               ``data_batch``, ``runner.outputs``; ``before_val_iter`` /
                                               ``after_val_iter``
other evaluation events                        :class:`~lightning_hooks.core.host_loop.EvalRows`: their rows
``on_train_end``                               :meth:`end_train`: IterBasedRunner's ``after_epoch``, ``after_run``
=============================================  ===================================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lightning_hooks.core import lightning_api
from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.host_loop import EvalRows, Evaluation, TrainStart
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.loaders import Loader, set_sampler_epoch
from lightning_hooks.core.manual_step import AFTER_STEP, BEFORE_STEP
from lightning_hooks.core.triggers import ON, Trigger

_BEFORE_ITER = ON["on_train_batch_start"]
_AFTER_ITER = ON["on_train_batch_end"]


class MMCVLoop(EvalRows):
    """mmcv 1.x's runner loop as Lightning's events drive it: counters, lengths, mode, the train and val rows.

    ``iter_based``: ``IterBasedRunner`` (else ``EpochBasedRunner``); ``hooks_step``: an ``OptimizerHook`` owns the
    step, so ``before_train_iter`` / ``after_train_iter`` fire around the wrapped step (:data:`BEFORE_STEP`,
    :data:`AFTER_STEP`) rather than from the batch callbacks. ``epoch`` counts finished train epochs (the train
    loader's finished passes before the current batch was drawn, for IterBasedRunner), ``iter`` finished train
    iterations, ``inner_iter`` the batch index in the epoch (IterBasedRunner: 0 during an iteration, 1 after it, as
    its ``workflow=[('train', 1)]`` cycle).

    Example (one epoch of two batches, Lightning stepping)::

        loop = MMCVLoop(adapter, iter_based=False, hooks_step=False)
        loop.start_run(); loop.start_train(TrainStart(0, 0, 2)); loop.start_mode("train", loader, 2)
        loop.start_epoch(False)
        loop.start_iter(batch, 0); loop.end_iter(outputs, batch, 0)  # before/after_train_iter; loop.iter == 1
        loop.start_iter(batch, 1); loop.end_iter(outputs, batch, 1)
        loop.end_epoch(LAST_TRAIN_BATCH)  # after_train_epoch; loop.epoch == 1
    """

    def __init__(
        self, caller: HookCaller, iter_based: bool, hooks_step: bool,
        take_outputs: Callable[[Any, str], None] | None = None,
        make_train_iterator: Callable[[int], None] | None = None,
    ) -> None:  # fmt: skip  # the optional collaborators on lines of their own
        self.caller = caller
        #: what makes a step's result ``runner.outputs`` (and logs its ``log_vars``): the adapter's, for val steps
        self.take_outputs = take_outputs
        #: IterBasedRunner: what makes the train loader's iterator for the pass of the given number, where its
        #: ``IterLoader`` does (the adapter's, which has the Trainer)
        self.make_train_iterator = make_train_iterator
        self.iter_based = iter_based
        self._after_iter: Trigger = AFTER_STEP if hooks_step else _AFTER_ITER
        self.hooks_step = hooks_step
        #: mmcv's ``_max_epochs`` / ``_max_iters`` (None: unbounded, or not known before the fit starts)
        self.max_epochs: int | None = None
        self.max_iters: int | None = None
        self.start_run()

    # ------------------------------------------------------------------------------------------------ the run
    def start_run(self, epoch: int = 0, iteration: int = 0) -> None:
        """A new runner's state (``setup`` of a fit): no mode, no loader, the counters at ``epoch`` / ``iteration``
        (an mmcv checkpoint's ``meta``, as after ``runner.resume``, whose IterBasedRunner sets ``inner_iter`` to
        ``iteration`` too; 0 for a new run)."""
        self.epoch, self.iter, self.inner_iter = epoch, iteration, iteration if self.iter_based else 0
        self.passes = 0  # IterBasedRunner: the train loader's finished passes (its IterLoader's epoch)
        #: IterBasedRunner: the fit resumed from the adapter's state, as ``runner.resume``: its loader's passes count
        #: from the resumed fit's first (a new ``IterLoader``), not from Lightning's epoch
        self.fresh_passes = False
        self.mode: str | None = None
        self.data_loader: Loader | None = None
        self.data_batch: Any = None

    def set_limits(self, max_epochs: int | None, max_iters: int | None) -> None:
        """The run's lengths as mmcv's runner knows them from ``before_run`` on (None: unbounded)."""
        self.max_epochs, self.max_iters = max_epochs, max_iters

    def start_train(self, at: TrainStart) -> None:
        """Training starts (``on_train_start``; a resumed fit's Lightning loop is restored): IterBasedRunner's
        ``IterLoader`` and ``before_epoch``. Its loader's passes are Lightning's epoch (``at.epoch``); ``epoch`` stays
        what the run started with (0, or a checkpoint's ``meta['epoch']``, as ``runner.resume`` sets it) until the
        first iteration reads the loader's pass, as ``IterBasedRunner.train`` does; after :meth:`resumed`, the passes
        of its new ``IterLoader``, from 0. ``IterBasedRunner.run`` makes that ``IterLoader`` (``iter()`` of the
        loader: its workers' base seed, their first indices, their copy of the dataset) after ``before_run`` and
        before ``before_epoch``, even when no iteration is left: so does :attr:`make_train_iterator`."""
        if self.iter_based:
            self.passes = 0 if self.fresh_passes else at.epoch
            if self.make_train_iterator is not None:
                self.make_train_iterator(self.passes)
        self.caller.fire(ON["on_train_start"])

    def end_train(self) -> None:
        """Training ends (``on_train_end``): IterBasedRunner's ``after_epoch``, the runners' ``after_run``."""
        self.caller.fire(ON["on_train_end"])

    def start_mode(self, mode: str, loader: Any, batches: int) -> None:
        """A workflow phase starts: ``mode`` (``"train"`` / ``"val"``) and its loader of ``batches`` batches."""
        self.mode = mode
        self.data_loader = Loader(loader, batches)

    def state_dict(self) -> dict[str, Any]:
        """``epoch`` and ``iter`` as mmcv's ``save_checkpoint`` keeps them in ``meta`` (``inner_iter`` starts over):
        IterBasedRunner's epoch plus one, the loader's pass counted as begun; EpochBasedRunner's finished epochs (its
        ``epoch + 1`` at ``after_train_epoch``, where its CheckpointHook saves)."""
        return {"epoch": self.epoch + 1 if self.iter_based else self.epoch, "iter": self.iter}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` as ``runner.resume`` restores ``meta``: ``epoch`` and ``iter`` as they are
        (IterBasedRunner's hooks see ``meta['epoch']`` until its first iteration, and ``inner_iter`` at
        ``meta['iter']``, as its ``resume`` sets it)."""
        self.epoch, self.iter = state["epoch"], state["iter"]
        if self.iter_based:
            self.inner_iter = self.iter

    def resumed(self, checkpoint: dict[str, Any]) -> bool:
        """A fit resumes from a Lightning checkpoint with this loop's state (``on_load_checkpoint``); returns whether it
        goes on as mmcv's ``runner.resume`` (rather than as Lightning resumes). IterBasedRunner's
        ``runner.resume`` then trains from a new ``IterLoader``: a new pass over the train loader, whose passes (the
        runner's ``epoch`` from the first iteration on, the sampler's epoch) count from 0. Lightning's loop, in
        ``checkpoint``, starts the pass it was written in again from its first batch, or at a pass's last batch the
        next pass (``lightning_api.restart_epoch_at_start`` / ``start_next_epoch``), and after a fit that stopped at
        ``max_iters`` inside a pass the next pass from its first batch (``start_epoch_afresh``). EpochBasedRunner:
        Lightning's resume stands (mmcv's runs the whole epoch again, Lightning the batches after the saved one)."""
        if not self.iter_based:
            return False
        if not (lightning_api.start_next_epoch(checkpoint) or lightning_api.restart_epoch_at_start(checkpoint)):
            lightning_api.start_epoch_afresh(checkpoint)
        self.fresh_passes = True
        return True

    def upgrade_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """:meth:`state_dict`'s keys of the adapter's host state as adapter state format 1 wrote them, in this format:
        format 1 kept IterBasedRunner's ``epoch`` as the runner read it (the loader's pass), this one as
        ``save_checkpoint`` writes ``meta['epoch']`` (one more); EpochBasedRunner's mean the same."""
        if self.iter_based and "epoch" in state:
            return {**state, "epoch": state["epoch"] + 1}
        return state

    # ------------------------------------------------------------------------------------------------ train
    def start_epoch(self, mid_epoch: bool) -> None:
        """``EpochBasedRunner.train``'s start: ``before_train_epoch`` (the table fires it for that runner only). After
        :meth:`resumed`, IterBasedRunner's train sampler gets the pass's number from 1, as the new ``IterLoader``
        sets it (Lightning set its own epoch; the adapter hands the first pass its sampler's epoch back)."""
        if self.iter_based and self.fresh_passes and self.passes:
            start_pass(self.data_loader, self.passes)
        self.caller.fire(ON["on_train_epoch_start"])

    def start_iter(self, batch: Any, batch_idx: int) -> None:
        """An iteration's batch is drawn: ``inner_iter`` and ``data_batch`` as the runner sets them, then
        ``before_train_iter`` when Lightning steps (else :meth:`before_step` fires it). IterBasedRunner reads its
        loader's epoch before drawing the batch: the first batch of a new pass still sees the previous pass."""
        if self.iter_based:
            self.epoch = self.passes - (batch_idx == 0 and self.passes > 0)
            self.inner_iter = 0
        else:
            self.inner_iter = batch_idx
        self.data_batch = batch
        if not self.hooks_step:
            self.caller.fire(_BEFORE_ITER)

    def before_step(self) -> None:
        """Right before the model's step, when a hook owns it: ``before_train_iter``."""
        self.caller.fire(BEFORE_STEP)

    def end_iter(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """The step ran: ``after_train_iter`` (a step-owning hook's backward and step), then the runner's counters
        move (``outputs``: the step's, which the runner facade already holds)."""
        self.caller.fire(self._after_iter)
        self.data_batch = None
        self.iter += 1
        if self.iter_based:
            self.inner_iter += 1  # reset to 0 by the next iteration's start, as each workflow cycle does

    def end_epoch(self, trigger: Trigger) -> None:
        """The train epoch ends: ``trigger``'s rows (``after_train_epoch``), then ``epoch += 1``; IterBasedRunner
        fires nothing here and counts the loader's pass."""
        self.caller.fire(trigger)
        if self.iter_based:
            self.passes += 1
        else:
            self.epoch += 1

    # ------------------------------------------------------------------------------------------------ val
    def start_eval_iter(self, run: Evaluation, batch: Any, batch_idx: int) -> None:
        """``val``'s iteration: ``inner_iter`` (the batch index), ``data_batch``, ``before_val_iter`` (mmcv has no
        test workflow: a test batch fires its rows only)."""
        if run.stage != "val":
            super().start_eval_iter(run, batch, batch_idx)
            return
        self.inner_iter = batch_idx
        self.data_batch = batch
        self.caller.fire(run.on("batch_start"))

    def end_eval_iter(self, run: Evaluation, outputs: Any, batch: Any, batch_idx: int) -> None:
        """The val step's result becomes ``runner.outputs`` (not in Lightning's sanity check), ``after_val_iter``;
        IterBasedRunner's ``inner_iter`` then moves."""
        if run.stage != "val":
            super().end_eval_iter(run, outputs, batch, batch_idx)
            return
        if not run.sanity_check and outputs is not None and self.take_outputs is not None:
            self.take_outputs(outputs, "validation_step")
        self.caller.fire(run.on("batch_end"))
        self.data_batch = None
        if self.iter_based:
            self.inner_iter += 1


def run_limits(trainer: pl.Trainer, iter_based: bool, iters_per_step: int) -> tuple[int | None, int | None]:
    """mmcv's ``_max_epochs`` / ``_max_iters`` for a Lightning fit (None: unbounded). ``max_iters``: ``max_epochs``
    times the batches per epoch, or ``Trainer(max_steps)`` times ``iters_per_step`` (a
    ``GradientCumulativeOptimizerHook``'s accumulation) when that ends the run sooner. ``max_epochs``: the Trainer's;
    for IterBasedRunner, which leaves it unset, the epochs ``max_iters`` spans."""
    batches = trainer.num_training_batches
    iters = math.inf if trainer.max_epochs in (None, -1) else trainer.max_epochs * batches
    if trainer.max_steps > 0:
        iters = min(iters, trainer.max_steps * iters_per_step)
    max_iters = None if math.isinf(iters) else int(iters)
    if not iter_based:
        return trainer.max_epochs, max_iters
    return (None if max_iters is None or not batches else math.ceil(max_iters / batches)), max_iters


def start_pass(loader: Any, passes: int) -> None:
    """What IterBasedRunner's ``IterLoader`` does to ``loader`` when its pass number ``passes`` starts: its sampler
    (the loader's own, not a batch sampler's) gets that number as its epoch."""
    set_sampler_epoch(loader, passes)
