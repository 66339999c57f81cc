"""Shared helpers for the callback benchmarks: a ResNet-50-sized model and round-robin timing."""

from __future__ import annotations

import collections
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import torch
from torch import nn


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out)).relu()
        out = self.bn3(self.conv3(out))
        return (out + (x if self.downsample is None else self.downsample(x))).relu()


def resnet50_like(num_classes: int = 1000) -> nn.Module:
    """torchvision's ResNet-50 layout from plain nn layers: 161 parameter tensors, 25,557,032 parameters."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def round_robin(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each round takes one sample of every variant (in rotating order); returns the samples per variant."""
    samples: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(variants[name]())
    return samples


def median(xs: list[float]) -> float:
    return statistics.median(xs)


# --------------------------------------------------------------------------- hook-cost benchmarks (host vs adapter)
#: the per-host names every hook-cost benchmark uses: the host with its hooks and without ("bare": only what training
#: needs), Lightning with the family's adapter holding the same hooks, the adapter mounted with no legacy hooks but
#: those the bare host keeps ("adapter, no hooks": the adapter's own per-step bookkeeping, which the host's bare run
#: does in its own loop), Lightning without the adapter, and a plain PyTorch loop
HOOK_COST_HOSTS = ("host", "bare host", "lightning", "adapter, no hooks", "bare lightning", "plain loop")


def cpu_clock() -> float:
    """Process CPU time: all the work runs in this thread, and other tenants of a shared machine do not inflate it."""
    return time.process_time()


def hook_cost_rounds(
    cases: list[str], hosts: dict[str, Callable[[str, str, bool], float]], repeats: int, tmp: str,
    timers: dict[str, PointTimer],
) -> tuple[dict[tuple[str, str], list[float]], Direct]:
    """Round-robin samples, in us per iteration, of ``hosts[name](case, work_dir, warm)`` for every case; one warm-up
    run each first; odd repeats run the hosts in reverse order, so no host always runs after the same one. The hosts
    named in ``timers`` run with their timer's points timed (:class:`PointTimer`): those samples come back as well,
    with the timer's floor measured at each repeat (:class:`Direct`)."""
    for case in cases:
        for name, run in hosts.items():
            run(case, f"{tmp}/warm-{name}-{case}", True)
    us: dict[tuple[str, str], list[float]] = {(c, h): [] for c in cases for h in hosts}
    direct = Direct()
    for i in range(repeats):
        order = list(hosts.items()) if i % 2 == 0 else list(hosts.items())[::-1]
        direct.floors.append(timer_floor_ns())
        for case in cases:
            for name, run in order:
                seconds, points = timed_run(timers.get(name), partial(run, case, f"{tmp}/{name}-{case}-{i}", False))
                us[case, name].append(1e6 * seconds)
                if points is not None:
                    direct.points.setdefault((case, name), []).append(points)
    return us, direct


