"""The host loop: one object per run that owns what a legacy host's own loop owns.

MMEngine's ``EpochBasedTrainLoop.run_epoch`` / ``run_iter`` read as the lifecycle in twenty lines: they fire the
hooks and move ``self._epoch`` / ``self._iter`` themselves. Each family has one class that does the same for its host
(:class:`HostLoop`): it holds the counters the hooks read through the facade (the facade reads them, never writes
them), decides when the host's run stops and when it validates, and fires its own rows through the
:class:`~lightning_hooks.core.dispatch.HookCaller` it is given. The family adapter only translates Lightning's events
into the loop's calls.

Example, a loop as a family writes it (``tests/core/test_host_loop.py`` runs this one)::

    class CountingLoop:
        def __init__(self, caller):
            self.caller, self.epoch, self.iter, self.inner_iter = caller, 0, 0, 0
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
        def state_dict(self):
            return {"epoch": self.epoch, "iter": self.iter, "inner_iter": self.inner_iter}
        def load_state_dict(self, state):
            self.epoch, self.iter, self.inner_iter = state["epoch"], state["iter"], state["inner_iter"]
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from lightning_hooks.core.triggers import Trigger


@runtime_checkable
class HostLoop(Protocol):
    """What a family's host loop provides: the counters (read-only here: a loop may derive them, as Classy's does from
    its phases), the four train steps of the host's own loop, and its state. A family's loop may have more steps (the
    run's start and end, evaluation, a phase of Classy's), called by its own adapter."""

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

    def state_dict(self) -> dict[str, Any]:
        """The counters a checkpoint keeps, as plain values."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s counters (strict: a missing key raises ``KeyError`` naming it)."""
