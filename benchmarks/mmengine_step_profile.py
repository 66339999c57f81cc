"""Where the per-step microseconds go: MMEngine's Runner vs Lightning + MMEngineAdapter on mmengine_vs_lightning.py's
cases (default ``tiny``), each piece timed in process CPU time by a wrapper around it::

    .venv/bin/python benchmarks/mmengine_step_profile.py [--case tiny] [--repeats 3]

Timed: every mount point the default hooks and EMAHook define (the hooks' own work, on both hosts), the adapter's
Lightning callback methods of a train step, its ``start_train_batch`` / ``end_train_batch`` and each ``fire`` by
trigger (which include the hooks they call), and, counted only, the facade's computed ``runner`` attributes (``_ReadOnly``:
iter, max_iters, train_dataloader, optim_wrapper, ...), which run inside the hooks. Each timed call adds the timer's
own cost to itself and to every timed call around it: on this VM two ``process_time_ns`` system calls, which the
never-overridden ``on_before_zero_grad`` (a no-op) reads as 2-9 us. Compare the two hosts' figures of a piece, and
read a wrapper's own work as its figure minus those it contains minus one no-op per timed call inside. A facade read
and the optimizer-step post-hook that ``schedulers.CountWrapperSteps`` installs are timed alone, without a timer
inside. Medians over ``--repeats`` runs per host, run alternately.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import logging
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
import mmengine_vs_lightning as bench  # noqa: E402
import mmengine.hooks as H  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402
from torch.optim.optimizer import register_optimizer_step_post_hook  # noqa: E402

from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks  # noqa: E402
from lightning_hooks.families.mmengine import runner as facade  # noqa: E402

clock = time.process_time_ns
TOTAL: collections.Counter[str] = collections.Counter()
READS: collections.Counter[str] = collections.Counter()
STEP_METHODS = ("on_train_batch_start", "on_train_batch_end", "on_before_backward", "on_after_backward",
                "on_before_optimizer_step", "on_before_zero_grad")  # fmt: skip
HOOK_CLASSES = (H.RuntimeInfoHook, H.IterTimerHook, H.LoggerHook, H.ParamSchedulerHook, H.CheckpointHook, H.EMAHook)


def timed(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            TOTAL[name] += clock() - start

    return wrapper


def instrument() -> None:
    for cls in HOOK_CLASSES:
        for mount in ("before_train_iter", "after_train_iter", "_before_iter", "_after_iter"):
            if mount in vars(cls):
                setattr(cls, mount, timed(f"hook {cls.__name__}.{mount}", vars(cls)[mount]))
    for name in STEP_METHODS:  # on_before_zero_grad: Callback's no-op (the adapter does not override it)
        setattr(MMEngineAdapter, name, timed(f"adapter.{name}", getattr(MMEngineAdapter, name)))
    for name in ("start_train_batch", "end_train_batch"):
        setattr(MMEngineAdapter, name, timed(f"adapter.{name}", getattr(MMEngineAdapter, name)))
    fire = MMEngineAdapter.fire

    def timed_fire(self: Any, trigger: Any, **context: Any) -> None:
        start = clock()
        try:
            fire(self, trigger, **context)
        finally:
            TOTAL[f"adapter.fire({trigger})"] += clock() - start

    MMEngineAdapter.fire = timed_fire

    def get(self: Any, runner: Any, owner: Any = None) -> Any:  # counted, not timed (inside the hooks' figures)
        if runner is None:
            return self
        READS[self.name] += 1
        return self.fget(runner)

    facade._ReadOnly.__get__ = get


def untimed_reads(n: int = 200_000) -> dict[str, float]:
    """ns per read of the facade's counters (an adapter outside a run) and per optimizer step of the post-hook."""
    def per_call(fn: Any, calls: int = n) -> float:
        start = clock()
        for _ in range(calls):
            fn()
        return (clock() - start) / calls

    with tempfile.TemporaryDirectory() as tmp:
        runner = MMEngineAdapter(build_hooks(default_hooks=bench.DEFAULT_HOOKS), work_dir=tmp, log_level="WARNING").runner
        empty = per_call(lambda: None)
        reads = {"runner.iter": per_call(lambda: runner.iter) - empty,
                 "runner.train_loop.per_epoch (cached value)": per_call(lambda: runner.train_loop.per_epoch("x", int)) - empty}  # fmt: skip
    model = bench.mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model(torch.randn(8, 32), None, mode="tensor").sum().backward()
    plain, hooked = [], []
    for _ in range(9):  # round-robin: the difference is well under 1 us
        plain.append(per_call(optimizer.step, 3000))
        handle = register_optimizer_step_post_hook(lambda *a: None)  # what CountWrapperSteps registers per fit
        hooked.append(per_call(optimizer.step, 3000))
        handle.remove()
    reads["optimizer step post-hook (CountWrapperSteps' kind)"] = statistics.median(
        h - p for h, p in zip(hooked, plain))
    return reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=list(bench.CASES), default="tiny")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-gc", action="store_true", help="gc.disable() for the timed runs (GC pauses land in "
                        "whatever code allocates when a generation fills, on either host)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    MMLogger.get_current_instance().setLevel(logging.WARNING)
    reads = untimed_reads()
    instrument()
    if args.no_gc:
        gc.disable()
    case = bench.CASES[args.case]
    per_step: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    reads_per_step: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        hosts = (("runner", bench.run_runner), ("lightning", bench.run_lightning))
        for host, run in hosts:
            run(case, f"{tmp}/warm-{host}", 1)
        for i in range(args.repeats):
            for host, run in hosts if i % 2 == 0 else hosts[::-1]:
                TOTAL.clear()
                READS.clear()
                run(case, f"{tmp}/{host}{i}", case.epochs)
                for name, ns in TOTAL.items():
                    per_step[host, name].append(ns / 1e3 / case.iters)
                if host == "lightning":
                    reads_per_step = {name: n / case.iters for name, n in READS.items()}
    names = sorted({n for _, n in per_step}, key=lambda n: -statistics.median(per_step.get(("lightning", n), [0.0])))
    print(f"[{case.name}] us per step, median of {args.repeats} runs, each timed call also carries the timer's own cost")
    print(f"  {'piece':62s}{'Runner':>9s}{'Lightning':>11s}")
    for name in names:
        cells = [per_step.get((host, name)) for host in ("runner", "lightning")]
        print(f"  {name:62s}" + "".join(f"{statistics.median(c):>{w}.1f}" if c else f"{'-':>{w}s}"
                                        for c, w in zip(cells, (9, 11))))  # fmt: skip
    print("facade reads per step (counted, untimed): " + ", ".join(f"runner.{k} {v:.2f}" for k, v in
                                                                     reads_per_step.items()))  # fmt: skip
    print("untimed, ns per call:")
    for name, ns in reads.items():
        print(f"  {name:62s}{ns:9.0f}")


if __name__ == "__main__":
    main()