def hook_cost_report(title: str, host: str, adapter: str, cases: list[str],
                     us: dict[tuple[str, str], list[float]], direct: Direct, iters: dict[str, int],
                     target: float = 1.05, bare_lightning: str = "Lightning") -> dict[str, tuple[float, float]]:
    """Print per case the headline, the hooks' cost timed where it is spent (:func:`direct_report`); then, by
    subtraction of whole runs: it/s of the host and of Lightning + adapter with the hooks, and the per-step breakdown
    (medians over repeats of each repeat's difference), with two ratios over the hooks' cost under the host: the
    hooks' cost under Lightning + adapter counted from bare Lightning (the adapter's own bookkeeping charged to the
    hooks), and counted from the adapter with no hooks (the hooks' own cost under the adapter). Returns case -> both
    subtraction ratios."""
    repeats = len(next(iter(us.values())))
    print(f"{title}; torch threads: 1; {repeats} round-robin repeats")
    direct_report(host, adapter, cases, iters, direct)
    print("by subtraction of whole runs (process CPU time, hooked run less bare run); medians over repeats of each "
          "repeat's own difference")
    rows: dict[str, list[str]] = {}
    ratios: dict[str, tuple[float, float]] = {}
    host_hooks, with_bookkeeping, hooks_alone = (f"hooks under the {host}", f"hooks under Lightning + {adapter}",
                                                 f"hooks under {adapter}, its bookkeeping apart")  # fmt: skip
    breakdown = (
        ("plain PyTorch loop (model, loss, backward, SGD)", "plain loop", None),
        (f"{host} loop cost over the plain loop", "bare host", "plain loop"),
        (f"{bare_lightning} loop cost over the plain loop", "bare lightning", "plain loop"),
        (f"{adapter}'s own bookkeeping (no hooks) over {bare_lightning}", "adapter, no hooks", "bare lightning"),
        (host_hooks, "host", "bare host"),
        (with_bookkeeping, "lightning", "bare lightning"),
        (hooks_alone, "lightning", "adapter, no hooks"),
    )
    for case in cases:
        t = {name: us[case, name] for name in HOOK_COST_HOSTS}
        print(f"[{case}] {host}: {1e6 / median(t['host']):.1f} it/s; Lightning + {adapter}: "
              f"{1e6 / median(t['lightning']):.1f} it/s")
        values = {}
        for label, name, minus in breakdown:
            values[label] = median([a - b for a, b in zip(t[name], t[minus] if minus else [0.0] * repeats)])
            rows.setdefault(label, []).append(f"{values[label]:.0f}")
        ratios[case] = (values[with_bookkeeping] / values[host_hooks], values[hooks_alone] / values[host_hooks])
        rows.setdefault(f"hooks + adapter's bookkeeping / {host}'s hooks", []).append(f"{ratios[case][0]:.2f}")
        rows.setdefault(f"hooks under the adapter / {host}'s hooks (target <= {target})", []).append(
            f"{ratios[case][1]:.2f}")
    print("per-step breakdown, us/it:" + " " * 50 + "".join(f"{c:>11s}" for c in cases))
    for label, values_ in rows.items():
        print(f"  {label:74s}" + "".join(f"{v:>11s}" for v in values_))
    return ratios


# --------------------------------------------------------------------------- the hooks' cost, timed where it is spent
T = TypeVar("T")
#: a point a :class:`PointTimer` times: (class, method name, whether a call counts: a bool or a test of the call's
#: positional arguments, ``self`` first); a call that does not count is still timed by no point it calls
Point = tuple[type, str, "bool | Callable[[tuple[Any, ...]], bool]"]
#: Lightning's callbacks that run inside a fit's train epochs: where the hooks' per-epoch and per-step work runs under
#: an adapter (the run-level ones, ``setup``, ``on_train_start``, ``on_train_end``, ..., fire the hosts' run-level
#: mount points, which no host's timer counts either)
LOOP_CALLBACKS = frozenset({"on_train_epoch_start", "on_train_batch_start", "on_before_backward", "on_after_backward",
                            "on_before_optimizer_step", "on_before_zero_grad", "on_train_batch_end",
                            "on_train_epoch_end"})  # fmt: skip


#: the hosts' mount points inside their train epochs (MMEngine's and mmcv's ``call_hook`` names, iMIX's engine methods)
TRAIN_STAGES = frozenset({"before_train_epoch", "after_train_epoch", "before_train_iter", "after_train_iter"})


def call_hook_points(runner: type) -> list[Point]:
    """A runner's hook-calling point, ``runner.call_hook(fn_name)``, counted for :data:`TRAIN_STAGES`."""
    return [(runner, "call_hook", lambda args: args[1] in TRAIN_STAGES)]


@dataclass
class PointTime:
    """What one run spent in a :class:`PointTimer`'s points: ``perf_counter_ns`` inside the counted calls (outermost
    only) and how many, and inside the excluded calls they made and how many."""

    ns: int = 0
    calls: int = 0
    excluded_ns: int = 0
    excluded_calls: int = 0

    def net_ns(self, floor_ns: float) -> float:
        """The time in the counted calls less the excluded calls in them and less the timer's floor for each timed
        call (:func:`timer_floor_ns`)."""
        return self.ns - self.excluded_ns - floor_ns * (self.calls + self.excluded_calls)


@dataclass
class _Depth:
    level: int = 0  # 1 inside a point
    counting: bool = False  # inside a counted point
    excluding: bool = False  # inside an excluded call of a counted point


