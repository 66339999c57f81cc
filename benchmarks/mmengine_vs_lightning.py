"""Train speed of MMEngine's Runner vs lightning.Trainer + MMEngineAdapter on the same models, data and hooks.

Three cases, each under four hosts plus a plain PyTorch loop, run round-robin in one process with single-threaded torch
(``torch.set_num_threads(1)``):

* ``tiny``: an MLP on 32 features, batch 8. A step takes well under 1 ms, so each loop's fixed per-step cost dominates.
* ``cnn``: a 3-layer CNN with BatchNorm on 3x32x32 images, 10 classes, batch 32. A step takes about 7 ms.
* ``tiny-iter``: the tiny MLP trained iteration-based, as OpenMMLab's iteration-based configs do:
  ``train_cfg=dict(type="IterBasedTrainLoop", max_iters=...)`` over an ``InfiniteSampler`` loader, with
  ``CheckpointHook(by_epoch=False)`` (a checkpoint every 128 iterations) and ``log_processor=dict(by_epoch=False)``.
  Lightning + adapter runs it with ``MMEngineAdapter(train_cfg=...)`` and ``Trainer(**adapter.trainer_kwargs())``;
  bare Lightning iterates the same endless view of the loader for ``max_steps``.

The hosts are the Runner and Lightning + adapter with the same hooks, both again without hooks ("bare": Lightning
without the adapter), and the adapter holding no hook but the timer ("adapter, no hooks"). The hooks
are MMEngine's default hooks (RuntimeInfo, IterTimer, DistSamplerSeed, Logger every 50 iterations, ParamScheduler,
Checkpoint every epoch) plus EMAHook. Both sides do the same work:

* no validation (there is no val loader);
* MMEngine-style checkpoints, written only by CheckpointHook;
* logs written only by LoggerHook, with MMLogger at WARNING on both;
* no progress bar.

A timing hook with the highest priority measures ``before_train`` to ``after_train``. Bare Lightning uses a callback
that times ``on_train_start`` to ``on_train_end``. Both time process CPU time (``time.process_time``), because
all the work runs in this one thread (single-threaded torch, no loader workers), and CPU time is not inflated by
other processes that share the machine. Wall time on a shared 2-core machine varied by up to 2x between repeats.

Lightning settings: this is what a user migrating from MMEngine runs, and none of it drops anything the Runner does
here::

    Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            num_sanity_val_steps=0)

LoggerHook and CheckpointHook do the logging and checkpointing. MMEngine has no progress bar, no model summary and no
sanity check. ``Trainer(barebones=True)`` applies these settings plus ``log_every_n_steps=0``, and it forbids
``LightningModule.log``, so ``after_val_epoch`` would receive no metrics. The adapter and its hooks work under
``barebones=True``, but it measured no faster than the settings above.

The report's headline, per model, is the hooks' cost timed where it is spent, in the same run as the rest
(``_common.PointTimer``: thread CPU time, ``time.thread_time_ns``, of every outermost call of a host's hook-calling
points, so other tenants' load does not enter an interval as it enters a whole run's difference):

* under the Runner: the time inside ``Runner.call_hook`` for the train epochs' stages (``before_train_epoch``,
  ``before_train_iter``, ``after_train_iter``, ``after_train_epoch``; CheckpointHook's nested
  ``before_save_checkpoint`` is inside its call), that is the Runner's walk of its hook list, each hook's mount point
  (overridden or not) and the hooks' work; less the same in the bare Runner's run (the walk over the timing hook);
* under Lightning: the time inside MMEngineAdapter's Lightning callbacks of the train epochs (``on_train_epoch_start``,
  ``on_train_batch_start``, ``on_train_batch_end``, ``on_train_epoch_end``; and ``trigger`` where a patch calls it):
  the hooks, the dispatch's walk of its table, the facade's updates and the loop's counters; less the same for the
  adapter holding no hook but the timer, whose callbacks do the bookkeeping the Runner's loop does outside
  ``call_hook`` (the counters, the epoch-end check);
* on neither side: the run-level mount points (``before_run``, ``before_train``, ``after_train``, ``after_run``,
  which the adapter fires from ``setup`` / ``on_train_start`` / ``on_train_end``: not counted, nor anything they call),
  the model's step, Lightning's own call of its callbacks (bare Lightning pays it too), and the adapter's few
  per-step calls outside its callbacks (``CountWrapperSteps``' optimizer post-hook, the deferred fetcher: under 1 us
  an iteration; ``--calls`` counts them);
* the clock, its floor (subtracted per timed call) and the figures printed with the headline: benchmarks/_common.py's
  ``direct_report``.

So the headline is the issue's "hooks' cost" (the hooks, their dispatch and the adapter's bookkeeping for them) from
two differences of tens of microseconds timed in the same points, not two whole ~1 s runs: the median over repeats
of each repeat's ratio, with its min-max and interquartile range; and the ratio of each side's least-disturbed repeat
(its minimum over repeats: another tenant's load only adds CPU time, through the caches it takes). The figures by
subtraction of whole runs follow as the second part of the report:

* it/s of the Runner and of Lightning + adapter (medians over repeats);
* the lightning/runner ratio: the median, over repeats, of that repeat's ratio (the runs of a repeat sit close in
  time, so load from other processes affects them alike);
* a per-step breakdown, each line again the median of per-repeat values:
  * the plain loop (model, loss, backward, SGD step);
  * each host's own loop cost over the plain loop (bare host minus plain loop);
  * the hooks' cost on each host (hooked minus bare, run one after the other). Under Lightning this includes the
    adapter and Lightning's dispatch of it;
  * the ratio of those two medians, the hooks' cost under Lightning + adapter over their cost under the Runner
    (target: at most 1.05). The cnn step varies by about 5% (~500 us) between runs, as much as the hooks cost,
    so the default is 15 repeats (about 3 minutes); when another tenant loads the machine, single repeats of cnn
    swing by a millisecond and its ratio by more than 0.1 even then: repeat the run.

    python benchmarks/mmengine_vs_lightning.py [--repeats 15] [--models tiny cnn tiny-iter] [--mount-points [--probe]]
    python benchmarks/mmengine_vs_lightning.py --calls [--models ...]   # Python calls per iteration, not timed

The per-iteration figures inside each host's points (us/it and timed calls, excluded ones after a ``+``) are printed
with the headline.

``--calls`` counts, with ``sys.setprofile``, the Python function calls of each host per iteration (a run of the case's
epochs less a run of one epoch, over the iterations between): the same breakdown as the timing, in calls, which load
on the machine does not move; and, per host, which of lightning_hooks' own functions run how often per iteration.

Where the adapter's per-step microseconds go (``tiny``; ``benchmarks/mmengine_step_profile.py --repeats 5``, which
wraps each piece in a process-CPU-time timer; us per step, medians of 5 runs per host on the shared 2-core VM under
load ~5-10; every timed call also carries the timer's two system calls, so nested figures overstate by a few us each):

    piece                                                                  Runner  Lightning
    EMAHook.after_train_iter                                                158.2      163.5
    RuntimeInfoHook.after_train_iter / before_train_iter                   72.1/35.1  62.9/46.2
    LoggerHook.after_train_iter                                              30.6       33.8
    IterTimerHook._after_iter / _before_iter                               29.5/10.5  32.9/12.2
    ParamSchedulerHook / CheckpointHook after_train_iter                   2.2/1.8    2.7/2.2
    all the hooks' own mount points                                         340.0      356.4
    ``fire(on_train_batch_end)`` minus the hooks it runs (6 timed calls)        -       33
    ``fire(on_train_batch_start)`` minus its hooks (2 timed calls)              -       15
    ``end_train_batch`` / ``start_train_batch`` outside ``fire``                -     9.3/6.9
    ``on_train_batch_end`` / ``_start`` outside those (epoch-end check)         -     ~8/8.4
    on_before_backward, on_after_backward, on_before_optimizer_step             -    2.8/5.9/1.8
    Callback's no-op on_before_zero_grad (the timer's own floor)                -       9.3

Timed alone, without a timer inside: a facade read (``runner.iter``) 175 ns, 9.1 reads per step (iter 5.05,
train_dataloader 2.01, max_iters 1.01, optim_wrapper 1.00) = ~1.6 us; the optimizer-step post-hook that
``schedulers.CountWrapperSteps`` registers 0.3-0.5 us (459 ns in that run). So of the ~70 us: the hooks' own code
runs ~16 us slower inside Lightning's loop than inside the Runner's (of which ~1.6 us the facade reads; the rest
moved by 5-20 us between runs, in either direction per hook: cache and GC effects of Lightning's larger per-step
work, the same code running); the adapter's own bookkeeping is the rest: the table walk of two ``fire``s (~10-25
us with the timers' share removed), the batch start/end counters (``batch_idx``, ``step_done``, ``advance``,
``is_last_batch``: ~10-15 us) and the three overridden step callbacks (~3-8 us), plus Lightning's dispatch of one
callback (~12 us, performance-anchors section 5), which the bare-Lightning baseline does not pay. The patches and the
step-count wrapper are under 1 us. No piece outside ``core/dispatch.py`` / ``core/adapter.py`` (T-dispatch's this
round) was large enough to remove for a figure this benchmark can resolve.

Round 8 (#35): a fourth Lightning host, "adapter, no hooks" (MMEngineAdapter holding only the timing hook, with the
case's ``train_cfg`` and ``log_processor``), separates the adapter's own per-step bookkeeping (the batch counters, the
two ``fire``s' walk, the step callbacks: what the Runner's bare loop does in its own loop) from the hooks' cost, which
the report now gives both ways: counted from bare Lightning (as before) and from the adapter with no hooks. One run
of ``--repeats 7`` at a load average of 14-15 on the 2 cores (us/it, tiny, cnn, tiny-iter): hooks under the Runner
429, 1265, 450; under the adapter, its bookkeeping apart, 501, 677, 579 (1.17, 0.54, 1.29); with it 782, 501, 535
(1.82, 0.40, 1.19); the bookkeeping itself 316, -343, 5: at this load the tiny cases' differences move by
100-300 us between runs, so this run does not say whether 1.1 is met.

Round 12 (#35), the per-step path in calls (``--calls``; load-independent, the same on every run; load was 15-20 on
the 2 cores, so no timing of this round is given). Python calls per iteration, tiny / cnn / tiny-iter:

    adapter's own bookkeeping (no hooks) over bare Lightning, before  14.3 / 14.5 / 20.0
    the same after this round's cuts                                  14.3 / 14.5 / 19.0
    hooks under the Runner (MMEngine's own code included)            289.5 / 672.0 / 310.7-313.9
    hooks under the adapter, bookkeeping apart, before this round    271.4 / 664.0 / 282.7 (ours: 32 / 38 / 42)
    the same after the runner's computed reads became properties     254.2 / 646.6 / 258.2 (ours: 15 / 20 / 19)

So the hooks run fewer Python calls under the adapter than under the Runner (the Runner's ``call_hook`` calls every
hook's mount point, overridden or not, and its ``runner.iter`` goes through ``Runner.train_loop``, a property);
the facade's reads (``runner.iter`` 5-7 a step, ``train_dataloader`` 2, ``max_iters`` 1-2, ``optim_wrapper`` 1) were
the adapter's part of them: ``families/mmengine/runner.py``'s ``_ReadOnly`` is now a ``property`` over an
``operator.attrgetter``, so a read runs only the train loop's own property (``runner.iter``: 390 -> 240 ns, min of 7
``timeit`` repeats at load 15; three Python frames -> one). The adapter's bookkeeping per iteration (``tiny``; the
bare Lightning run pays 6 calls of ``Callback.state_key`` the adapter's cached key saves, hence 14.3 net):

    on_train_batch_start -> train_epoch_open, start_train_batch -> MMEngineLoop.start_iter
        -> AdapterCaller.fire -> MMEngineAdapter.trigger (+2 dataclass __eq__: ``trigger != LOAD_CHECKPOINT``)
        -> LegacyHookAdapter.fire -> HookDispatch.fire                                   10 calls (7 to reach fire)
    on_train_batch_end -> end_train_batch -> MMEngineLoop.end_iter -> (the same 6 to HookDispatch.fire),
        Trainer.is_last_batch                                                             10 calls
    the optimizer-step post-hook of ``schedulers.CountWrapperSteps``; ``_DeferredFetcher.__next__``  2 calls
    tiny-iter also: ``iter_based.plan_iteration`` (validates_at, end, end_if_done, validate_after; ``interval_at``
        no longer for a fixed interval) and ``MMEngineLoop.attached``, the endless loader's generator (its check
        for a hook's iterator is now an attribute read: one call less in bare Lightning's run too)        +7 calls

Each hop re-packs the keyword context (``**context``) into a new dict. Measured outside Lightning (the adapter's two
batch callbacks on a stand-in trainer, ``timeit`` min of 7, load 15-20): 6.2 us an iteration; with the trigger compared
by identity and ``HookDispatch.fire`` called from it, and the loop's caller handed ``adapter.trigger`` itself
(``AdapterCaller``: files of other owners this round), 4.7-5.5 us, and the bookkeeping 14.3 -> 6.2 calls (tiny),
20.0 -> 12.0 (tiny-iter, before the iter_based cut). The hooks' own call count is at or under the Runner's in all
three cases; what remains of the time gap is outside the adapter's Python (round 9, below).

Round 9 (#35), per hook and mount point (``--models tiny-iter --mount-points [--probe]``: benchmarks/_common.py's
``MountPointTimer`` wraps each mount point the hooks' classes define in a thread-CPU-time timer, the same wrapped code
under both hosts, round-robin in one process). ``tiny-iter``, 5 repeats, load ~15-20, us per iteration under the
Runner / the adapter: all mount points 574 / 734 (1.28); ``RuntimeInfoHook.before_train_iter`` 52 / 106 (2.03, the
first hook of each step), ``EMAHook.after_train_iter`` 247 / 295, ``RuntimeInfoHook.after_train_iter`` 137 / 161,
``LoggerHook.after_train_iter`` 32 / 47, ``IterTimerHook._after_iter`` 47 / 52, ``CheckpointHook.after_train_iter`` 35 /
44; one call per iteration each on both sides. Taken apart inside ``RuntimeInfoHook.before_train_iter`` (each piece
timed twice in a row): the first ``runner.message_hub`` read 4.1 / 11.8 us, ``message_hub.update_scalar`` 20.8 / 43.2,
``optim_wrapper.get_lr()`` 3.6 / 5.8; the second time 1.07 / 1.19, 6.4 / 7.0, 1.5 / 1.7: the same code at the same speed
once warm. The one facade cost left warm is ``runner.optim_wrapper`` (0.94 / 1.63 us: the train loop's
``per_epoch`` lookup, ``families/mmengine/runner.py``). So the hooks' extra time inside Lightning's step is the CPU
caches its larger per-step work leaves cold (classy_vs_lightning.py's docstring has the probe and the settings ruled
out), not work the adapter adds.

Round 13 (#35), the CNN case. On a quiet machine (load ~1, ``--repeats 9``) the hooks cost 734 us/it under the adapter,
its bookkeeping apart, against 561 under the Runner (1.31; tiny 1.09, tiny-iter 1.06). Taken apart (load 3-6, so the
figures compare hosts run side by side, not with the quiet run):

* per mount point (``--models cnn --mount-points --repeats 3``) the hooks' own calls take 553.1 us/it under the
  adapter against 561.2 under the Runner (0.99): ``EMAHook.after_train_iter`` 282.9 / 301.5,
  ``RuntimeInfoHook.after_train_iter`` 63.1 / 63.3, ``LoggerHook.after_train_iter`` 36.4 / 34.7;
* EMAHook gets the same model on both hosts: ``runner.model`` is the bare ``BaseModel`` (no wrapper), the same 11
  parameters in the same ``named_parameters`` order, 9 buffers, contiguous, grad mode on, ``update_buffers`` off.
  One difference, which the update does not read: under Lightning the parameters' ``.grad`` are still allocated when
  the hooks run (Lightning zeroes them in the next step's closure; ``OptimWrapper.update_params`` before
  ``after_train_iter``);
* the adapter's Lightning callbacks outside the hooks' mount points take the same with the hooks as without them
  (thread time, 3 runs: 36 vs 33 us/it); the collector runs 1-35 us/it on every host alike;
* the model's own forward and backward (thread time, 4 repeats) are not slower with the hooks under Lightning
  (4952 / 2881 us/it, against 5020 / 3021 without) than under the Runner (4948 / 2917, against 4883 / 2919).

So the 170 us are not the hooks' work done differently nor work the adapter adds: they are the spread of a difference
of two 7.5 ms steps (120 iterations, ~1 s a run); round 11's quiet run read 568 vs 545 (1.04) on the same code, and
the 4-repeat run above (its timers on) 335 vs 655 (0.51). No change.

Round 17 (#35), the hooks' cost timed where it is spent (the headline above). Three default runs
(``--repeats 15``) one after the other under the shared machine's load (3-10 on the 2 cores: other sessions' tests),
median ratio (IQR) / ratio of each side's least-disturbed repeat, tiny, cnn, tiny-iter:

    run 1 (load 7-7, 454 s): 1.21 (1.15-1.41) / 1.02; 1.02 (0.97-1.14) / 1.04; 1.14 (1.01-1.29) / 1.02
    run 2 (load 10-4, 492 s): 1.17 (1.05-1.36) / 1.06; 1.04 (0.94-1.15) / 0.97; 1.15 (0.99-1.25) / 0.96
    run 3 (load 4-3, 250 s): 1.06 (0.96-1.24) / 1.09; 1.02 (0.96-1.11) / 0.99; 1.12 (0.90-1.29) / 0.99

Where the microseconds of the headline go, taken apart in one run (``tiny``, 3 repeats, load ~7; the hooks' own
mount points timed inside the points with ``_common.MountPointTimer``), us/it: the Runner's ``call_hook`` 453.1, of
which the hooks' own mount points 393.5 and the walk 59.6 (the bare Runner's walk 15.6); the adapter's callbacks 504.5,
of which the hooks' own mount points 426.3 and the rest (the dispatch's walk, the facade's and the loop's updates)
78.2 (the adapter holding no hook 41.9). So the hooks' cost is 437.5 under the Runner against 462.6 under the adapter
(1.06): the adapter's dispatch of these hooks takes 36 us an iteration against the Runner's 44 (it calls only the
mount points a hook overrides), and the rest of the gap is the hooks' own code, 8 % slower inside Lightning's step.

That slowdown is the CPU caches, not work: with ~2 MB of Python objects visited at each of the Runner's model steps
(outside the points, as Lightning's larger step touches more between the hooks' calls; a scratch run whose forward
first reads 8,388 small dicts in a shuffled order, the headline's timers, 3 repeats, load ~8) the same hooks under the
Runner cost 530 us/it against 418 without (1.29), more than under the adapter in the same run (397). In wall time, the
median of each call (which a preemption does not move; 4 repeats, load ~3), the hooks' own mount points take 226.2
us/it under the adapter against 171.1 under the Runner (``EMAHook.after_train_iter`` 121.7 / 91.6, ``RuntimeInfoHook``
37.0 / 28.4 and 25.7 / 18.5, ``IterTimerHook`` 18.9 / 15.8 and 9.5 / 6.6, ``LoggerHook`` 11.8 / 9.3), the points 262.3
(``on_train_batch_end`` 216.1, ``_start`` 46.2) against 197.9 (``call_hook`` 164.6 + 33.4): the same 1.3x in the
hooks' own code, with no thread clock in it. Nothing in the adapter's per-step path is left to cut for it: its own
part is under the Runner's, and the calls per iteration are those round 16 counted (``--calls``). """

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
from functools import partial
from pathlib import Path

