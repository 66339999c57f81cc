"""``IMIXLoop``: iMIX's engine loop (``CommonEngine.train_by_epoch`` / ``train_by_iter`` / ``run_train_epoch`` and
``EngineBase``'s mount points) run by Lightning's events, a :class:`~lightning_hooks.core.host_loop.HostLoop`.

It owns what iMIX's ``imixEngine`` counts: ``iter`` (across epochs), ``epoch`` and ``inner_iter`` (set by the epoch
loop only: by iteration iMIX never sets them), ``start_iter``, and the ``LogBufferStorage`` the engine steps after
every ``after_train_iter`` and ``after_train_epoch``. The
:class:`~lightning_hooks.families.imix.engine.Engine` facade reads them here. The loop fires the train rows through the
:class:`~lightning_hooks.core.dispatch.HookCaller` it is given, in the engine's order. The adapter calls it:

=============================================  ===================================================================
Lightning event (adapter)                      loop call: rows fired, counters moved
=============================================  ===================================================================
``setup`` (fit)                                :meth:`start_run`: ``epoch`` / ``inner_iter`` unset
``on_train_start``                             :meth:`start_train`: ``start_iter``, ``iter``, the log buffer
                                               entered; ``before_train``
``on_train_epoch_start`` (or the 1st batch)    :meth:`start_epoch`: ``epoch``; ``before_train_epoch``
``on_train_batch_start``                       :meth:`start_iter`: ``iter``, ``inner_iter``; ``before_train_iter``
                                               when Lightning steps
wrapped ``training_step``                      :meth:`before_step`: ``before_train_iter`` when a hook steps
after the step / ``on_train_batch_end``        :meth:`end_iter`: ``after_train_iter``, the log buffer's step, then
                                               ``iter += 1`` (by epoch)
``on_train_epoch_end``                         :meth:`end_epoch`: ``after_train_epoch``, the log buffer's epoch step
``on_train_end``                               :meth:`end_train`: ``after_train``, the log buffer left
failure / ``teardown``                         :meth:`close_log_buffer`
evaluation events                              :class:`~lightning_hooks.core.host_loop.EvalRows`: their rows (iMIX
                                               has none: its evaluation is a hook's)
=============================================  ===================================================================

A resumed fit's iteration and epoch come from the loop's own state in the adapter's checkpoint state (as iMIX's
``resume_or_load`` reads them from its checkpoint); Lightning's counts are read only for a checkpoint without it (a
plain Lightning checkpoint, or one written before the loop's state was saved).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning_hooks.core import lightning_api
from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.host_loop import EvalRows, TrainStart
from lightning_hooks.core.manual_step import AFTER_STEP, BEFORE_STEP
from lightning_hooks.core.triggers import ON, Trigger

_BEFORE_ITER = ON["on_train_batch_start"]


class IMIXLoop(EvalRows):
    """iMIX's engine loop as Lightning's events drive it: counters, the log buffer, the train rows.

    ``by_epoch``: ``train_by_epoch`` (else ``train_by_iter``); ``hooks_step``: an ``OptimizerHook`` owns the step, so
    ``before_train_iter`` / ``after_train_iter`` fire around the wrapped step (:data:`BEFORE_STEP`,
    :data:`AFTER_STEP`) rather than from the batch callbacks. ``iter`` is the current iteration's index over the run
    (by epoch it advances after ``after_train_iter``, as ``run_train_epoch``'s ``self.iter += 1``), ``epoch`` the
    current epoch's index (it stays at the last one after training, as iMIX's loop variable), ``inner_iter`` the
    iteration's index in its epoch; ``epoch_set`` / ``inner_iter_set`` say whether iMIX has set them yet.

    Example (one epoch of two batches, Lightning stepping)::

        loop = IMIXLoop(adapter, by_epoch=True, hooks_step=False)
        loop.start_run(); loop.start_train(TrainStart(epoch=0, batches_fetched=0, epoch_batches=2))
        loop.start_epoch(False)
        loop.start_iter(batch, 0); loop.end_iter(outputs, batch, 0)  # before/after_train_iter; loop.iter == 1
        loop.start_iter(batch, 1); loop.end_iter(outputs, batch, 1)
        loop.end_epoch(ON["on_train_epoch_end"])  # after_train_epoch; loop.epoch == 0, as iMIX's
        loop.end_train()  # after_train
    """

    def __init__(self, caller: HookCaller, by_epoch: bool, hooks_step: bool) -> None:
        self.caller = caller
        self.by_epoch = by_epoch
        self.hooks_step = hooks_step
        self._after_iter: Trigger = AFTER_STEP if hooks_step else ON["on_train_batch_end"]
        #: iMIX's ``LogBufferStorage`` class, which :meth:`start_train` enters (None: imix is not loaded)
        self.log_buffer_class: Any = None
        #: iMIX's ``LogBufferStorage`` of the open training (None: not training, or imix not installed)
        self.log_buffer: Any = None
        self.iter = self.first_iter = 0
        #: the batches of an epoch in this fit (``TrainStart.epoch_batches``): its last one ends the epoch
        self.epoch_batches: int | float = 0
        self.start_run()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its caller (``ddp_spawn`` pickles each hook alone first, and an iMIX hook's ``trainer``
        proxy copies the engine and so this loop: the adapter must not follow); the adapter sets it again."""
        return {k: v for k, v in self.__dict__.items() if k != "caller"}

    # ------------------------------------------------------------------------------------------------ the run
    def start_run(self) -> None:
        """A fit starts (``setup``): iMIX's epoch loop has not set ``epoch`` / ``inner_iter`` yet, and no checkpoint
        has given the counters (:meth:`load_state_dict`)."""
        self.epoch = self.inner_iter = 0
        self.epoch_set = self.inner_iter_set = False
        self._next_epoch = 0
        self._next_iter = self.iter
        #: (epoch, iteration) a resumed fit goes on at, from the adapter's checkpoint state; None: not resumed so
        self.restored: tuple[int, int] | None = None

    def start_train(self, at: TrainStart) -> None:
        """Training starts at an epoch and iteration (:attr:`restored` when the fit resumed from the adapter's state,
        else Lightning's, ``at``), :attr:`log_buffer_class` entered as iMIX's ``with LogBufferStorage(...)``:
        ``before_train``. ``at.epoch_batches`` is the epoch length :meth:`end_iter` ends epochs at."""
        epoch, start_iter = self.restored or (at.epoch, at.batches_fetched)
        self.epoch_batches = at.epoch_batches
        self.first_iter = self.iter = self._next_iter = start_iter
        self._next_epoch = epoch
        self.log_buffer = self._enter_log_buffer(start_iter, epoch, at.epoch_batches)
        self.caller.fire(ON["on_train_start"])

    def _enter_log_buffer(self, start_iter: int, epoch: int, epoch_batches: int | float) -> Any:
        """iMIX's ``LogBufferStorage`` of a training from ``start_iter``, entered (None without :attr:`log_buffer_class`)."""
        if self.log_buffer_class is None:
            return None
        if self.by_epoch:
            buffer = self.log_buffer_class(start_iter, int(epoch_batches), epoch)
        else:
            buffer = self.log_buffer_class(start_iter, by_epoch=False)
        return buffer.__enter__()

    def end_train(self) -> None:
        """Training ends: ``after_train``, then leave the log buffer's ``with`` (also when a hook fails)."""
        try:
            self.caller.fire(ON["on_train_end"])
        finally:
            self.close_log_buffer()

    def close_log_buffer(self) -> None:
        """Leave the log buffer's ``with`` (training ended or failed); idempotent."""
        buffer, self.log_buffer = self.log_buffer, None
        if buffer is not None:
            buffer.__exit__(None, None, None)

    def state_dict(self) -> dict[str, Any]:
        """The counters a resumed fit goes on from (the adapter's checkpoint state): the epoch it runs or continues,
        the next iteration's index, the last iteration's index in its epoch. As iMIX's own rule, an epoch whose
        iterations all ran is done from its last iteration on (its ``after_train_epoch`` may not have run yet):
        ``resume_or_load`` goes on at the next epoch (``epoch + 1``), at the iterations done (``epoch_iter``); an epoch
        not done goes on at its next iteration (iMIX itself resumes only at an epoch's start)."""
        return {"epoch": self._next_epoch, "iter": self._next_iter, "inner_iter": self.inner_iter}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (strict: a missing counter raises ``KeyError`` naming it); training then starts
        at these counters (:attr:`restored`)."""
        missing = [name for name in ("epoch", "iter", "inner_iter") if name not in state]
        if missing:
            raise KeyError(f"IMIXLoop.load_state_dict: the state has no counters {missing} (keys: {sorted(state)})")
        self.epoch, self.iter, self.inner_iter = state["epoch"], state["iter"], state["inner_iter"]
        self._next_epoch, self._next_iter = self.epoch, self.iter
        self.restored = (self.epoch, self.iter)

    def upgrade_state(self, state: dict[str, Any], checkpoint: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """:meth:`state_dict` as adapter state format 1 wrote it, in this format; None where that cannot be told.
        Format 1 moved ``epoch`` on only when ``after_train_epoch`` had run, so a checkpoint written at an epoch's last
        batch (Lightning's epoch not ended: ``lightning_api.written_at_last_batch``) kept that epoch, which this
        format counts as done (``resume_or_load``'s ``epoch + 1``): there it becomes the next one. By iteration the
        counters mean the same. Without the Lightning ``checkpoint`` (a state given alone) the two cases cannot be told
        apart by epoch: None."""
        if not self.by_epoch:
            return state
        if checkpoint is None:
            return None
        if lightning_api.written_at_last_batch(checkpoint) and state["epoch"] == checkpoint.get("epoch"):
            return {**state, "epoch": state["epoch"] + 1}
        return state

    # ------------------------------------------------------------------------------------------------ train
    def start_epoch(self, mid_epoch: bool) -> None:
        """``for self.epoch in range(...)``: the epoch's index, then ``before_train_epoch`` (by epoch only)."""
        self.epoch, self.epoch_set = self._next_epoch, True
        self.caller.fire(ON["on_train_epoch_start"])

    def start_iter(self, batch: Any, batch_idx: int) -> None:
        """An iteration's batch is drawn: ``iter`` (the run's index), ``inner_iter`` (by epoch), then
        ``before_train_iter`` when Lightning steps (else :meth:`before_step` fires it)."""
        self.iter = self._next_iter
        self._next_iter += 1
        if self.by_epoch:
            self.inner_iter, self.inner_iter_set = batch_idx, True
        if not self.hooks_step:
            self.caller.fire(_BEFORE_ITER)

    def before_step(self) -> None:
        """Right before the forward, when a hook owns the step: ``before_train_iter``."""
        self.caller.fire(BEFORE_STEP)

    def end_iter(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """The step ran: ``after_train_iter`` (a step-owning hook's backward and step), the log buffer's step (by
        epoch also its ``epoch_iter``), then by epoch ``iter += 1``; after the epoch's last iteration the epoch is
        done, and the next one is the epoch a resumed fit runs (:meth:`state_dict`)."""
        self.caller.fire(self._after_iter)
        buffer = self.log_buffer
        if buffer is not None:
            buffer.step()
            if self.by_epoch:
                buffer.epoch_iter(self.inner_iter)
        if self.by_epoch:
            self.iter += 1
            if self.inner_iter + 1 == self.epoch_batches:
                self._next_epoch = self.epoch + 1

    def end_epoch(self, trigger: Trigger) -> None:
        """The epoch ends: ``trigger``'s rows (``after_train_epoch``), then the log buffer's ``epoch_step`` (by
        epoch); the next epoch is the following index."""
        self.caller.fire(trigger)
        if self.by_epoch and self.log_buffer is not None:
            self.log_buffer.epoch_step()
        self._next_epoch = self.epoch + 1