class PointTimer:
    """Thread CPU time (``time.thread_time_ns``: all the work runs in this thread, and other tenants of a shared
    machine do not inflate it, as they inflate ``perf_counter``) of every outermost call of ``points`` while
    :meth:`measure` runs one host, less what ``excluded`` methods take inside them (the model's step, the step an
    optimizer hook does: the training's work, not the hooks'). A point that an excluded call calls counts again (the
    hooks a forward hook fires inside the model's step). The points are patched on their classes for that run only,
    so whatever is built inside it calls the timed methods."""

    def __init__(self, points: Sequence[Point], excluded: Sequence[tuple[type, str]] = ()) -> None:
        self.points, self.excluded = list(points), list(excluded)

    def measure(self, run: Callable[[], T]) -> tuple[T, PointTime]:
        """``run()``'s result and the time it spent in the points."""
        record, depth = PointTime(), _Depth()
        wrapped = [(cls, name, _timed_point(getattr(cls, name), counted, record, depth))
                   for cls, name, counted in self.points]  # fmt: skip
        wrapped += [(cls, name, _excluded(getattr(cls, name), record, depth)) for cls, name in self.excluded]
        with patched_methods(wrapped):
            return run(), record


_ABSENT = object()


@contextlib.contextmanager
def patched_methods(replacements: Sequence[tuple[type, str, Callable[..., Any]]]) -> Iterator[None]:
    """Set each ``(cls, name, fn)`` as ``cls.<name>`` for the block, then restore what each class held itself, in
    reverse order (a name it only inherited is removed again), so the timers' wrappers never outlive their run."""
    saved = [(cls, name, vars(cls).get(name, _ABSENT)) for cls, name, _ in replacements]
    try:
        for cls, name, fn in replacements:
            setattr(cls, name, fn)
        yield
    finally:
        for cls, name, fn in reversed(saved):
            if fn is _ABSENT:
                delattr(cls, name)
            else:
                setattr(cls, name, fn)
#: the points' clock (:func:`use_clock`)
CLOCKS = {"thread": time.thread_time_ns, "wall": time.perf_counter_ns}
_CLOCK = CLOCKS["thread"]


def use_clock(name: str) -> None:
    """Time the points with ``CLOCKS[name]``: ``thread`` (CPU time of this thread: other tenants' load does not enter
    it, but a read is a system call, ~0.6 us, up to ~10 us right after a model step has left its kernel path cold) or
    ``wall`` (``perf_counter_ns``, a vDSO read, ~0.06 us at any point, but a preemption inside an interval counts:
    for a quiet machine)."""
    global _CLOCK
    _CLOCK = CLOCKS[name]


def _timed_point(fn: Callable[..., Any], counted: bool | Callable[[tuple[Any, ...]], bool], record: PointTime,
                 depth: _Depth) -> Callable[..., Any]:  # fmt: skip
    """``fn`` timed into ``record`` when called outside any point (or inside an excluded call) and it counts; inside
    a point, untimed."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        if depth.level and not depth.excluding:
            return fn(*args, **kwargs)
        if counted is not True and (counted is False or not counted(args)):
            depth.level += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth.level -= 1
        saved = depth.level, depth.counting, depth.excluding
        depth.level, depth.counting, depth.excluding = depth.level + 1, True, False
        start = _CLOCK()
        try:
            return fn(*args, **kwargs)
        finally:
            record.ns += _CLOCK() - start
            record.calls += 1
            depth.level, depth.counting, depth.excluding = saved

    return timed


def _excluded(fn: Callable[..., Any], record: PointTime, depth: _Depth) -> Callable[..., Any]:
    """``fn`` timed into ``record``'s excluded time when a counted point calls it."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        if not depth.counting or depth.excluding:
            return fn(*args, **kwargs)
        depth.excluding = True
        start = _CLOCK()
        try:
            return fn(*args, **kwargs)
        finally:
            record.excluded_ns += _CLOCK() - start
            record.excluded_calls += 1
            depth.excluding = False

    return timed


def timed_run(timer: PointTimer | None, run: Callable[[], T]) -> tuple[T, PointTime | None]:
    """``run()``'s result and, with a timer, the time it spent in the timer's points."""
    return (run(), None) if timer is None else timer.measure(run)


class _Probe:
    def noop(self) -> None:
        """The timer's floor: a counted point that does nothing."""


def timer_floor_ns(calls: int = 2000, rounds: int = 5) -> float:
    """What a counted point reads around a call that does nothing (a clock read and the call), median ns per call
    over ``rounds`` of ``calls``: subtracted for every timed call (:meth:`PointTime.net_ns`)."""
    timer = PointTimer([(_Probe, "noop", True)])

    def run() -> None:
        probe = _Probe()
        for _ in range(calls):
            probe.noop()

    return median([timer.measure(run)[1].ns / calls for _ in range(rounds)])