import lightning.pytorch as pl
import torch
from mmengine import hooks as mmengine_hooks
from mmengine.dataset import InfiniteSampler
from mmengine.hooks import Hook
from mmengine.logging import MMLogger
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks
from lightning_hooks.families.mmengine.iter_based import Endless

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    CLOCKS,
    Direct,
    MountPointTimer,
    PointTimer,
    adapter_timer,
    call_hook_points,
    call_report,
    direct_report,
    mount_point_report,
    python_calls,
    timed_run,
    timer_floor_ns,
    use_clock,
)

DEFAULT_HOOKS = dict(logger=dict(type="LoggerHook", interval=50))
CUSTOM_HOOKS = [dict(type="EMAHook")]
NO_HOOKS = dict.fromkeys(("runtime_info", "timer", "sampler_seed", "logger", "param_scheduler", "checkpoint"))
LIGHTNING_SETTINGS = dict(
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    num_sanity_val_steps=0,
)


class Model(BaseModel):
    """An MMEngine model: ``forward(inputs, labels, mode="loss")`` returns the loss dict."""

    def __init__(self, net: nn.Module, loss: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.net, self.loss = net, loss

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor, mode: str = "tensor"):
        pred = self.net(inputs)
        return {"loss_main": self.loss(pred, labels)} if mode == "loss" else pred


