"""Shared helpers for the callback benchmarks: a ResNet-50-sized model and round-robin timing."""

from __future__ import annotations

import collections
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

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
    cases: list[str], hosts: dict[str, Callable[[str, str, bool], float]], repeats: int, tmp: str
) -> dict[tuple[str, str], list[float]]:
    """Round-robin samples, in us per iteration, of ``hosts[name](case, work_dir, warm)`` for every case; one warm-up
    run each first; odd repeats run the hosts in reverse order, so no host always runs after the same one."""
    for case in cases:
        for name, run in hosts.items():
            run(case, f"{tmp}/warm-{name}-{case}", True)
    us: dict[tuple[str, str], list[float]] = {(c, h): [] for c in cases for h in hosts}
    for i in range(repeats):
        order = list(hosts.items()) if i % 2 == 0 else list(hosts.items())[::-1]
        for case in cases:
            for name, run in order:
                us[case, name].append(1e6 * run(case, f"{tmp}/{name}-{case}-{i}", False))
    return us


def hook_cost_report(title: str, host: str, adapter: str, cases: list[str],
                     us: dict[tuple[str, str], list[float]], target: float = 1.05,
                     bare_lightning: str = "Lightning") -> dict[str, tuple[float, float]]:
    """Print per case: it/s of the host and of Lightning + adapter with the hooks, and the per-step breakdown (medians
    over repeats of each repeat's difference), with two ratios over the hooks' cost under the host: the hooks' cost
    under Lightning + adapter counted from bare Lightning (the adapter's own bookkeeping charged to the hooks), and
    counted from the adapter with no hooks (the hooks' own cost under the adapter). Returns case -> both ratios."""
    repeats = len(next(iter(us.values())))
    print(f"{title}; torch threads: 1; {repeats} round-robin repeats; medians over repeats of each repeat's "
          "own difference")
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
        saved = [(cls, name, vars(cls)[name]) for cls, name in self.targets]
        try:
            for cls, name, fn in saved:
                setattr(cls, name, self._wrap(f"{cls.__name__}.{name}", fn, record))
            run()
        finally:
            for cls, name, fn in saved:
                setattr(cls, name, fn)
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