def adapter_timer(adapter: type, module: type, excluded: Sequence[tuple[type, str]] = ()) -> PointTimer:
    """The timer of an adapter's points: every Lightning callback method it overrides, counted in
    :data:`LOOP_CALLBACKS` (the rest open no count, so what they fire is not counted either); its ``trigger``, which
    the run's patches call (``after_train_iter`` once the strategy returned, where a hook owns the step); its
    ``run_step``, which the wrapped step of ``module`` calls (``before_train_iter`` there), less the module's own
    ``training_step``; less ``excluded`` too (an optimizer hook's step)."""
    import lightning.pytorch as pl

    names = [name for name, fn in vars(pl.Callback).items()
             if callable(fn) and not name.startswith("_") and getattr(adapter, name) is not fn]  # fmt: skip
    points = [*((adapter, name, name in LOOP_CALLBACKS) for name in names), (adapter, "trigger", True),
              (adapter, "run_step", True)]  # fmt: skip
    return PointTimer(points, [(module, "training_step"), *excluded])


@dataclass
class Direct:
    """The timed points' samples of a round-robin run: per (case, host) one :class:`PointTime` per repeat, and the
    timer's floor (ns per timed call) measured at each repeat."""

    points: dict[tuple[str, str], list[PointTime]]
    floors: list[float]

    def __init__(self) -> None:
        self.points, self.floors = {}, []

    def cost(self, case: str, hooked: str, bare: str, iters: int) -> list[float]:
        """Per repeat, us per iteration the ``hooked`` host spent in its points over the ``bare`` one."""
        pairs = zip(self.points[case, hooked], self.points[case, bare], self.floors, strict=True)
        return [(a.net_ns(f) - b.net_ns(f)) / iters / 1e3 for a, b, f in pairs]

    def detail(self, case: str, name: str, iters: int) -> str:
        """``name``'s us per iteration in its points (medians over repeats) and its timed calls per iteration
        (excluded ones after a ``+``)."""
        samples = self.points[case, name]
        us = median([p.net_ns(f) / iters / 1e3 for p, f in zip(samples, self.floors, strict=True)])
        timed = median([p.calls / iters for p in samples])
        excluded = median([p.excluded_calls / iters for p in samples])
        return f"{name} {us:.1f} us/it in {timed:.2f}" + (f"+{excluded:.2f}" if excluded else "") + " calls"


def spread(values: list[float]) -> str:
    """``median (min-max, IQR q1-q3)`` of per-repeat values."""
    q1, _, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return f"{median(values):.3f} (min-max {min(values):.3f}-{max(values):.3f}, IQR {q1:.3f}-{q3:.3f})"


