"""Train speed of Classy Vision's ``ClassificationTask`` + ``LocalTrainer`` vs lightning.Trainer + ClassyAdapter on the
same models, data and hooks. ``classy_vision.tasks`` imports the real torchvision, which ``bash scripts/setup.sh
test`` installs off the venv's path; the README's environment line puts it on::

    PYTHONPATH=$PWD/scripts/vissl-site .venv/bin/python benchmarks/classy_vs_lightning.py [--repeats 9] [--mount-points]
    PYTHONPATH=$PWD/scripts/vissl-site .venv/bin/python benchmarks/classy_vs_lightning.py --calls [--cases tiny]
    PYTHONPATH=$PWD/scripts/vissl-site .venv/bin/python benchmarks/classy_vs_lightning.py --callbacks --cases tiny

``--calls`` counts the Python calls per step of each host (``_common.python_calls``: a run of the case's epochs less a
run of one, over the steps between), which the machine's load does not move, and which of lightning_hooks' functions
run how often per step. ``--callbacks`` times each of ClassyAdapter's per-step methods (median wall time per call,
the step wrapper's ``run_step`` less the module's ``training_step``) with the adapter holding no hook but the timer.

Cases, each under the hosts below, round-robin in one process with single-threaded torch (Classy is epoch-based
only: its phases are epochs):

* ``tiny``: an MLP 32-64-10, batch 8 (128 iterations per epoch, 3 epochs): a step takes well under 1 ms, so each
  loop's fixed per-step cost dominates.
* ``cnn``: a 3-layer CNN with BatchNorm on 3x32x32 images, 10 classes, batch 32 (60 iterations, 2 epochs).

Both train with cross-entropy and plain SGD (Classy's ``SGD``, constant LR; Lightning: ``torch.optim.SGD``). The
hooks are a Classy training's usual ones: ``LossLrMeterLoggingHook`` (every 50 steps), ``CheckpointHook`` (every
epoch) and ``ExponentialMovingAverageModelHook`` (decay 0.999); no meters, no test phase. "bare" runs hold only the
timer: the task with no other hook, Lightning without the adapter; "adapter, no hooks" is ClassyAdapter holding only
the timer (the adapter's own per-step bookkeeping, which the task's bare run does in its own loop). A timing hook (a
callback in bare Lightning) times ``on_start`` to ``on_end`` (``on_train_start`` to ``on_train_end``) in process CPU
time.

The report's headline is the hooks' cost timed where it is spent, in the same run (``_common.PointTimer``: thread CPU
time, ``time.thread_time_ns``, of every outermost call of a host's hook-calling points, so other tenants' load does
not enter an interval as it enters a whole run's difference):

* under the task: the time inside each hook's ``on_phase_start`` / ``on_step`` / ``on_phase_end`` as
  ``ClassificationTask`` calls them (its ``on_phase_*`` methods and ``step`` loop over ``task.hooks`` inline, around
  the task's own phase work and step, so the hooks' methods are the points; the loop itself, ~0.1 us a hook, is
  not timed); the bare task holds no such hook (its points read 0);
* under Lightning: the time inside ClassyAdapter's Lightning callbacks of the train epochs (``on_train_epoch_start``,
  ``on_train_batch_start``, ``on_before_backward``, ``on_after_backward``, ``on_before_optimizer_step``,
  ``on_train_batch_end``, ``on_train_epoch_end``), its ``trigger`` (the forward and optimizer-step patches' call-ins)
  and its ``run_step`` (``last_batch``, the loss, ``on_step``'s fire), less ``LitModel.training_step`` inside it (a
  trigger the model's forward hook fires inside the step counts again); less the same for the adapter holding no hook
  but the timer, whose callbacks do Classy's own per-step work (``last_batch``, the loss's ``item()``, the phase's
  counters and meters), which the task does outside the hooks;
* on neither side: ``on_start`` / ``on_end`` (the adapter's ``on_train_start`` / ``on_train_end``: not counted, nor
  anything they call), the model's step, Lightning's own call of its callbacks (bare Lightning pays it too).

The clock, its floor and the figures printed with the headline: benchmarks/_common.py's ``direct_report``. The figures
by subtraction of whole runs follow as the second part of the report: the hooks' cost under Lightning + adapter over
their cost under the task, counted from bare Lightning (the adapter's bookkeeping charged to the hooks) and from the
adapter with no hooks; see benchmarks/_common.py's ``hook_cost_report``.

Round 3 (9 repeats each, the 2-core VM under a load average of 10-18 from other test runs, so each ratio moves by
tens of percent between runs; the "hooks under the ClassificationTask" line read 89 then 141 us on ``tiny``):
before 3.56 tiny, 1.49 CNN; after cutting the adapter's per-step bookkeeping 2.24 tiny, 0.89 CNN (hooks under the
adapter 318 -> 316 us/step on ``tiny``). On the quiet VM, before and after run side by side, twice: tiny 3.84 / 2.36
before, 1.23 / 1.94 after (hooks under the adapter 246 / 140 us before, 145 / 152 after; under the task 64 / 59 and
117 / 78): the change is within this VM's noise, and CNN reads anything from -3 to 1.6. The deterministic measure is cProfile's call count per
train step over bare Lightning on ``tiny`` (Python calls the adapter and the hooks add): 195 before, 156 after, against
55 the same hooks add to the bare ClassificationTask. Of the 156: the hooks' own 67 (the task's 55 plus ~12 for the
facade's properties: ``task.train`` / ``use_gpu`` read through the loop and the Trainer), and ~90 of the adapter's
(both sides hold one Lightning callback, so Lightning's dispatch is the same): the bodies of its ~6 per-step Callback
methods, the ``training_step`` wrapper with ``LastBatch`` / ``record_step``, the model's forward pre/post hooks
(``last_batch.model_output``), the optimizer step post-hook, ``param_options`` (the options the step used), the
loop's ``end_iter`` (counters, ``StepClock.end_batch``) and the ``fire`` of ``on_step``. What went: the step clock's time points
without VISSL perf stats (read once per step, as VISSL's train step reads ``task.perf_stats``), ``fire`` of step
triggers no hook has a row at, ``trainer.sanity_checking`` per step, the loader's batch size and the device per step
(kept per phase), dataclass ``==`` on every trigger.

Profile, round 5 (cProfile with process time, ``run_lightning`` on ``tiny`` with the hooks, 384 iterations; the run
takes 1565 us/it unprofiled and 5.4x that profiled, so divide by ~5 for real microseconds): 2136 Python calls per
iteration in all, 65 of them into lightning_hooks, whose own time is 405 us/it as profiled (~75 real). Largest own
times, us/it as profiled (calls per iteration): ``classy/adapter.py`` ``run_step`` 68 (1: a ``LastBatch`` and its
``step_data`` dict per step, the try/finally around the step), ``trigger`` 32 (4: the model's forward pre- and post-hook
and the optimizer step fire every step, though no hook of this run has ``on_forward`` and no perf stats are kept),
``_fire_rows`` 18 + ``core/dispatch.py`` ``has_rows`` 20 (4 each: a lookup per trigger per step that the plan could
hold), ``dispatch.fire`` 20 (1, ``on_step``), ``classy/loop.py`` ``end_iter`` 13 + ``_count_batch`` 8,
``core/triggers.py`` ``after_step`` 12, ``core/state_keys.py`` ``state_key`` 11 (6 calls), ``on_after_backward`` 10,
``on_before_optimizer_step`` 9 + ``classy/optimizer.py`` ``param_options`` 9 (a dict of the options every step); the
facade's: ``record_step`` 14, ``record_loss`` 12 (its ``loss.item()`` is Classy's own), ``use_gpu`` 12 (the EMA
hook's read), ``start_step`` 11, the loop counters' descriptor 7 (2.3 calls). This round removed the step clock's
four calls per step without perf stats from the facade side (``timing.py``: ``start_step``, ``end_batch``,
``record_step``); the adapter still makes five (``run_step``'s and ``trigger``'s ``_clock.mark`` / ``section``), which
a ``clock.active`` check there would drop. The adapter-side rows above belong to the adapter and loop (T-translator's
restructuring, issue #31).

Round 6 (#35): the facade's ``param_options`` copies each param group without ``params`` (a dict copy, about a fifth
of the comprehension's time) and ``dispatch.fire`` calls a row without arguments (``on_step``) with the task alone;
profiled Python calls per iteration on ``tiny`` 2137.8 -> 2135.8, 74.8 -> 72.8 of them into lightning_hooks. Two runs
of 7 repeats: at a load average of 10-13 on the 2 cores 3.47 tiny, 1.86 CNN (hooks 402 vs 116 us on ``tiny``), in a
quieter one 2.20 tiny (121 vs 55 us): not met, and the remaining cost is the adapter's (see the
profile above: ``run_step``, ``trigger`` and ``_fire_rows``/``has_rows`` of the forward and optimizer triggers, the
forward pre/post hooks and the optimizer post-hook it installs every step, ``state_key``).

Round 7 (#35), profile as above (cProfile in process time, ``run_lightning`` on ``tiny``, 384 iterations): Python
calls per iteration 2140.6 -> 2088.1, 58.8 -> 32.1 of them into lightning_hooks. Cut: the step clock's
``mark``/``section`` calls unless the step has perf stats (-8; ``tests/families/classy/test_timing.py`` fails if they
are off with a perf-stats hook); ``state_key`` kept in the instance, a plain attribute read (-6: Lightning reads it at
each of the adapter's callback calls); the optimizer post-hook's ``any(generator)`` (-3); the model's forward hooks and
the optimizer post-hook only where a run needs them (-24: this run needs neither, its hooks are Classy's
``OUTPUT_BLIND`` ones, with no meters, no VISSL and no ``on_update``); ``trainer.sanity_checking`` asked only in eval
steps, ``on_step`` fired through the dispatch directly, the kept global batch size (-11). What is left over bare
Lightning is the adapter's bookkeeping, which ``ClassificationTask`` does in its bare run too: Lightning +
ClassyAdapter holding only the timer makes 1882 Python calls per step against 1842 for bare Lightning + the timer (the
step wrapper, ``LastBatch``, ``record_step``/``record_loss`` with ``loss.detach().item()``, ``param_options`` for
``options_view``, the loop's counters and batch time, the ``on_step`` fire), timed at 40-60 us/step (11 repeats, a
loaded host), about what the three hooks cost under the task (60-100 us): with that bookkeeping charged to the hooks,
1.05 is out of reach on ``tiny``. Runs of 7 repeats, before (4f978f6's lightning_hooks first on ``PYTHONPATH``) and
after in alternating processes at a load average of 5-8: before 2.92 and 3.14 tiny, 1.59 and 3.53 CNN; after 2.09
and 2.46 tiny, 0.95 and 1.22 CNN (hooks under the task 61-97 us on ``tiny``, under the adapter 191-232 us in both):
the CNN at the target in one run of two, ``tiny`` not met, and the absolute hook costs move more between runs than
the cut (a run before the cuts at a load of 2-4 read 0.80 tiny, 0.65 CNN: hooks 49 vs 62 us).

Round 8 (#35): the "adapter, no hooks" host (ClassyAdapter holding only the timer) separates the adapter's per-step
bookkeeping from the hooks' cost. Python calls per step on ``tiny`` (cProfile): the task's hooks add 54.5 (526.2 with
them, 471.7 bare); Lightning + ClassyAdapter 2086.4 with the hooks, 2021.3 with none, bare Lightning 1981.5: the
hooks add 65.1 under the adapter, its bookkeeping 39.8. That bookkeeping is what the task does in its own bare loop
(per step, calls into lightning_hooks: ``on_train_batch_start`` -> ``train_epoch_open``, ``start_train_batch`` ->
``ClassyLoop.start_iter``; the wrapped ``training_step`` -> ``run_step`` -> ``StepClock.start_step``, ``LastBatch``,
``record_step`` -> ``record_loss`` (``loss.detach().item()``), the step rows' ``fire``; ``on_before_backward`` /
``on_after_backward`` (its ``fire``); ``on_before_optimizer_step`` -> ``param_options`` (``options_view``);
``on_train_batch_end`` -> ``end_train_batch`` -> ``ClassyLoop.end_iter`` -> ``global_batchsize``, ``_count_batch``
-> ``StepClock.end_batch``, ``fire`` of ``on_step``). Cut: the loop fired through ``AdapterCaller`` and
``ClassyAdapter.trigger``, which pass its Lightning events on as they are (2088.4 -> 2086.4 with the hooks, 2023.3 ->
2021.3 without: it holds the dispatch now); the task's loop counters (``task.train``, read by the hooks every step)
went through a Python descriptor, now ``operator.attrgetter`` properties (2086.4 -> 2081.9 with the hooks: they add
60.7 calls under the adapter). ``--repeats 7`` before that last cut, at a load average of 14-15 (us/step, tiny, cnn): hooks
under the task 76, 361; under the adapter, its bookkeeping apart, 209, 192 (ratios 2.76, 0.53); with it 423, 572
(5.57, 1.58); the bookkeeping itself 117, -3. ``tiny`` is not met: the hooks' 6-10 more calls per step (the EMA hook's
``use_gpu`` / ``device`` reads, the ``on_step`` rows' walk) do not account for 130 us: the EMA hook's
``torch._foreach`` update runs the same code on both sides, and at this load a difference carries +-100 us of noise.

Round 9 (#35): where the hooks' extra time goes, per hook and mount point::

    PYTHONPATH=$PWD/scripts/vissl-site .venv/bin/python benchmarks/classy_vs_lightning.py --cases tiny --mount-points [--probe]

(``_common.MountPointTimer`` puts a thread-CPU-time wrapper on each mount point the hooks' classes define, so both
hosts run the same wrapped code, round-robin in one process; ``--probe`` times a fixed probe, a small Python loop and
an in-place add on a 64-float tensor, twice before each hook call: first as the host leaves the CPU caches, then warm.)
``tiny``, 5 repeats, load 11-13, us per iteration under the task / the adapter: all mount points 103 / 153 (1.48), of
which ``ExponentialMovingAverageModelHook.on_step`` 78.7 / 120.3 (1.53), ``LossLrMeterLoggingHook.on_step`` 5.6 / 9.0,
the per-phase calls alike; one call per step each on both sides. Taken apart inside the EMA hook's ``on_step`` (load
0.4-6): every piece is slower under Lightning, plain Python and kernels alike: ``get_torch_version()`` 4.4 / 6.0 us,
``torch.no_grad()`` enter and exit 5.7 / 7.2, the two ``_foreach`` ops 37.9 / 48.8, and the facade's reads ~1-3 us of
it (``task.train`` 1.95 / 2.46, ``task.use_gpu`` 0.8 / 4.1; ``use_gpu`` now reads the kept device directly). The same
call made again at once runs at the host's speed: ``get_torch_version`` 7.8 / 13.9 us the first time in a step, 2.4 /
2.7 the second; the ``_foreach`` update 48 / 77, then 18 / 24; the probe 9.2 / 11.5 us cold, 7.6 / 8.0 warm (load 11).
Between two ``on_step`` calls Lightning's loop runs ~2000 Python calls against the task's ~500 (round 8's counts), so
the hooks find their code and data evicted from the caches; grad and inference mode, anomaly detection, autocast, the
dispatch TLS, torch function and dispatch modes, threads, ``gc`` thresholds and trace/profile functions are the same at
the EMA hook's ``on_step`` under both hosts. That is the larger part of the gap, and it is not work the adapter does;
the rest of "hooks under the adapter" (~20 us) is the ``on_step`` fire over two hooks, where the task's ``run_hooks``
calls three (no-ops included). ``--repeats 7 --cases tiny`` at load 4: hooks 59 us under the task, 108 under the
adapter with its bookkeeping apart (1.81), 129 with it (2.18); the adapter's bookkeeping 22 us over bare Lightning.
Not met, and not reachable by cutting the adapter: the 1.05 target asks the hooks to run as fast inside Lightning's
step as inside the task's, which the cache effect above rules out for sub-millisecond steps.

Round 13 (#35): on a quiet machine (load ~1, ``--cases tiny --repeats 7``) the hooks take 71 us/step under the adapter
with its bookkeeping apart against 55 under the task (1.28), 112 with it (2.03): the bookkeeping is 36 us over bare
Lightning. In calls (``--calls --cases tiny``): the hooks 29.8 a step under the adapter against 30.2 under the task;
the adapter's bookkeeping 18.6 calls over bare Lightning (26.4 into lightning_hooks, bare Lightning's ``state_key``
calls the adapter's cached key saves apart). Per step: ``train_epoch_open`` 2 (``on_train_batch_start``'s check and
``ClassyAdapter.on_train_batch_end``'s resumed-phase check, which also calls ``LegacyStart.ends_resumed_phase``),
``HookDispatch.fire`` 3 (the step's ``on_loss_and_meter`` row, ``on_after_backward``, ``on_step``; none with a row
here), ``_DeferredFetcher.__next__`` 1, ``ClassyLoop.start_iter`` 1 (a no-op), the step clock 3 (``start_step``,
``record_step``, ``end_batch``), the task's records 3 (``record_loss``, ``global_batchsize``, ``_count_batch``),
``param_options`` 1, and the Lightning callbacks and the step patch themselves. Each is Classy's own per-step work
(the task's bare run does it in its loop) except the two resumed-phase checks, the no-op ``start_iter`` and the fetcher's
``__next__`` (4 calls): those lie in ``core/adapter.py``, ``core/lightning_api.py`` and ``families/classy/`` (the
changes are in #35's round-13 note).

Round 14 (#35): where the bookkeeping's microseconds go, method by method (``--callbacks --cases tiny --repeats 5``,
median us per call, load 10-12, so the absolute figures run high): ``on_train_batch_start`` 2.1, the step wrapper
``run_step`` 31.1 (less the module's step), ``on_before_backward`` 1.6, ``on_after_backward`` 3.0,
``on_before_optimizer_step`` 3.3, ``on_train_batch_end`` 8.7; 49.8 in all. ``run_step``'s lines timed apart (a
scratch copy, load ~6, where ``run_step`` read ~22): dropping the previous step's ``last_batch`` 5.6 (its output's
autograd graph is freed there: Classy's ``train_step`` frees it at the same point, ``self.last_batch = None``, and
bare Lightning frees the same graph after ``on_train_batch_end``), the new ``LastBatch`` 2.6, the step clock's
``start_step`` 1.7 (Classy's fetch ``Timer``), ``record_step`` 10.2 (of which ``loss.detach()`` 2.0 and ``.item()``
2.1: Classy's ``losses.append(loss.data.cpu().item())``), the ``on_loss_and_meter`` fire 1.5. Calls unchanged from round
13 (``--calls --cases tiny``: 18.6 over bare Lightning, 26.4 into lightning_hooks; the hooks 29.8 vs 30.2). What is not
Classy's own work: the two resumed-phase checks (``LegacyHookAdapter.on_train_batch_start``'s ``train_epoch_open``,
for Lightning 2.6's resumed epoch, and ``ClassyAdapter.on_train_batch_end``'s VISSL mid-phase check, which runs at
every step though only the phase a VISSL mid-phase checkpoint resumed can end there), the no-op ``start_iter`` (1 call
each, ~0.5-1 us) and ``_DeferredFetcher.__next__`` (its ``pending`` test at every batch after the epoch's iterator is
made). They lie in ``core/adapter.py`` and ``core/lightning_api.py`` (T-resume's this round) and in
``families/classy/adapter.py`` (which T-resume was changing at the time): not cut this round, and a few us of the
~36; the rest is the task's own per-step work, done in Lightning's cache-cold step (round 9).

Round 17 (#35), the hooks' cost timed where it is spent (the headline above). Default runs (``--repeats 9``) one
after the other under the shared machine's load, median ratio (IQR) / ratio of each side's least-disturbed repeat,
tiny, cnn:

    run 1 (load 8-8, 252 s): 1.23 (0.98-1.70) / 0.97; 1.04 (0.97-1.11) / 1.01
    run 2 (load 3-4, 204 s): 1.47 (0.99-1.81) / 1.60; 1.05 (0.86-1.16) / 0.64
    run 3 (load 3-3, 140 s): 1.33 (0.97-1.48) / 1.08; 1.20 (0.98-1.29) / 1.09

Taken apart on ``tiny`` (scratch runs at load ~3-5): per mount point in thread time (``--mount-points``, 3 repeats)
the hooks' own calls read 68.7 us/it under the task against 150.3 under the adapter,
``ExponentialMovingAverageModelHook. on_step`` 47.8 / 117.2; but in wall time, the median of each call (which a
preemption does not move), two runs of 4 repeats read ``on_step`` 41.9 / 39.7 us, then 53.6 / 66.0: the thread clock's
read after a step (above) inflates a mount point timed alone. In that second run, per call medians (us): the task's
hooks 56.7 a step (EMA 53.6, ``LossLrMeterLoggingHook`` 2.3, ``CheckpointHook`` 0.9); the adapter's step callbacks
101.2 with the hooks and 26.9 holding none (``on_train_batch_end`` 88.9 / 13.2, of which the hooks' own ``on_step``
72.3: EMA 66.0, 4.6, 1.7), so 74.3 for the hooks: their own calls 15.6 slower than under the task, the dispatch of
three hooks ~3.4 (a cProfile of ``on_train_batch_end`` finds nothing else: EMA's ``on_step`` and its two
``torch._foreach_*`` calls, the loop's counters). The adapter's part for the hooks is a few microseconds; the hooks'
own calls run slower inside Lightning's step, the same calls on the same tensors (the CPU caches that step leaves
cold: mmengine_vs_lightning.py's docstring shows the same under MMEngine's Runner once its step sweeps ~2 MB of
memory). Nothing in the adapter's step path was left to cut for it.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    CLOCKS,
    MountPointTimer,
    PointTimer,
    adapter_timer,
    call_report,
    cpu_clock,
    hook_cost_report,
    hook_cost_rounds,
    mount_point_report,
    python_calls,
    use_clock,
)
from classy_vision.dataset import ClassyDataset  # noqa: E402
from classy_vision.hooks import (  # noqa: E402
    CheckpointHook,
    ClassyHook,
    ExponentialMovingAverageModelHook,
    LossLrMeterLoggingHook,
)
from classy_vision.models import ClassyModel  # noqa: E402
from classy_vision.optim import SGD  # noqa: E402
from classy_vision.optim.param_scheduler import ConstantParamScheduler  # noqa: E402
from classy_vision.tasks import ClassificationTask  # noqa: E402
from classy_vision.trainer import LocalTrainer  # noqa: E402

from lightning_hooks import ClassyAdapter  # noqa: E402

LR = 0.01
LIGHTNING_SETTINGS = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                          enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu")  # fmt: skip


class Net(ClassyModel):
    def __init__(self, net: nn.Module, inputs: tuple[int, ...]) -> None:
        super().__init__()
        self.net, self._inputs = net, inputs

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self._inputs

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def mlp() -> Net:
    return Net(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)), (32,))


def cnn() -> Net:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    net = nn.Sequential(*block(3, 8), nn.MaxPool2d(2), *block(8, 16), nn.MaxPool2d(2), *block(16, 32),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))  # fmt: skip
    return Net(net, (3, 32, 32))


class Samples(Dataset):
    """Classy-style samples ``{"input", "target"}``, seeded."""

    def __init__(self, n: int, inputs: tuple[int, ...]) -> None:
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, *inputs, generator=g), torch.randint(0, 10, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input": self.x[i], "target": self.y[i]}


@dataclass(frozen=True)
class Case:
    model: Any
    inputs: tuple[int, ...]
    batch_size: int
    batches: int
    epochs: int

    @property
    def iters(self) -> int:
        return self.batches * self.epochs

    def data(self) -> Samples:
        return Samples(self.batches * self.batch_size, self.inputs)


CASES = {"tiny": Case(mlp, (32,), 8, 128, 3), "cnn": Case(cnn, (3, 32, 32), 32, 60, 2)}


def hooks(work_dir: str) -> list[Any]:
    Path(work_dir, "checkpoints").mkdir(parents=True, exist_ok=True)  # Classy's CheckpointHook wants it to exist
    return [LossLrMeterLoggingHook(log_freq=50), CheckpointHook(f"{work_dir}/checkpoints", {}),
            ExponentialMovingAverageModelHook(decay=0.999, device="cpu")]  # fmt: skip


class Clock(ClassyHook):
    on_phase_start = on_phase_end = on_step = ClassyHook._noop

    def on_start(self, task: Any) -> None:
        self.start = cpu_clock()

    def on_end(self, task: Any) -> None:
        self.seconds = cpu_clock() - self.start


class LightningClock(pl.Callback):
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.start = cpu_clock()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.seconds = cpu_clock() - self.start


class LitModel(pl.LightningModule):
    def __init__(self, model: Net) -> None:
        super().__init__()
        self.model = model

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, torch.Tensor]:
        out = self.model(batch["input"])
        return {"loss": nn.functional.cross_entropy(out, batch["target"]), "output": out}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.model.parameters(), lr=LR)


def run_task(case: Case, work_dir: str, with_hooks: bool = True) -> float:
    """Seconds per iteration under Classy's ``ClassificationTask`` trained by ``LocalTrainer``."""
    torch.manual_seed(0)
    clock = Clock()
    data = ClassyDataset(case.data(), case.batch_size, False, None, None)
    data.set_num_workers(0)  # load in the process, as the Lightning side does
    task = (
        ClassificationTask()
        .set_model(case.model())
        .set_loss(nn.CrossEntropyLoss())
        .set_optimizer(SGD())
        .set_optimizer_schedulers({"lr": ConstantParamScheduler(LR)})
        .set_num_epochs(case.epochs)
        .set_hooks([clock, *(hooks(work_dir) if with_hooks else [])])
        .set_dataset(data, "train")
    )
    LocalTrainer().train(task)
    return clock.seconds / case.iters


