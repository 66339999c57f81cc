"""Step timing: the time points of each step, the sections VISSL's train step records into ``task.perf_stats``
(``read_sample``, ``forward``, ``loss_compute``, ``loss_all_reduce``, ``meters_update``, ``backward``,
``optimizer_step``, ``train_step_total``), the per-batch times VISSL's trainer keeps (``task.batch_time``), and the
step's result recorded into the task between those sections (:func:`record_step`). The loop
(:class:`~lightning_hooks.families.classy.loop.ClassyLoop`) takes each batch's time with :meth:`StepClock.end_batch`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import torch


class _Section:
    """One timed section in the form ``PerfStats.update_with_timer`` reads (VISSL's ``PerfTimer`` attributes)."""

    def __init__(self, name: str, start: tuple[float, Any], end: tuple[float, Any]) -> None:
        self.name = name
        self._last_interval = self.elapsed = end[0] - start[0]
        self._cuda_event_intervals = [(start[1], end[1])] if start[1] is not None and end[1] is not None else []


class StepClock:
    """Time points of the current step; each closed section goes into the perf stats ``stats()`` returns (VISSL's
    ``task.perf_stats``), as VISSL's train step records it. Nothing is recorded while ``stats()`` is None (VISSL's
    ``PerfTimer`` skips then too).

    A point is ``(perf_counter(), cuda event or None)``: CUDA events are recorded when the stats use them, so the
    report's CudaEvent column measures the device work as under VISSL. ``step_ended`` is when the last batch (or the
    phase start) ended, ``batch_clock`` when the last batch ended (or the run started): VISSL's batch time runs from
    one to the next.

    Example::

        clock = StepClock(lambda: task.perf_stats)
        clock.mark("backward"); ...; clock.section("backward", "backward")
    """

    def __init__(self, stats: Callable[[], Any]) -> None:
        self.stats = stats
        self.points: dict[str, tuple[float, Any]] = {}
        #: the perf stats of the open step, read at its start as VISSL's train step reads ``task.perf_stats`` (and at
        #: a phase start): None records nothing, so a run without them takes no time points but the batch times
        self.active: Any = None
        self.batch_clock = self.step_ended = time.perf_counter()

    def mark(self, point: str) -> None:
        stats = self.active
        if stats is None:
            return
        event = None
        if stats.use_cuda_events():
            event = torch.cuda.Event(enable_timing=True)
            event.record()
        self.points[point] = (time.perf_counter(), event)

    def section(self, name: str, start: str, end: str | None = None) -> None:
        """Record ``name`` from point ``start`` to point ``end`` (now, when None)."""
        stats = self.active
        if stats is None:
            return
        if end is None:
            self.mark(end := f"{name}.end")
        if start in self.points:
            stats.update_with_timer(_Section(name, self.points[start], self.points[end]))

    def start_run(self) -> None:
        """VISSL's ``task.start_time``, set before ``on_start``: the first batch's time runs from here."""
        self.batch_clock = time.perf_counter()

    def start_phase(self) -> float:
        """A phase starts (its hooks have run): the first sample fetch runs from now. Returns now."""
        self.step_ended = now = time.perf_counter()
        self.active = self.stats()
        if self.active is None:
            self.points.clear()  # no point of an earlier phase closes a section of this one
        self.mark("fetch")
        return now

    def start_step(self) -> float:
        """A step method starts: closes ``read_sample``; returns the seconds the sample took to fetch."""
        started = time.perf_counter()
        self.active = self.stats()
        if self.active is not None:  # no time points without perf stats (every step: no calls then)
            self.mark("step")
            self.section("read_sample", "fetch", "step")
        return started - self.step_ended

    def end_batch(self) -> float:
        """A batch is done: closes ``train_step_total``; returns the batch's seconds since the previous one ended."""
        if self.active is not None:
            self.section("train_step_total", "fetch")
        now = time.perf_counter()
        elapsed = now - self.batch_clock
        self.step_ended = self.batch_clock = now
        return elapsed


def record_step(task: Any, clock: StepClock, result: Any, owner: str) -> None:
    """Fill ``task.last_batch``, ``task.losses`` and the meters from a step's return value (the step convention: a
    loss tensor, or a dict with ``loss`` and optional ``output`` and ``target``; ``owner`` names the module)."""
    last = task.last_batch
    sample = last.sample
    if type(result) is dict or isinstance(result, Mapping):
        loss, output, target = result.get("loss"), result.get("output"), result.get("target")
    elif isinstance(result, torch.Tensor) or result is None:
        loss, output, target = result, None, None
    else:
        raise TypeError(
            f"ClassyAdapter: {owner}'s step returned {type(result).__name__}; Classy hooks need a loss tensor or a "
            "dict with 'loss' and optional 'output' and 'target'."
        )
    if target is None and isinstance(sample, Mapping):
        target = sample.get("target")
    last.output = output if output is not None else last.model_output
    last.target = target
    timed = clock.active is not None
    if loss is not None:
        task.record_loss(loss, target)
        if timed:
            clock.section("loss_all_reduce", "loss_compute.end")
    if last.output is not None and target is not None and task.meters and task.meters_on():
        task.update_meters(last.output, target)
        if timed:
            clock.section("meters_update", "loss_compute.end" if loss is None else "loss_all_reduce.end")