def mlp() -> Model:
    return Model(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)), nn.functional.mse_loss)


def cnn() -> Model:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    net = nn.Sequential(
        *block(3, 8), nn.MaxPool2d(2), *block(8, 16), nn.MaxPool2d(2), *block(16, 32),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    )  # fmt: skip
    return Model(net, nn.functional.cross_entropy)


@dataclass(frozen=True)
class Case:
    name: str
    model: Callable[[], Model]
    inputs: tuple[int, ...]
    batch_size: int
    batches: int  # per epoch (iteration-based: per pass over the data, and between checkpoints)
    epochs: int  # iteration-based: max_iters = epochs * batches
    iter_based: bool = False

    @property
    def iters(self) -> int:
        return self.epochs * self.batches

    def train_cfg(self) -> dict:
        if self.iter_based:
            return dict(type="IterBasedTrainLoop", max_iters=self.iters)
        return dict(type="EpochBasedTrainLoop", max_epochs=self.epochs)

    def default_hooks(self) -> dict:
        if self.iter_based:
            checkpoint = dict(type="CheckpointHook", by_epoch=False, interval=self.batches)
            return dict(DEFAULT_HOOKS, checkpoint=checkpoint)
        return DEFAULT_HOOKS

    def log_processor(self) -> dict:
        return dict(by_epoch=not self.iter_based)

    def data(self, batches: int | None = None) -> TensorDataset:
        g = torch.Generator().manual_seed(0)
        x = torch.randn((batches or self.batches) * self.batch_size, *self.inputs, generator=g)
        y = x.sum(1, keepdim=True) if len(self.inputs) == 1 else torch.randint(0, 10, (len(x),), generator=g)
        return TensorDataset(x, y)

    def loader(self, batches: int | None = None, loader: type[DataLoader] = DataLoader) -> DataLoader:
        data = self.data(batches)
        if self.iter_based:
            return loader(data, batch_size=self.batch_size, sampler=InfiniteSampler(data, shuffle=False, seed=0))
        return loader(data, batch_size=self.batch_size)


