"""The step clock under ClassyAdapter: with perf stats (VISSL's ``LogPerfTimeMetricsHook`` sets ``task.perf_stats`` in
``on_start``) every train step records VISSL's sections in its train step's order; without them the clock takes no
time point (its calls are skipped, every step)."""

from __future__ import annotations

from typing import Any

from classy_testkit import Net, loader, make_trainer
from classy_vision.hooks import ClassyHook

from lightning_hooks import ClassyAdapter

#: VISSL's standard train step's sections, in the order they close (a step without meters)
SECTIONS = ["read_sample", "forward", "loss_compute", "loss_all_reduce", "backward", "optimizer_step", "train_step_total"]


class Stats:
    """The part of VISSL's ``PerfStats`` the clock uses: the closed sections' names, in order."""

    def __init__(self) -> None:
        self.sections: list[str] = []

    def use_cuda_events(self) -> bool:
        return False

    def update_with_timer(self, timer: Any) -> None:
        assert timer.elapsed >= 0, timer.name
        self.sections.append(timer.name)


class PerfStatsHook(ClassyHook):
    """Keeps perf stats as VISSL's LogPerfTimeMetricsHook does (a VISSL hook: the adapter hosts the run as VISSL's
    trainer); a fresh one per train phase, the previous phase's kept."""

    on_step = on_end = ClassyHook._noop

    def __init__(self) -> None:
        super().__init__()
        self.phases: list[list[str]] = []

    def on_start(self, task: Any) -> None:
        task.perf_stats = Stats()

    def on_phase_start(self, task: Any) -> None:
        if task.train:
            task.perf_stats = Stats()

    def on_phase_end(self, task: Any) -> None:
        if task.train:
            self.phases.append(task.perf_stats.sections)


PerfStatsHook.__module__ = "vissl.hooks.test"


class Steps(ClassyHook):
    """A plain Classy hook at every step, so the run has per-step work."""

    on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def on_step(self, task: Any) -> None:
        self.steps += 1


def test_perf_stats_get_vissls_sections_every_train_step(tmp_path):
    hook = PerfStatsHook()
    make_trainer(tmp_path, [ClassyAdapter([hook])]).fit(Net(), loader(n=12))
    assert hook.phases == [SECTIONS * 3, SECTIONS * 3]


def test_without_perf_stats_the_clock_takes_no_time_point(tmp_path):
    adapter = ClassyAdapter([Steps()])
    make_trainer(tmp_path, [adapter]).fit(Net(), loader(n=12))
    assert adapter.hooks[0].steps == 6
    assert adapter._clock.points == {} and adapter._clock.active is None
    assert len(adapter.task.batch_time) == 6  # VISSL's batch times are kept all the same
