"""``MMEngineLoop``: MMEngine's train loop (``EpochBasedTrainLoop`` / ``IterBasedTrainLoop``) run by Lightning's
events, a :class:`~lightning_hooks.core.host_loop.HostLoop`.

It owns what MMEngine's ``runner/loops.py`` owns: the counters (``epoch``, ``iter``, ``inner_iter``; ``runner.iter``
reads them through ``runner.train_loop``), the stop rule (``stop_training``, ``max_iters``) and the validation schedule
(``val_begin``, ``val_interval``, ``dynamic_intervals``), and it fires the train rows itself through the
:class:`~lightning_hooks.core.dispatch.HookCaller` it is given, in ``run_epoch`` / ``run_iter``'s order. The adapter
calls it at Lightning's events:

=========================================  =============================================================
Lightning event (adapter)                  loop call: rows fired, counters moved, what it tells Lightning
=========================================  =============================================================
``setup``                                  :meth:`start_run`: the one place the counters reset
``on_load_checkpoint`` / state             :meth:`resumed`, :meth:`load_state_dict`: ``iter`` of the checkpoint
``on_train_start``                         :meth:`start_train`: ``before_train``; ``epoch`` is Lightning's restored one
``on_train_epoch_start`` (or 1st batch)    :meth:`start_epoch`: ``before_train_epoch``
``on_train_batch_start``                   :meth:`start_iter`: ``before_train_iter``
``on_train_batch_end``                     :meth:`end_iter`: ``after_train_iter``, then ``iter += 1``; iteration-based:
                                           validate after it or not, stop at ``max_iters``
last batch / ``on_train_epoch_end``        :meth:`end_epoch`: ``after_train_epoch``, then ``epoch += 1``; a planned
                                           epoch schedule: validate after it or not
``on_{validation,test}_epoch_start``       :meth:`start_eval_epoch`: ``before_{val,test}_epoch`` (EMAHook swaps in)
``on_{validation,test}_end``               :meth:`end_eval`: ``after_{val,test}_epoch`` with the metrics, ``after_val``
                                           / ``after_test``; after validation, :meth:`end_validation`: a stop
                                           requested in it ends the run
other evaluation events                    :class:`~lightning_hooks.core.host_loop.EvalRows`: their rows
``on_train_end``                           :meth:`end_train`: ``after_train``
=========================================  =============================================================

Lightning's epoch is read in one place, where the loop cannot count it (:meth:`follow_lightning_epoch`): when training
starts (Lightning has restored a resumed fit's loop). Everywhere else the loop counts: from 0 when a fit starts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from lightning_hooks.core import lightning_api
from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.host_loop import EvalRows, Evaluation, TrainStart
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.triggers import ON, Trigger
from lightning_hooks.families.mmengine import iter_based
from lightning_hooks.families.mmengine.iter_based import EpochLoopConfig, IterLoopConfig


class MMEngineLoop(EvalRows):
    """MMEngine's train loop as Lightning's events drive it: counters, stop rule, validation schedule, train rows.

    ``cfg`` is the parsed ``train_cfg`` (None: an epoch-based run whose limits and validation are the Trainer's).
    ``iter`` counts finished iterations (MMEngine counts one after its ``after_train_iter`` hooks), ``epoch`` the
    finished epochs of an epoch-based run (0 for ``IterBasedTrainLoop``), ``inner_iter`` the ``batch_idx`` iter hooks
    get: the index in the epoch, the global iteration for ``IterBasedTrainLoop``.

    Example (the adapter's calls for one batch)::

        loop = MMEngineLoop(adapter.hook_caller, iter_based.parse_train_cfg(dict(by_epoch=True, max_epochs=2)))
        loop.start_run(trainer, "fit"); loop.start_train(train_start(trainer)); loop.start_epoch(mid_epoch=False)
        loop.start_iter(batch, 0); loop.end_iter(outputs, batch, 0)  # before/after_train_iter; loop.iter == 1
    """

    def __init__(self, caller: HookCaller, cfg: EpochLoopConfig | IterLoopConfig | None) -> None:
        self.caller = caller
        self.cfg = cfg
        #: ``EpochBasedTrainLoop`` (True) or ``IterBasedTrainLoop`` (False) semantics
        self.by_epoch = not isinstance(cfg, IterLoopConfig)
        self.trainer: pl.Trainer | None = None
        self.epoch = self.iter = self.inner_iter = 0
        #: the current iteration's train step ran; its ``after_train_iter`` hooks are running
        self.stepped = False
        #: a hook of this process set ``runner.train_loop.stop_training`` in this run
        self.stop_requested = False
        #: values that hold for the open train epoch (``runner.train_loop.per_epoch``); None outside one
        self.epoch_values: dict[str, Any] | None = None
        #: between ``before_{val,test}_epoch`` and ``after_{val,test}_epoch``, where ``EMAHook`` has its weights in
        self.weights_swapped = False

    # ------------------------------------------------------------------------------------------------ the run
    def start_run(self, trainer: pl.Trainer, stage: str) -> None:
        """A run of ``stage`` starts (``setup``): the one place the counters reset. A fit starts from epoch and
        iteration 0 (a resumed one then loads its iteration, :meth:`load_state_dict`, and its epoch with Lightning's
        loop, :meth:`start_train`); validation and test runs keep the counters the last fit left. Every run starts
        with no stop requested and no train epoch open."""
        self.trainer = trainer
        if stage == "fit":
            self.epoch = self.iter = self.inner_iter = 0
            self.stepped = False
        self.stop_requested = False
        self.epoch_values = None

    @property
    def attached(self) -> pl.Trainer:
        """The trainer of the run :meth:`start_run` started; an ``AttributeError`` before it."""
        if self.trainer is None:
            raise AttributeError("MMEngineLoop: no Lightning trainer is running yet")
        return self.trainer

    def start_train(self, at: TrainStart) -> None:
        """Training starts (``on_train_start``), Lightning's loop restored if the fit resumed: ``epoch`` is ``at``'s,
        then fire ``before_train``. ``IterBasedTrainLoop`` validates only after an iteration of its own, and ends at
        once if its iterations are done (:func:`~lightning_hooks.families.mmengine.iter_based.plan_start`)."""
        self.follow_lightning_epoch(at.epoch)
        if isinstance(self.cfg, IterLoopConfig):
            iter_based.plan_start(self.attached, self.cfg, self.iter, self.stop_requested)
        self.caller.fire(ON["on_train_start"])

    def start_epoch(self, mid_epoch: bool) -> None:
        """A train epoch starts (Lightning has set up its data): fire ``before_train_epoch``. A resumed
        ``IterBasedTrainLoop`` then says it skips the batches it trained on (the endless loader skips them), as
        MMEngine's loop logs it before it advances its loader."""
        self.epoch_values = {}
        if not mid_epoch:
            self.inner_iter = 0
        self.caller.fire(ON["on_train_epoch_start"])
        if not self.by_epoch and self.iter > 0:
            from mmengine.logging import print_log  # mmengine is not a dependency: imported where a run has it

            print_log(f"Advance dataloader {self.iter} steps to skip data that has already been trained",
                      logger="current", level=logging.WARNING)  # fmt: skip  # MMEngine's own line, kept whole

    def start_iter(self, batch: Any, batch_idx: int) -> None:
        """Fire ``before_train_iter`` with MMEngine's ``batch_idx``: Lightning's index in the epoch (a resumed epoch
        goes on after the checkpoint's batch), the global iteration for ``IterBasedTrainLoop``."""
        self.inner_iter = batch_idx if self.by_epoch else self.iter
        self.caller.fire(ON["on_train_batch_start"], batch_idx=self.inner_iter, data_batch=batch)

    def end_iter(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """The iteration's train step ran: fire ``after_train_iter``, then count the iteration, as ``run_iter``.
        ``IterBasedTrainLoop``: validate after it where MMEngine does, and end the run at ``max_iters`` or once a
        hook requested a stop (:func:`~lightning_hooks.families.mmengine.iter_based.plan_iteration`)."""
        self.stepped = True  # a checkpoint written by these hooks resumes after this iteration
        self.caller.fire(ON["on_train_batch_end"], batch_idx=self.inner_iter, data_batch=batch, outputs=outputs)
        self.iter += 1
        self.inner_iter += 1
        self.stepped = False
        if isinstance(self.cfg, IterLoopConfig):
            iter_based.plan_iteration(self.attached, self.cfg, self.iter, self.stop_requested)

    def end_epoch(self, trigger: Trigger) -> None:
        """End the open train epoch: fire ``trigger``'s rows (``after_train_epoch``), then count the epoch
        (``EpochBasedTrainLoop``; ``IterBasedTrainLoop``'s epoch stays 0). A stop requested in the epoch stops
        Lightning after the epoch's validation; a planned epoch schedule (``val_begin``, ``dynamic_intervals``)
        decides whether that validation runs (:func:`~lightning_hooks.families.mmengine.iter_based.plan_epoch`)."""
        self.caller.fire(trigger)
        self._agree_on_stop()
        if self.by_epoch:
            self.epoch += 1
        self.epoch_values = None
        self._apply_stop()
        if isinstance(self.cfg, EpochLoopConfig) and self.cfg.scheduled:
            iter_based.plan_epoch(self.attached, self.cfg, self.epoch)

    # ------------------------------------------------------------------------------------------------ evaluation
    def start_eval_epoch(self, run: Evaluation) -> None:
        """``before_val_epoch`` / ``before_test_epoch`` (where ``EMAHook`` swaps its weights in; not in Lightning's
        sanity check, whose rows do not fire)."""
        self.weights_swapped = not run.sanity_check
        self.caller.fire(run.on("epoch_start"))

    def end_eval(self, run: Evaluation) -> None:
        """``after_val_epoch`` with the metrics the evaluation logged, then ``after_val`` (``after_test_*`` alike);
        a validation then ends as :meth:`end_validation` says."""

        self.caller.fire(run.on("end"), metrics=epoch_metrics(self.attached))
        self.weights_swapped = False
        if run.stage == "val":
            self.end_validation()

    def end_validation(self) -> None:
        """A validation ended (its rows fired): a stop a hook requested on one rank stops every rank, and an
        ``IterBasedTrainLoop`` fit ends there if it is done (after the check, as MMEngine's ``while`` reads it)."""
        trainer = self.attached
        self._agree_on_stop()  # EarlyStoppingHook may have stopped this rank only
        if isinstance(self.cfg, IterLoopConfig) and trainer.state.fn == "fit" and not trainer.sanity_checking:
            iter_based.end_if_done(trainer, self.cfg, self.iter, self.stop_requested)

    def end_train(self) -> None:
        """Training ended: fire ``after_train``."""
        self.caller.fire(ON["on_train_end"])

    # ------------------------------------------------------------------------------------------------ stop rule
    def request_stop(self, stop: bool) -> None:
        """``runner.train_loop.stop_training = stop``: set inside a train epoch, Lightning stops after it (its
        validation included), as MMEngine's loops read the flag between epochs; set between epochs, at once."""
        self.stop_requested = bool(stop)
        if self.epoch_values is None:
            self._apply_stop()

    def _agree_on_stop(self) -> None:
        """Under DDP, stop every rank when any rank's hooks set ``stop_training`` (as Lightning's EarlyStopping)."""
        trainer = self.attached
        if trainer.world_size > 1 and trainer.strategy.reduce_boolean_decision(self.stop_requested, all=False):
            self.request_stop(True)

    def _apply_stop(self) -> None:
        if self.stop_requested and self.trainer is not None:
            self.trainer.should_stop = True

    def follow_lightning_epoch(self, epoch: int) -> None:
        """``epoch`` from Lightning's ``epoch`` (``IterBasedTrainLoop``'s stays 0), read in one place: training's start,
        once Lightning has restored a resumed fit's loop (the loop counts every epoch after it); the adapter's warning
        for a fit resumed without its state reads it here first."""
        self.epoch = epoch if self.by_epoch else 0

    # ------------------------------------------------------------------------------------------------ state
    @property
    def finished_iters(self) -> int:
        """Train iterations whose train step ran: ``iter``, plus the current one while its ``after_train_iter`` hooks
        run (a checkpoint written there resumes after it)."""
        return self.iter + self.stepped

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps: the finished iterations (the epoch is Lightning's, restored with its loop)."""
        return {"iter": self.finished_iters}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Go on after ``state["iter"]`` finished iterations (a resumed fit, after :meth:`start_run`)."""
        self.iter, self.stepped = state["iter"], False

    def resumed(self, checkpoint: dict[str, Any], logger: Any) -> bool:
        """A fit resumes from ``checkpoint`` (after its ``after_load_checkpoint`` hooks, before Lightning restores its
        loops from it): ``logger`` (the runner's) says so as ``Runner.resume`` does, ``resumed epoch: E, iter: I``
        from the checkpoint's MMEngine ``meta``. Returns whether the checkpoint was rewritten to go on as the Runner
        (below) rather than as Lightning resumes.

        An epoch-based ``train_cfg``'s run (a config's) resumes a checkpoint written inside an epoch
        (``CheckpointHook`` by iteration, its ``meta`` epoch the epoch that ran) at that epoch's first batch, as
        ``EpochBasedTrainLoop.run_epoch`` iterates its whole loader again after ``Runner.resume``: the epoch's batches
        all run once more, ``iter`` going on from the checkpoint's. Without ``train_cfg`` (MMEngine hooks in a Trainer
        of your own, maybe beside other families' adapters) Lightning's own resume stands: it goes on from the batch
        after the saved one. A checkpoint written at an epoch's end (``CheckpointHook`` by epoch, in
        ``after_train_epoch``: its ``meta`` epoch the next one) resumes at the next epoch's start, whose
        ``before_train_epoch`` hooks (``PipelineSwitchHook``, ...) run before its first batch is drawn, as under the
        Runner."""
        meta: Mapping[str, Any] = checkpoint.get("meta") or {}
        logger.info(f"resumed epoch: {meta.get('epoch', 0)}, iter: {meta.get('iter', 0)}")
        if not isinstance(self.cfg, EpochLoopConfig):
            return False
        loop = checkpoint.get("loops", {}).get("fit_loop", {})
        ran = loop.get("epoch_progress", {}).get("current", {}).get("processed")
        if ran is not None and meta.get("epoch") == ran:
            return lightning_api.restart_epoch_at_start(checkpoint)
        if ran is not None and meta.get("epoch") == ran + 1:  # CheckpointHook(by_epoch=True) at the epoch's end
            return lightning_api.start_next_epoch(checkpoint)
        return False


def epoch_metrics(trainer: pl.Trainer) -> dict[str, Any]:
    """Metrics logged during the evaluation epoch that just ended (MMEngine names them, e.g. ``toy/mse``): one-element
    tensors as Python numbers, other values as logged.

    Under DDP the float metrics are averaged over the ranks, so every rank's hooks see the same values, as MMEngine's
    evaluator gives them (for per-rank means over equal-size shards, their mean is the mean over the whole set).
    Every rank must log the same metric names."""
    metrics = lightning_api.evaluation_metrics(trainer)
    metrics = trainer.callback_metrics if metrics is None else metrics
    out = {k: v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v for k, v in metrics.items()}
    if trainer.world_size > 1:
        names = sorted(k for k, v in out.items() if isinstance(v, float))
        values = torch.tensor([out[k] for k in names], dtype=torch.float64, device=trainer.strategy.root_device)
        out.update(zip(names, trainer.strategy.reduce(values, reduce_op="mean").tolist(), strict=True))
    return out