CASES = {
    "tiny": Case("tiny MLP 32-64-1, batch 8", mlp, (32,), 8, 128, 3),
    "cnn": Case("CNN 3x(conv-BN-ReLU) on 3x32x32, batch 32", cnn, (3, 32, 32), 32, 60, 2),
    "tiny-iter": Case("tiny MLP, IterBasedTrainLoop over an InfiniteSampler", mlp, (32,), 8, 128, 3, iter_based=True),
}


class LitModel(pl.LightningModule):
    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model

    def training_step(self, batch, batch_idx):
        inputs, labels = batch
        _, log_vars = self.model.parse_losses(self.model(inputs, labels, mode="loss"))
        return log_vars  # the loss dict: after_train_iter's ``outputs``, as under the Runner

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class MMLoader(DataLoader):
    """Batches as keyword dicts for ``BaseModel.train_step`` (the Runner side)."""

    def __iter__(self):
        for inputs, labels in super().__iter__():
            yield {"inputs": inputs, "labels": labels}


class Clock(Hook):
    priority = "HIGHEST"

    def before_train(self, runner) -> None:
        self.start = time.process_time()

    def after_train(self, runner) -> None:
        self.seconds = time.process_time() - self.start


class LightningClock(pl.Callback):
    def on_train_start(self, trainer, pl_module) -> None:
        self.start = time.process_time()

    def on_train_end(self, trainer, pl_module) -> None:
        self.seconds = time.process_time() - self.start


