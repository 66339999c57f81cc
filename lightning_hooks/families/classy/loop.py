"""Classy's host loop: the phases of ``ClassificationTask`` + ``LocalTrainer`` (and VISSL's trainer) and the
counters they move, owned in one place (:class:`ClassyLoop`).

Classy's ``LocalTrainer.train`` runs, per phase, ``task.advance_phase()`` (counters up, losses and meters reset), the
``on_phase_start`` hooks, ``task.step()`` per batch (``num_updates`` grows by the global batch size after the update,
then the ``on_step`` hooks) and ``on_phase_end``. :class:`ClassyLoop` does the same from the adapter's calls: it holds
every counter the ``task`` facade shows (``phase_idx``, ``train_phase_idx``, ``num_updates``, ``iteration``,
``local_iteration_num``, ``batches``, ``phase_batches``, ``batch_time``, ``train``), moves them in the host's order and
fires the rows of each step through its :class:`~lightning_hooks.core.dispatch.HookCaller`. The facade reads them; a
hook that writes one (VISSL's ``SetDataSamplerEpochHook`` resets ``task.batches``) writes it here.

Example (``tests/families/classy/test_loop.py`` drives one with a fake caller)::

    loop = ClassyLoop(caller, records, StepClock(lambda: None))
    loop.start_epoch(mid_epoch=False)           # phase_idx 0, train_phase_idx 0, on_phase_start
    loop.end_iter(outputs, batch, batch_idx=0)  # iteration 1, num_updates += global batch size, on_step
    loop.end_phase(LAST_TRAIN_BATCH)            # on_phase_end
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.host_loop import EvalRows, Evaluation, TrainStart
from lightning_hooks.core.triggers import ON, Trigger
from lightning_hooks.families.classy.timing import StepClock

#: the counters a checkpoint keeps (a Lightning checkpoint's adapter state; Classy's and VISSL's use the first four)
COUNTERS = ("phase_idx", "train_phase_idx", "num_updates", "iteration", "local_iteration_num", "batches", "phase_batches")
#: each counter's value before a run: Classy's, and VISSL's ``-1`` before the first phase / batch
_START = {"phase_idx": -1, "train_phase_idx": -1, "num_updates": 0, "iteration": 0, "local_iteration_num": -1,
          "batches": -1, "phase_batches": 0}  # fmt: skip  # one table, as the counters are listed above


class PhaseRecords(Protocol):
    """What the task keeps per phase beside the counters (losses, meters, ``last_batch``, ``perf_log``), moved by the
    loop at the host's moments (the ``task`` facade implements it)."""

    def open_phase(self, resumed: bool) -> None:
        """``advance_phase``'s records: ``last_batch`` cleared, the phase's start time; unless ``resumed``, losses and
        meters reset."""

    def close_phase(self) -> None:
        """Before the ``on_phase_end`` hooks: the phase's speed logged, ``last_batch`` cleared, losses and meters
        synced over ranks."""

    def after_phase_end(self) -> None:
        """After the ``on_phase_end`` hooks: a fresh ``perf_log`` with the phase's total speed."""

    def global_batchsize(self) -> int:
        """The global batch size the last step trained on (what ``num_updates`` grows by)."""