def direct_report(host: str, adapter: str, cases: list[str], iters: dict[str, int], direct: Direct,
                  names: tuple[str, str, str, str] = HOOK_COST_HOSTS[:4]) -> dict[str, float]:
    """Print the headline per case: the hooks' cost timed in the points (``names``: the host, the bare host,
    Lightning + adapter, the adapter with no hooks), on the host its points' time over the bare host's, under
    Lightning the adapter's over the adapter with no hooks, and their ratio, the median of per-repeat ratios with
    its spread, then the ratio of each side's minimum over repeats. Returns case -> that median.

    The headline's clock and figures. Each timed call reads the clock once inside its own interval: that floor (a
    timed no-op, measured at every repeat; ~0.6-0.7 us with thread time) is subtracted per timed call; it cancels in
    both differences anyway, which time the same number of calls. A thread-time read is a system call: right after a
    model step it costs up to ~10-18 us (its kernel path left cold; measured: 10.6 us median for the first read after
    a CNN step, 1.3 us for the next one), at the same places in a hooked run and its bare run, so it cancels in the
    differences but widens their spread where the points hold a step (mmcv's and iMIX's OptimizerHook, the module's
    step in an adapter's ``run_step``). ``--clock wall`` times with ``perf_counter_ns`` (a vDSO read, no such cost)
    for a quiet machine, where no preemption lands inside an interval. So the headline is the issue's "hooks' cost"
    (the hooks, their dispatch and the adapter's bookkeeping for them) from two differences of tens of microseconds
    timed in the same points, not two whole runs: the median over repeats of each repeat's ratio, with its min-max and
    interquartile range; the ratio of each side's least-disturbed repeat (its minimum over repeats: another tenant's
    load only adds CPU time, through the caches it takes; meaningless where a difference reads below 0); and each
    host's us/it and timed calls per iteration in its points (excluded ones after a ``+``).
    """
    hooked, bare, lit, no_hooks = names
    floors = direct.floors
    clock = next(name for name, read in CLOCKS.items() if read is _CLOCK)
    print(f"the hooks' cost timed where it is spent ({clock} clock; timer floor {median(floors):.0f} ns a call, "
          f"{min(floors):.0f}-{max(floors):.0f}, subtracted per timed call); per-repeat values, median (spread)")
    medians = {}
    for case in cases:
        on_host = direct.cost(case, hooked, bare, iters[case])
        on_lit = direct.cost(case, lit, no_hooks, iters[case])
        ratios = [a / b for a, b in zip(on_lit, on_host, strict=True)]
        medians[case] = median(ratios)
        print(f"[{case}] hooks under the {host}, us/it: {spread(on_host)}")
        print(f"[{case}] hooks under Lightning + {adapter}, us/it: {spread(on_lit)}")
        print(f"[{case}] in the points: " + "; ".join(direct.detail(case, name, iters[case]) for name in names))
        print(f"[{case}] HEADLINE hooks under Lightning + {adapter} / under the {host} (target <= 1.05): "
              f"{spread(ratios)}")
        print(f"[{case}] the same from each host's least-disturbed repeat (its minimum; load only adds): "
              f"{min(on_lit) / min(on_host):.3f}")
    return medians


# --------------------------------------------------------------------------- mount-point times (host vs adapter)
def _probe_python(n: int = 40) -> int:
    """The cold-cache probe's Python part: a little of what a hook does (attribute and dict reads, a loop)."""
    seen: dict[int, int] = {}
    for i in range(n):
        seen[i & 7] = seen.get(i & 7, 0) + i
    return len(seen)


class MountPointTimer:
    """Thread CPU time of every call of the mount points that ``classes`` define themselves (not those they inherit),
    patched on the classes while :meth:`run` runs one host, so both hosts run the same wrapped code; per host and
    (class, method): how many calls, and the nanoseconds of each. A function in ``noops`` is not wrapped (a wrapped
    no-op would count as a mount point the adapter calls).

    With ``probe``, each call first times a fixed probe twice (a small Python function and an in-place op on a small
    tensor, as a hook's own work): its first run finds the caches as the host left them between its hook calls, the
    second finds them warm; the hook's own time is not recorded then (the probe warmed its caches)."""

    PROBE = ("probe, first run (cold)", "probe, second run (warm)")

    def __init__(self, classes: list[type], names: tuple[str, ...], probe: bool = False,
                 noops: tuple[Callable[..., object], ...] = ()) -> None:  # fmt: skip
        # a no-op the class names (Classy's ``on_step = ClassyHook._noop``) stays: the adapter does not call it
        self.targets = [(cls, name) for cls in classes for name in names
                        if callable(vars(cls).get(name)) and vars(cls)[name] not in noops]  # fmt: skip
        self.probe = probe
        self.samples: dict[str, dict[str, list[int]]] = {}
        self._tensor = torch.zeros(64)

    def _wrap(self, key: str, fn: Callable[..., object], record: dict[str, list[int]]) -> Callable[..., object]:
        clock, tensor, probe = time.thread_time_ns, self._tensor, self.probe
        cold, warm = record.setdefault(self.PROBE[0], []), record.setdefault(self.PROBE[1], [])
        calls = record.setdefault(key, [])

        def timed_call(*args: object, **kwargs: object) -> object:
            if probe:
                for into in (cold, warm):
                    start = clock()
                    _probe_python()
                    tensor.add_(0.0)
                    into.append(clock() - start)
                return fn(*args, **kwargs)
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                calls.append(clock() - start)

        return timed_call

    def run(self, host: str, run: Callable[[], float]) -> dict[str, list[int]]:
        """Run ``run`` (one training under one host) with the mount points timed; returns its samples, by key."""
        record: dict[str, list[int]] = {}
        with patched_methods([(cls, name, self._wrap(f"{cls.__name__}.{name}", vars(cls)[name], record))
                              for cls, name in self.targets]):  # fmt: skip
            run()
        return {key: ns for key, ns in record.items() if ns}