def run_runner(case: Case, work_dir: str, epochs: int, hooks: bool = True) -> float:
    """Seconds per iteration under MMEngine's Runner."""
    torch.manual_seed(0)
    clock = Clock()
    case = replace(case, epochs=epochs)
    runner = Runner(
        model=case.model(), work_dir=work_dir, train_dataloader=case.loader(loader=MMLoader),
        train_cfg=case.train_cfg(), optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.01)),
        default_hooks=case.default_hooks() if hooks else NO_HOOKS, log_processor=case.log_processor(),
        custom_hooks=[*CUSTOM_HOOKS, clock] if hooks else [clock],
        log_level="WARNING", experiment_name=f"bench-runner-{time.monotonic_ns()}",
    )  # fmt: skip
    runner.train()
    return clock.seconds / case.iters


def run_lightning(case: Case, work_dir: str, epochs: int, hooks: bool = True, adapter: bool = True) -> float:
    """Seconds per iteration under lightning.Trainer: the adapter driving the hooks, the adapter holding no hook but
    the timer (``hooks=False``), or without the adapter (``adapter=False``: a Lightning callback times)."""
    torch.manual_seed(0)
    case = replace(case, epochs=epochs)
    loader = case.loader()
    if adapter:
        clock = Clock()
        hook_list = build_hooks(default_hooks=case.default_hooks() if hooks else NO_HOOKS,
                                custom_hooks=[*CUSTOM_HOOKS, clock] if hooks else [clock])  # fmt: skip
        adapter = MMEngineAdapter(hook_list, work_dir=work_dir, log_level="WARNING", train_cfg=case.train_cfg(),
                                  log_processor=case.log_processor())  # fmt: skip
        callbacks, limits = [adapter], adapter.trainer_kwargs()
    else:
        clock = LightningClock()
        callbacks, limits = [clock], dict(max_epochs=epochs)
        if case.iter_based:  # what the adapter hands Lightning in an iteration-based run
            loader, limits = Endless(loader, lambda: 0), dict(max_steps=case.iters, max_epochs=1)
    trainer = pl.Trainer(callbacks=callbacks, default_root_dir=work_dir, **limits, **LIGHTNING_SETTINGS)
    trainer.fit(LitModel(case.model()), loader)
    return clock.seconds / case.iters