class ClassyLoop(EvalRows):
    """The phase loop of ``ClassificationTask`` + ``LocalTrainer`` (VISSL's trainer: the same counters, plus
    ``iteration``, ``local_iteration_num``, ``batches`` and ``batch_time``), driven by the adapter.

    ``phase_idx`` counts train and test phases together, ``train_phase_idx`` the train phases; ``iteration`` counts
    train steps, ``num_updates`` the samples trained on (the global batch size after each train step's update);
    ``local_iteration_num`` counts phase starts and batches of every phase (-1 before the first, never reset, as VISSL's
    trainer loop), ``batches`` the batches of the run (-1 at ``on_start``), ``phase_batches`` those of the open phase.

    ``phase_start``: called after the counters moved and before the ``on_phase_start`` hooks of a phase (VISSL's
    ``optimizer.on_epoch(where)`` at a train phase start), with whether it is a train phase.
    """

    # the counters (COUNTERS), set by new_run() from _START
    phase_idx: int
    train_phase_idx: int
    num_updates: int
    iteration: int
    local_iteration_num: int
    batches: int
    phase_batches: int

    def __init__(
        self, caller: HookCaller, records: PhaseRecords, clock: StepClock,
        phase_start: Callable[[bool], None] | None = None,
    ) -> None:  # fmt: skip  # one argument per line would hide the four collaborators
        self.caller, self.records, self.clock, self.phase_start = caller, records, clock, phase_start
        self.new_run()

    def new_run(self) -> None:
        """The counters of a task that has not run yet (each ``fit`` is a new run)."""
        for name, value in _START.items():
            setattr(self, name, value)
        self.train = True
        self.phase_open = False
        self.phase_ended = False  # the open phase has ended (its batch count is final)
        self.batch_time: list[float] = []
        self.phase_start_time_train = time.perf_counter()

    # ------------------------------------------------------------------------------------------ HostLoop view
    @property
    def epoch(self) -> int:
        """Train phases finished."""
        return self.train_phase_idx + 1 - int(self.train and self.phase_open)

    @property
    def iter(self) -> int:
        """Train steps finished in the run."""
        return self.iteration

    @property
    def inner_iter(self) -> int:
        """Train steps finished in the open train phase."""
        return self.phase_batches if self.train else 0

    # ------------------------------------------------------------------------------------------------ phases
    def start_train(self, at: TrainStart) -> None:
        """The ``on_start`` hooks (VISSL's ``task.start_time`` first: the first batch's time runs from here); the
        counters are the task's (a resumed fit's come from its checkpoint), not ``at``'s."""
        self.clock.start_run()
        self.caller.fire(ON["on_train_start"])

    def end_train(self) -> None:
        """The ``on_end`` hooks of a fit."""
        self.caller.fire(ON["on_train_end"])

    def start_phase(self, trigger: Trigger, train: bool, resumed: bool = False) -> None:
        """Classy's ``advance_phase`` then ``trigger``'s rows (``on_phase_start``). ``resumed``: reopen the phase a
        mid-phase checkpoint was written in; its counters come from the checkpoint."""
        self.train, self.phase_open, self.phase_ended = train, True, False
        if not resumed:
            self.phase_batches = 0
            self.phase_idx += 1
            self.train_phase_idx += int(train)
            self.local_iteration_num += 1
        self.records.open_phase(resumed)
        if self.phase_start is not None:
            self.phase_start(train)
        self.caller.fire(trigger)
        self.phase_start_time_train = self.clock.start_phase()

    def end_phase(self, trigger: Trigger) -> None:
        """Classy's phase end: the task's phase-end records, ``trigger``'s rows (``on_phase_end``), the total speed."""
        self.phase_ended = True
        self.records.close_phase()
        self.caller.fire(trigger)
        self.phase_open = False
        self.records.after_phase_end()

    def test_mode(self) -> None:
        """A run with test phases only (``trainer.validate`` / ``trainer.test``): Classy's test-only task is in test
        mode from ``on_start``."""
        self.train = False

    # ------------------------------------------------------------------------------------------ train / eval
    def start_epoch(self, mid_epoch: bool) -> None:
        """A train phase (``mid_epoch``: the one a mid-phase checkpoint was written in, reopened)."""
        self.start_phase(ON["on_train_epoch_start"], train=True, resumed=mid_epoch)

    def start_iter(self, batch: Any, batch_idx: int) -> None:
        """Nothing: Classy fires no hook before a step (``last_batch`` is filled by the step itself)."""

    def end_iter(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """A train step done: ``iteration`` and ``num_updates`` (after the update, before ``on_step``), the batch
        counted, then the ``on_step`` rows."""
        self.iteration += 1
        self.num_updates += self.records.global_batchsize()
        self._count_batch()
        self.caller.fire(ON["on_train_batch_end"])

    def start_eval(self, run: Evaluation) -> None:
        """``trainer.validate`` / ``trainer.test``: Classy's test-only task, in test mode from its ``on_start``
        hooks on; then the rows."""
        if not run.in_fit:
            self.test_mode()
        self.caller.fire(run.on("start"))

    def start_eval_epoch(self, run: Evaluation) -> None:
        """A test phase (none for Lightning's sanity check)."""
        if not run.sanity_check:
            self.start_phase(run.on("epoch_start"), train=False)

    def end_eval_iter(self, run: Evaluation, outputs: Any, batch: Any, batch_idx: int) -> None:
        """A test step done: the batch counted, then its rows (``on_step``)."""
        if not run.sanity_check:
            self._count_batch()
            self.caller.fire(run.on("batch_end"))

    def end_eval_epoch(self, run: Evaluation) -> None:
        """The test phase ends (``on_phase_end``)."""
        if not run.sanity_check:
            self.end_phase(run.on("epoch_end"))

    def end_epoch(self, trigger: Trigger) -> None:
        """The open train phase ends, firing ``trigger``'s rows."""
        self.end_phase(trigger)

    def _count_batch(self) -> None:
        """VISSL's bookkeeping after a step: counters, and the batch's time since the previous one ended."""
        self.local_iteration_num += 1
        self.batches += 1
        self.phase_batches += 1
        self.batch_time.append(self.clock.end_batch())

    # ------------------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """The counters a checkpoint keeps."""
        return {name: getattr(self, name) for name in COUNTERS}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (strict: a missing counter raises ``KeyError`` naming it)."""
        missing = [name for name in COUNTERS if name not in state]
        if missing:
            raise KeyError(f"ClassyLoop.load_state_dict: the state has no counters {missing} (keys: {sorted(state)})")
        self.load_phase_state(state)

    def load_phase_state(self, state: Mapping[str, Any]) -> None:
        """A mid-phase checkpoint's counters; one it lacks (an older checkpoint) starts as in a fresh phase."""
        self.load_counters(state)
        self.local_iteration_num = state.get("local_iteration_num", -1)
        self.batches = state.get("batches", 0)
        self.phase_batches = state.get("phase_batches", 0)

    def load_counters(self, state: Mapping[str, Any]) -> None:
        """The four counters of Classy's task state (``set_classy_state``; VISSL's lacks ``iteration``: 0), and its
        phase type (``train``) when it has one."""
        for name in COUNTERS[:4]:
            setattr(self, name, state.get(name, _START[name]))
        if "train" in state:
            self.train = state["train"]