def run_lightning(case: Case, work_dir: str, with_hooks: bool = True, adapter: bool = True) -> float:
    """Seconds per iteration under lightning.Trainer: ClassyAdapter holding the hooks, ClassyAdapter holding no hook
    but the timer (``with_hooks=False``), or without the adapter (``adapter=False``: a Lightning callback times)."""
    torch.manual_seed(0)
    clock: Any = Clock() if adapter else LightningClock()
    callbacks = [ClassyAdapter([clock, *(hooks(work_dir) if with_hooks else [])])] if adapter else [clock]
    trainer = pl.Trainer(callbacks=callbacks, default_root_dir=work_dir, max_epochs=case.epochs, **LIGHTNING_SETTINGS)
    trainer.fit(LitModel(case.model()), DataLoader(case.data(), batch_size=case.batch_size))
    return clock.seconds / case.iters


def run_plain(case: Case, work_dir: str) -> float:
    """Seconds per iteration of a plain PyTorch loop: the same model, loss, data and SGD step, nothing else."""
    torch.manual_seed(0)
    model, loader = case.model(), DataLoader(case.data(), batch_size=case.batch_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model.train()
    start = cpu_clock()
    for _ in range(case.epochs):
        for batch in loader:
            nn.functional.cross_entropy(model(batch["input"]), batch["target"]).backward()
            optimizer.step()
            optimizer.zero_grad()
    return (cpu_clock() - start) / case.iters


#: each host's run of a case in a work dir
RUNS: dict[str, Callable[[Case, str], float]] = {
    "host": run_task,
    "bare host": lambda c, d: run_task(c, d, with_hooks=False),
    "lightning": run_lightning,
    "adapter, no hooks": lambda c, d: run_lightning(c, d, with_hooks=False),
    "bare lightning": lambda c, d: run_lightning(c, d, with_hooks=False, adapter=False),
    "plain loop": run_plain,
}
HOSTS = {name: lambda c, d, warm, run=run: run(CASES[c], d) for name, run in RUNS.items()}

#: the hooks' classes (``on_start`` / ``on_end`` are run-level: not counted, as the adapter's ``on_train_start`` /
#: ``on_train_end`` are not)
HOOK_CLASSES = (LossLrMeterLoggingHook, CheckpointHook, ExponentialMovingAverageModelHook)
#: the points each host's hooks' cost is timed in (the module's docstring): the task's calls of its hooks, the
#: adapter's Lightning callbacks, ``trigger`` and ``run_step`` (less the module's step)
TIMERS = {name: PointTimer([(cls, point, point not in ("on_start", "on_end")) for cls in HOOK_CLASSES
                            for point in ("on_start", "on_phase_start", "on_step", "on_phase_end", "on_end")])
          for name in ("host", "bare host")} | {
    name: adapter_timer(ClassyAdapter, LitModel) for name in ("lightning", "adapter, no hooks")}  # fmt: skip


def call_counts(case: str, tmp: str) -> None:
    """Print Python calls per step under each host, ``lightning_hooks``' own apart: the adapter's bookkeeping (the
    adapter holding no hook but the timer over bare Lightning) and the hooks' calls on each host."""
    runs = {host: RUNS[host] for host in ("host", "bare host", "lightning", "adapter, no hooks", "bare lightning")}
    per_host = {host: python_calls(lambda e, run=run, host=host: run(replace(CASES[case], epochs=e),
                                                                   f"{tmp}/calls-{host}-{case}-{e}"),
                                   CASES[case].epochs, CASES[case].batches) for host, run in runs.items()}  # fmt: skip
    rows = (("ClassyAdapter's own bookkeeping (no hooks) over Lightning", "adapter, no hooks", "bare lightning"),
            ("hooks under the ClassificationTask", "host", "bare host"),
            ("hooks under ClassyAdapter, its bookkeeping apart", "lightning", "adapter, no hooks"))  # fmt: skip
    call_report(f"[{case}]", per_host, rows, ("adapter, no hooks", "lightning"))


#: ClassyAdapter's methods that run at every train step (the step wrapper's ``run_step`` less the module's step)
STEP_METHODS = ("on_train_batch_start", "run_step", "on_before_backward", "on_after_backward",
                "on_before_optimizer_step", "on_train_batch_end")  # fmt: skip


def callback_times(case: str, tmp: str, repeats: int) -> None:
    """Print the median wall time per call of each of ClassyAdapter's per-step methods (:data:`STEP_METHODS`) in
    ``repeats`` runs of the adapter holding no hook but the timer: where its bookkeeping over bare Lightning goes."""
    samples: dict[str, list[int]] = {name: [] for name in (*STEP_METHODS, "training_step")}
    saved = {name: getattr(ClassyAdapter, name) for name in STEP_METHODS}
    saved_step = LitModel.training_step

    def timing(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            result = method(*args, **kwargs)
            samples[name].append(time.perf_counter_ns() - start)
            return result

        return timed

    for name, method in saved.items():
        setattr(ClassyAdapter, name, timing(name, method))
    LitModel.training_step = timing("training_step", saved_step)  # type: ignore[method-assign]  # timed for the run
    try:
        for r in range(repeats):
            RUNS["adapter, no hooks"](CASES[case], f"{tmp}/callbacks-{case}-{r}")
    finally:
        for name, method in saved.items():
            setattr(ClassyAdapter, name, method)
        LitModel.training_step = saved_step  # type: ignore[method-assign]  # put back
    us = {name: statistics.median(values) / 1e3 for name, values in samples.items()}
    us["run_step"] -= us.pop("training_step")
    print(f"[{case}] ClassyAdapter's per-step methods, holding no hook but the timer: median us per call")
    for name in STEP_METHODS:
        print(f"  {name:<28} {us[name]:7.2f}")
    print(f"  {'all':<28} {sum(us.values()):7.2f}")


def mount_points(case: str, tmp: str, repeats: int, probe: bool) -> None:
    """Print the thread time of each hook's mount points under the task and under Lightning + ClassyAdapter."""
    timer = MountPointTimer([CheckpointHook, ExponentialMovingAverageModelHook, LossLrMeterLoggingHook],
                            ("on_start", "on_phase_start", "on_step", "on_phase_end", "on_end"), probe,
                            noops=(ClassyHook._noop,))  # fmt: skip
    runs = iter(range(10**6))
    hosts = {"ClassificationTask": lambda: run_task(CASES[case], f"{tmp}/task-{case}-{next(runs)}"),
             "Lightning + ClassyAdapter": lambda: run_lightning(CASES[case], f"{tmp}/lit-{case}-{next(runs)}")}  # fmt: skip
    mount_point_report(f"[{case}] hooks' mount points", hosts, CASES[case].iters, timer, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread",
                        help="the headline's clock: thread CPU time (default) or wall time, for a quiet machine")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--mount-points", action="store_true", help="time each hook's mount points under both hosts")
    parser.add_argument("--probe", action="store_true", help="with --mount-points: time a fixed probe at each call")
    parser.add_argument("--calls", action="store_true", help="count Python calls per step instead of timing")
    parser.add_argument("--callbacks", action="store_true",
                        help="time each of ClassyAdapter's per-step methods (the adapter holding no hook but the timer)")
    args = parser.parse_args()
    use_clock(args.clock)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    for name in ("lightning.pytorch", "lightning.pytorch.utilities.rank_zero"):
        logging.getLogger(name).setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.WARNING)  # Classy logs through the root logger
    if args.calls:
        with tempfile.TemporaryDirectory() as tmp:
            for case in args.cases:
                call_counts(case, tmp)
        return
    if args.callbacks:
        with tempfile.TemporaryDirectory() as tmp:
            for case in args.cases:
                callback_times(case, tmp, args.repeats)
        return
    if args.mount_points:
        with tempfile.TemporaryDirectory() as tmp:
            for case in args.cases:
                mount_points(case, tmp, args.repeats, args.probe)
        return
    with tempfile.TemporaryDirectory() as tmp:
        us, direct = hook_cost_rounds(args.cases, HOSTS, args.repeats, tmp, TIMERS)
    hook_cost_report("hooks: LossLrMeterLogging/50, Checkpoint, EMA(0.999)", "ClassificationTask", "ClassyAdapter",
                     args.cases, us, direct, {c: CASES[c].iters for c in args.cases})


if __name__ == "__main__":
    main()