def run_plain(case: Case, work_dir: str, epochs: int) -> float:
    """Seconds per iteration of a plain PyTorch loop: the same model, loss, data and SGD step, nothing else."""
    torch.manual_seed(0)
    model, loader = case.model(), DataLoader(case.data(), batch_size=case.batch_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    start = time.process_time()
    for _ in range(epochs):
        for inputs, labels in loader:
            loss, _ = model.parse_losses(model(inputs, labels, mode="loss"))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    return (time.process_time() - start) / (epochs * case.batches)


#: in the order of a repeat: each host with hooks next to itself without them, so their difference (the hooks' cost)
#: compares two runs close in time; odd repeats run the order backwards, so no host always runs after the same one
HOSTS = {
    "runner": run_runner,
    "bare runner": lambda *a: run_runner(*a, hooks=False),
    "lightning": run_lightning,
    "adapter, no hooks": lambda *a: run_lightning(*a, hooks=False),
    "bare lightning": lambda *a: run_lightning(*a, hooks=False, adapter=False),
    "plain loop": run_plain,
}
#: the points each host's hooks' cost is timed in (the module's docstring): the Runner's ``call_hook``, the adapter's
#: Lightning callbacks and ``trigger``
TIMERS = {name: PointTimer(call_hook_points(Runner)) for name in ("runner", "bare runner")} | {
    name: adapter_timer(MMEngineAdapter, LitModel) for name in ("lightning", "adapter, no hooks")}
#: per-step breakdown rows: (label, host, host subtracted from it)
BREAKDOWN = (
    ("plain PyTorch loop (model, loss, backward, SGD)", "plain loop", None),
    ("Runner loop cost over the plain loop", "bare runner", "plain loop"),
    ("Lightning loop cost over the plain loop", "bare lightning", "plain loop"),
    ("adapter's own bookkeeping (no hooks) over Lightning", "adapter, no hooks", "bare lightning"),
    ("hooks under the Runner", "runner", "bare runner"),
    ("hooks under Lightning + adapter", "lightning", "bare lightning"),
    ("hooks under the adapter, its bookkeeping apart", "lightning", "adapter, no hooks"),
)


#: the hooks' classes and the mount points they define themselves (``--mount-points``)
HOOK_CLASSES = [mmengine_hooks.RuntimeInfoHook, mmengine_hooks.IterTimerHook, mmengine_hooks.DistSamplerSeedHook,
                mmengine_hooks.LoggerHook, mmengine_hooks.ParamSchedulerHook, mmengine_hooks.CheckpointHook,
                mmengine_hooks.EMAHook]  # fmt: skip
MOUNT_POINTS = ("before_run", "after_run", "before_train", "after_train", "before_train_epoch", "after_train_epoch",
                "before_train_iter", "after_train_iter", "_before_epoch", "_after_epoch", "_before_iter",
                "_after_iter", "before_save_checkpoint", "after_load_checkpoint")  # fmt: skip


def mount_points(case: Case, tmp: str, repeats: int, probe: bool) -> None:
    """Print the thread time of each hook's mount points under the Runner and under Lightning + MMEngineAdapter."""
    timer = MountPointTimer(HOOK_CLASSES, MOUNT_POINTS, probe)
    runs = iter(range(10**6))
    hosts = {"Runner": lambda: run_runner(case, f"{tmp}/runner{next(runs)}", case.epochs),
             "Lightning + MMEngineAdapter": lambda: run_lightning(case, f"{tmp}/lit{next(runs)}", case.epochs)}  # fmt: skip
    mount_point_report(f"[{case.name}] hooks' mount points", hosts, case.iters, timer, repeats)


def call_counts(case: Case, tmp: str) -> None:
    """Print Python calls per iteration under each host, ``lightning_hooks``' own apart: the adapter's bookkeeping
    (the adapter holding no hook over bare Lightning) and the hooks' calls on each host, by the package's function."""
    hosts = ("runner", "bare runner", "lightning", "adapter, no hooks", "bare lightning")
    per_host = {host: python_calls(lambda e, host=host: HOSTS[host](case, f"{tmp}/calls-{host}-{e}", e), case.epochs,
                                   case.batches) for host in hosts}  # fmt: skip
    call_report(f"[{case.name}]", per_host, BREAKDOWN[3:], ("adapter, no hooks", "lightning"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread",
                        help="the headline's clock: thread CPU time (default) or wall time, for a quiet machine")
    parser.add_argument("--models", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--mount-points", action="store_true", help="time each hook's mount points under both hosts")
    parser.add_argument("--probe", action="store_true", help="with --mount-points: time a fixed probe at each call")
    parser.add_argument("--calls", action="store_true", help="count Python calls per iteration instead of timing")
    args = parser.parse_args()
    use_clock(args.clock)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)  # both hosts run the same kernels; intra-op threads would only add noise
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    MMLogger.get_current_instance().setLevel(logging.WARNING)
    if args.calls:
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.models:
                call_counts(CASES[name], tmp)
        return
    if args.mount_points:
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.models:
                mount_points(CASES[name], tmp, args.repeats, args.probe)
        return

    cases = [CASES[name] for name in args.models]
    us: dict[tuple[str, str], list[float]] = {(c.name, h): [] for c in cases for h in HOSTS}
    direct = Direct()
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            for host, run in HOSTS.items():
                run(case, f"{tmp}/warm-{host}", 1)
        for i in range(args.repeats):
            order = list(HOSTS.items()) if i % 2 == 0 else list(HOSTS.items())[::-1]
            direct.floors.append(timer_floor_ns())
            for case in cases:
                for host, run in order:
                    seconds, points = timed_run(TIMERS.get(host), partial(run, case, f"{tmp}/{host}{i}", case.epochs))
                    us[case.name, host].append(1e6 * seconds)
                    if points is not None:
                        direct.points.setdefault((case.name, host), []).append(points)

    print(f"hooks: MMEngine default hooks + EMAHook; torch threads: 1; {args.repeats} round-robin repeats")
    direct_report("Runner", "MMEngineAdapter", [c.name for c in cases], {c.name: c.iters for c in cases}, direct,
                  ("runner", "bare runner", "lightning", "adapter, no hooks"))
    print("by subtraction of whole runs (process CPU time, hooked run less bare run); medians over repeats of each "
          "repeat's own ratio / difference")
    rows: dict[str, list[str]] = {}
    for case in cases:
        t = {host: us[case.name, host] for host in HOSTS}
        print(f"[{case.name}; {case.epochs * case.batches} it per run]")
        print(f"  mmengine Runner:              {1e6 / statistics.median(t['runner']):8.1f} it/s")
        print(f"  lightning + MMEngineAdapter:  {1e6 / statistics.median(t['lightning']):8.1f} it/s")
        ratio = statistics.median(r / lit for r, lit in zip(t["runner"], t["lightning"]))
        print(f"  ratio lightning/runner:       {ratio:8.2f}")
        for label, host, minus in BREAKDOWN:
            value = statistics.median(a - b for a, b in zip(t[host], t[minus] if minus else [0.0] * args.repeats))
            rows.setdefault(label, []).append(f"{value:.0f}")
    for label, lightning in (("hooks + adapter's bookkeeping / Runner", "hooks under Lightning + adapter"),
                             ("hooks under the adapter / Runner (target <= 1.05)",
                              "hooks under the adapter, its bookkeeping apart")):  # fmt: skip
        rows[label] = [f"{float(lit) / float(runner):.2f}"
                       for lit, runner in zip(rows[lightning], rows["hooks under the Runner"])]  # fmt: skip
    print("per-step breakdown, us/it:" + " " * 27 + "".join(f"{name:>10s}" for name in args.models))
    for label, values in rows.items():
        print(f"  {label:51s}" + "".join(f"{v:>10s}" for v in values))


if __name__ == "__main__":
    main()