def mount_point_report(title: str, hosts: dict[str, Callable[[], float]], iters: int, timer: MountPointTimer,
                       repeats: int) -> None:
    """Run ``hosts`` (two: the host, Lightning + adapter) round-robin ``repeats`` times with ``timer`` and print, per
    mount point, calls and us per iteration under each (medians over repeats) and their ratio."""
    names = list(hosts)
    per: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    counts: dict[str, dict[str, float]] = {name: {} for name in names}
    for i in range(repeats + 1):  # the first round warms up
        for name in names if i % 2 == 0 else names[::-1]:
            samples = timer.run(name, hosts[name])
            if i == 0:
                continue
            for key, ns in samples.items():
                probe = key in MountPointTimer.PROBE
                per[name].setdefault(key, []).append((median(ns) if probe else sum(ns) / iters) / 1e3)
                counts[name][key] = len(ns) / iters
    print(f"{title}; {repeats} round-robin repeats; thread CPU time, medians over repeats")
    unit = "us/call (median)" if timer.probe else "us/iteration"
    print(f"  {'mount point':58s}" + "".join(f"{n[:18]:>20s}" for n in names) + "   ratio   calls/it")
    keys = sorted({k for n in names for k in per[n]}, key=lambda k: (k in MountPointTimer.PROBE, k))
    totals = [0.0] * len(names)
    for key in keys:
        values = [median(per[n][key]) if key in per[n] else 0.0 for n in names]
        if key not in MountPointTimer.PROBE:
            totals = [t + v for t, v in zip(totals, values, strict=True)]
        calls = "/".join(f"{counts[n].get(key, 0):.2f}" for n in names)
        ratio = f"{values[1] / values[0]:.2f}" if values[0] else "-"
        print(f"  {key:58s}" + "".join(f"{v:20.2f}" for v in values) + f"{ratio:>8s}   {calls}")
    if not timer.probe:
        print(f"  {'all mount points, ' + unit:58s}" + "".join(f"{v:20.2f}" for v in totals)
              + f"{totals[1] / totals[0] if totals[0] else 0:8.2f}")


# --------------------------------------------------------------------------- Python calls per iteration (--calls)
Calls = collections.Counter[tuple[str, str]]


def python_calls(run: Callable[[int], object], epochs: int, batches: int) -> Calls:
    """Python calls per iteration of ``run(epochs)`` by (file, function), counted with ``sys.setprofile``: a run of
    ``epochs`` epochs less a run of one, over the iterations between (the fit's start and end cancel out). The counts
    do not move with the machine's load."""
    short, full = _calls_of(lambda: run(1)), _calls_of(lambda: run(epochs))
    iters = (epochs - 1) * batches
    return collections.Counter({k: n / iters for k, n in (full - short).items()})


def _calls_of(run: Callable[[], object]) -> Calls:
    """Python calls ``run()`` makes, by (file, function)."""
    calls: Calls = collections.Counter()

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls[frame.f_code.co_filename, frame.f_code.co_qualname] += 1

    sys.setprofile(count)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def call_report(title: str, per_host: dict[str, Calls], rows: tuple[tuple[str, str, str], ...],
                detail: tuple[str, ...]) -> None:
    """Print Python calls per iteration for each ``(label, host, host subtracted)`` row, all of them and those into
    ``lightning_hooks``, then which of lightning_hooks' functions run how often per iteration under the ``detail``
    hosts."""  # fmt: skip  # the signature on two lines
    ours = {host: collections.Counter({k: n for k, n in calls.items() if "lightning_hooks" in k[0]})
            for host, calls in per_host.items()}  # fmt: skip
    print(f"{title}: Python calls per iteration, all and those of lightning_hooks' own functions")
    for label, host, minus in rows:
        calls = [sum(counts[host].values()) - sum(counts[minus].values()) for counts in (per_host, ours)]
        print(f"  {label:60s}" + "".join(f"{n:8.1f}" for n in calls))
    for host in detail:
        print(f"  lightning_hooks' functions, {host}:")
        for (path, name), n in ours[host].most_common():
            if n >= 0.5:
                print(f"    {n:6.2f}  {path.rsplit('lightning_hooks/', 1)[1]} {name}")
