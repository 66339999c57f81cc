"""Train speed of OpenMMLab 1.x's ``EpochBasedRunner`` / ``IterBasedRunner`` vs lightning.Trainer + MMCVAdapter on the
same models, data and hooks. Runs in ``.venv-mmcv1`` (mmcv 1.7.2)::

    .venv-mmcv1/bin/python benchmarks/mmcv_vs_lightning.py [--repeats 9] [--cases tiny cnn tiny-iter cnn-iter] [--mount-points [--probe]]
    .venv-mmcv1/bin/python benchmarks/mmcv_vs_lightning.py --calls [--cases ...]  # calls per iteration, untimed

Cases, each under the hosts below, round-robin in one process with single-threaded torch:

* ``tiny``: an MLP on 32 features, batch 8, ``EpochBasedRunner`` (128 iterations per epoch, 3 epochs): a step takes
  well under 1 ms, so each loop's fixed per-step cost dominates.
* ``cnn``: a 3-layer CNN with BatchNorm on 3x32x32 images, 10 classes, batch 32 (60 iterations, 2 epochs).
* ``tiny-iter`` / ``cnn-iter``: the same under ``IterBasedRunner`` (``max_iters`` the same count; the Lightning side
  gets ``adapter.trainer_kwargs()``: ``max_steps``, ``max_epochs=-1``).

The hooks are what ``runner.register_training_hooks`` registers for a typical config (a step LR schedule, OptimizerHook,
a checkpoint per epoch / per pass over the data, IterTimerHook, TextLoggerHook every 50 iterations), the adapter's
built by ``MMCVAdapter.from_config`` from the same dicts. The bare Runner keeps OptimizerHook alone (its loop does not
step without it); "adapter, no hooks" is Lightning + MMCVAdapter holding OptimizerHook alone (manual optimisation: the
adapter's own per-step bookkeeping, which the Runner's bare run does in its own loop); bare Lightning is
:class:`BareModule` without the adapter, stepping in manual optimisation as OptimizerHook does (against Lightning's
automatic optimisation, ~100 us/step dearer, the hooks' cost would read negative). A HIGHEST-priority hook (a callback
in bare Lightning) times ``before_run`` to ``after_run`` in process CPU time.

The report's headline is the hooks' cost timed where it is spent, in the same run (``_common.PointTimer``: thread CPU
time, ``time.thread_time_ns``, of every outermost call of a host's hook-calling points, so other tenants' load does
not enter an interval as it enters a whole run's difference):

* under the Runner: the time inside ``BaseRunner.call_hook`` for the train epochs' stages (``before_train_epoch``,
  ``before_train_iter``, ``after_train_iter``, ``after_train_epoch``: the walk of the hook list, each hook's mount
  point, the hooks' work), less the time inside ``OptimizerHook.after_train_iter`` (backward and ``step``: the
  training's, which the bare Runner does too); less the same in the bare Runner's run (its walk over OptimizerHook
  and the timing hook);
* under Lightning: the time inside MMCVAdapter's Lightning callbacks of the train epochs (``on_train_epoch_start``,
  ``on_train_batch_start``, ``on_train_batch_end``, ``on_train_epoch_end``), its ``trigger`` (``after_train_iter``
  once the strategy returned) and its ``run_step`` (``before_train_iter``, ``runner.outputs`` and the log buffer),
  less the module's ``training_step`` inside it and ``OptimizerHook.after_train_iter``; less the same for the adapter
  holding OptimizerHook alone, whose callbacks do the bookkeeping the Runner's loop does outside ``call_hook`` (the
  outputs, the log buffer, the counters);
* on neither side: the run-level stages (``before_run``, ``before_epoch`` / ``after_epoch`` of IterBasedRunner,
  ``after_run``; the adapter fires them from ``setup`` / ``on_train_start`` / ``on_train_end``: not counted, nor
  anything they call), the model's step, Lightning's own call of its callbacks (bare Lightning pays it too).

The clock, its floor and the figures printed with the headline: benchmarks/_common.py's ``direct_report``. The figures
by subtraction of whole runs follow as the second part of the report: the hooks' cost under Lightning + adapter over
their cost under the Runner, counted from bare Lightning (the adapter's bookkeeping charged to the hooks) and from the
adapter with no hooks; see benchmarks/_common.py's ``hook_cost_report``.

Where the adapter's per-step microseconds go (round 4, cProfile in process time of ``run_lightning`` on
``tiny-iter`` with the hooks, microseconds per iteration as profiled, so several times the real cost): per iteration
the adapter fires two triggers (``before_train_iter`` inside the wrapped step, ``after_train_iter`` once the
strategy returned, through ``MMCVLoop``), takes the step's outputs into ``runner.outputs`` and the log buffer (as
mmcv's ``run_iter``) and moves the loop's counters; the rest is the hooks' own work. Bookkeeping removed this round:
``runner.optimizer`` (read 5 times an iteration by LrUpdaterHook and OptimizerHook) went through
``trainer.lightning_module.optimizers()`` each time: 210 -> 9 once the facade keeps the fit's wrapper;
``runner.max_iters`` (CheckpointHook's ``is_last_iter`` every iteration by iteration) was recomputed from the
Trainer: 100 -> 13 once ``MMCVLoop`` holds it from the fit's start; with a step-owning hook the adapter fired
``on_train_batch_start``'s rows although none applies: 3 -> 2 fires per iteration.

Figures (``--repeats 7``, process CPU time, the shared 2-core machine; before = c7e5052, after = 6a70f6b, the same
``.venv-mmcv1``): hooks under the Runner / under Lightning + MMCVAdapter, us/it, tiny, cnn, tiny-iter, cnn-iter:
before 6 / 105, -82 / 84, 32 / 138, -32 / 914 (ratios 17.2, -1.0, 4.3, -28.6); after 50 / 15, -622 / 484,
17 / 235, 436 / 89 (ratios 0.29, -0.78, 13.5, 0.20). On this machine the spread between repeats (about +-100 us/it
on the tiny cases, +-600 on the CNN, where the hooks themselves cost 10-50 us) is larger than what the ratio
measures, so neither run says whether the 1.05 target is met: run it on a quiet machine.

Profile, round 5 (as above, ``tiny-iter``, 384 iterations; 1559 us/it unprofiled, 5.0x that profiled): 1792 Python
calls per iteration, 51 into lightning_hooks, own time 354 us/it as profiled (~70 real). Largest own times, us/it as
profiled (calls per iteration): ``core/dispatch.py`` ``fire`` 52 (2), ``mmcv/adapter.py`` ``_take_outputs`` 33 (the
outputs into ``runner.outputs`` and the log buffer), ``core/manual_step.py`` ``trigger`` 24 + ``start_train_batch``
21 + ``hooks_step`` 9 (2), ``mmcv/adapter.py`` ``start_train_batch`` 19 and ``trigger`` 15,
``core/lightning_api.py`` ``call_before_backward`` 17 + ``namespace_of`` 6 (Lightning's hook namespace looked up every
step: once per fit would do), ``core/state_keys.py`` ``state_key`` 10 (4), ``mmcv/loop.py`` ``end_iter`` 8 +
``start_iter`` 7 + ``before_step`` 6; the facade's (``mmcv/runner.py``): ``optimizer`` 11 (5 reads), ``iter`` 9 (5),
``model`` 6 (1), ``data_loader`` and ``max_iters`` ~3 each: plain attribute reads behind properties, as mmcv's own
runner has them (``runner.iter`` is a property there too), ~5 us/it real in all. The adapter-side rows belong to the
adapter, loop and manual step (T-translator's restructuring, issue #31).

Round 6 (#35): ``call_before_backward`` finds Lightning's ``trainer.call`` module once per Trainer class (it ran
``import_module(namespace_of(trainer))`` every step a hook owns backward: ~3 us -> 0.04 us), and ``dispatch.fire``
calls the rows without arguments (mmcv's ``before_train_iter`` / ``after_train_iter``: ``hook.fn(runner)``) without a
keyword dict. Profiled on ``tiny-iter``: Python calls per iteration 1793 -> 1781, 53.7 -> 52.7 into lightning_hooks,
own time 367 -> 328 us/it as profiled. Runs of 7 repeats at a load average of 10-13 on the 2 cores, tiny, cnn,
tiny-iter, cnn-iter: HEAD before the cuts 1.78, -1.03, 1.43, 1.87; after 0.89, 4.18, 0.96, 1.61 (hooks 32 vs 36,
237 vs 57, 41 vs 43, 203 vs 126 us/it) and, in a quieter run, 1.54, -1.79, 4.49, 0.15 (77 vs 50, -719 vs 402, 87
vs 19, 81 vs 528). The hooks under the Runner themselves read 19-50 us on the tiny cases from run to run, so the
ratio moves between 0.9 and 4.5: whether 1.05 is met cannot be read on this machine; on the CNN (~10.5 ms steps) the
hooks' tens of microseconds are within the repeats' spread.

Round 8 (#35): the "adapter, no hooks" host (MMCVAdapter holding OptimizerHook alone) over bare Lightning
(:class:`BareModule`, the same manual step without the adapter) is the adapter's own per-step bookkeeping, which the
Runner's bare loop does too; the hooks' cost is counted from it as well as from bare Lightning. Cut (in
``core/dispatch.py`` / ``core/manual_step.py``): ``hooks_step`` is asked once, when the dispatch builds its plan, not at
both step fires (calls into lightning_hooks per iteration on ``tiny``: 36.7 -> 34.7). ``--repeats 5`` at a load
average of 14-15 (us/it, tiny, cnn, tiny-iter, cnn-iter): hooks under the Runner 45, 249, 62, 407; under the
adapter, its bookkeeping apart, 21, 63, 78, 6 (ratios 0.47, 0.25, 1.27, 0.01); with it 64, 95, 150, -428 (1.44, 0.38,
2.43, -1.05); the bookkeeping itself 2, -85, 36, -212: the CNN cases' differences are within their repeats' spread.

Round 9 (#35), per hook and mount point (``--cases tiny-iter --mount-points [--probe]``: benchmarks/_common.py's
``MountPointTimer``, the same wrapped code under both hosts, round-robin in one process). ``tiny-iter``, 5 repeats,
load ~20, us per iteration under ``IterBasedRunner`` / the adapter: all mount points 353 / 503 (1.42), of which
``OptimizerHook.after_train_iter`` 304 / 431 (``zero_grad``, backward and step: under the adapter Lightning's
``manual_backward`` and ``LightningOptimizer.step``, which bare Lightning's manual step pays too), ``LrUpdaterHook.
before_train_iter`` 9.7 / 30.4 (3.1), ``CheckpointHook.after_train_iter`` 11.9 / 15.0, ``IterTimerHook`` ``before_iter`` /
``after_iter`` 3.0 / 4.8 and 4.8 / 6.3, ``LoggerHook.after_train_iter`` 19.9 / 14.6. Taken apart inside
``LrUpdaterHook.before_train_iter`` (each piece twice in a row; warm): ``_set_lr`` 1.48 / 3.13 us, ``get_regular_lr``
2.0 / 3.0: ``runner.optimizer`` is Lightning's ``LightningOptimizer`` (OptimizerHook's step must go through it), which
answers ``param_groups`` in ``__getattr__`` after a failed lookup: 2.5 us a read against 25 ns on the optimizer. Cut
this round: ``lightning_api.direct_optimizer_reads`` gives the wrapper's own class properties for ``param_groups``,
``state`` and ``defaults`` (80 ns a read), for mmcv's ``runner.optimizer`` and iMIX's ``engine.optimizer``. The rest
of the gap is the colder caches the hooks meet inside Lightning's step (classy_vs_lightning.py's docstring), first
reads 2-3.5x the warm ones on both sides.

Round 16 (#35), in Python calls per iteration (``--calls``: ``_common.python_calls``, a run of the case's epochs less
a run of one epoch; load-independent). Of the adapter's own bookkeeping (MMCVAdapter holding OptimizerHook alone,
over bare Lightning's manual step), every call per iteration on ``tiny-iter``, and whose work it is:

* the host's own: ``runner.model.train()`` (IterBasedRunner's ``train()`` does it each iteration: ``Runner.model``
  and torch's ``Module.train`` / ``children``), ``_take_outputs`` (mmcv's ``run_iter``: ``runner.outputs`` and
  ``LogBuffer.update``), ``OptimizerHook.after_train_iter`` and its two ``runner.optimizer`` reads;
* Lightning's, in place of bare Lightning's ``manual_backward`` and ``optimizers()`` (which the adapter does not call:
  hence fewer calls than bare Lightning in all): ``call_before_backward``, ``step_loss``, ``_DeferredFetcher.__next__``;
* the adapter's: ``on_train_batch_start`` (``train_epoch_open``, ``MMCVAdapter.start_train_batch``,
  ``ManualStepAdapter.start_train_batch``, ``MMCVLoop.start_iter``), the wrapped step (``training_step``,
  ``_Step.__call__``, ``run_step``, ``MMCVLoop.before_step``), the strategy's return (``MMCVAdapter.trigger``,
  ``ManualStepAdapter.trigger``, ``MMCVLoop.end_iter``), ``on_train_batch_end`` (``end_train_batch``,
  ``Trainer.is_last_batch``) and the two ``HookDispatch.fire``.

Cut: the loop fired through ``LegacyHookAdapter.fire`` (a one-line hop to ``HookDispatch.fire``; the loop now holds the
dispatch, as Classy's and iMIX's do), ``MMCVAdapter.trigger`` compared each trigger with ``==`` (a dataclass
``__eq__``; now a type check, as MMEngine's), and the runner facade's ``model`` / ``data_loader`` / ``data_batch``
went through ``_need`` at every read. ``tiny-iter``, before / after: bookkeeping -6.3 / -11.3 calls over bare
Lightning (26.3 / 23.3 of them lightning_hooks'); the hooks under the adapter, bookkeeping apart, 38.8 / 37.9 (13.2 /
12.3) against 44.6 under IterBasedRunner. ``tiny``: bookkeeping -47.6 / -51.6 (24.3 / 22.3); hooks, bookkeeping
apart, 25.6 / 24.5 (6.3 / 5.3) against 34.0 under EpochBasedRunner. What is left is the adapter's layering (four calls
from ``on_train_batch_start`` to the loop, three from the strategy's return), about 0.1 us a call.

Round 17 (#35), the hooks' cost timed where it is spent (the headline above). Default runs (``--repeats 9``) one
after the other under the shared machine's load, median ratio (IQR; the report's least-disturbed ratio means nothing
here: a difference of two such noisy figures reads below 0 at times, so noise does not only add),
tiny, cnn, tiny-iter, cnn-iter:

    run 1 (load 7-8, 352 s): 1.30 (0.41-1.56); 0.81 (0.66-0.96); 1.25 (0.97-1.34); 0.91 (0.77-1.14)
    run 2 (load 4-3, 301 s): 0.87 (0.74-1.02); 0.90 (0.81-0.94); 1.13 (0.63-1.56); 0.94 (0.81-1.17)
    run 3 (load 3-3, 238 s): 0.92 (0.86-1.53); 0.81 (0.73-0.92); 0.94 (0.50-1.45); 0.90 (0.65-1.12)

The hooks cost 30-45 us/it on the tiny cases and ~100 on the CNN under both hosts. Their points also hold the step
(OptimizerHook's backward and ``step`` on both sides, the module's step inside ``run_step``), whose time is excluded,
but each exclusion reads the clock right after a model step, ~10 us with thread time: so the adapter's points read
67.7 us/it on ``tiny`` holding OptimizerHook alone (98.8 with the hooks), and the Runner's 6.8 (36.8), and the
difference of two such figures is what spreads. Timed one by one holding OptimizerHook alone (``cnn``, 3 repeats,
load ~7): ``on_train_batch_start`` 22.5 us/it, ``on_train_batch_end`` 12.2, ``trigger`` 146 less OptimizerHook's step
(Lightning's ``on_before_backward`` call, as ``manual_backward`` makes it, 73-117 of it, timed alone with the clock's
first read after the module's step), ``run_step`` 70 less the module's step (``_take_outputs``: mmcv's
``runner.outputs`` and log buffer, 49-94 timed alone): the same work in the hooked run. The calls per iteration
(round 16, below) are the figure that does not move; nothing was left to cut.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import warnings
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest import mock

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).parent))
from _common import (  # noqa: E402
    CLOCKS,
    MountPointTimer,
    PointTimer,
    adapter_timer,
    call_hook_points,
    call_report,
    cpu_clock,
    hook_cost_report,
    hook_cost_rounds,
    mount_point_report,
    python_calls,
    use_clock,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mmcv import runner as mmcv_runner  # noqa: E402

from lightning_hooks import MMCVAdapter  # noqa: E402

LIGHTNING_SETTINGS = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                          enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu")  # fmt: skip


class Model(nn.Module):
    """An mmcv model: ``train_step`` returns mmcv's output dict."""

    def __init__(self, net: nn.Module, loss: Any) -> None:
        super().__init__()
        self.net, self.loss = net, loss

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def train_step(self, data: Any, optimizer: Any = None) -> dict[str, Any]:
        x, y = data
        loss = self.loss(self(x), y)
        return dict(loss=loss, log_vars=OrderedDict(loss=loss.item()), num_samples=len(x))


def mlp() -> Model:
    return Model(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)), nn.functional.mse_loss)


def cnn() -> Model:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    net = nn.Sequential(*block(3, 8), nn.MaxPool2d(2), *block(8, 16), nn.MaxPool2d(2), *block(16, 32),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))  # fmt: skip
    return Model(net, nn.functional.cross_entropy)


@dataclass(frozen=True)
class Case:
    model: Any
    inputs: tuple[int, ...]
    batch_size: int
    batches: int
    epochs: int
    runner: str = "EpochBasedRunner"

    @property
    def iters(self) -> int:
        return self.batches * self.epochs

    def loader(self) -> DataLoader:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(self.batches * self.batch_size, *self.inputs, generator=g)
        y = x.sum(1, keepdim=True) if len(self.inputs) == 1 else torch.randint(0, 10, (len(x),), generator=g)
        return DataLoader(TensorDataset(x, y), batch_size=self.batch_size)

    def runner_cfg(self) -> dict[str, Any]:
        key = "max_epochs" if self.runner == "EpochBasedRunner" else "max_iters"
        return {"type": self.runner, key: self.epochs if key == "max_epochs" else self.iters}

    def configs(self) -> dict[str, Any]:
        """``register_training_hooks``'s arguments (IterBasedRunner: by_epoch=False, its default there)."""
        by_epoch = self.runner == "EpochBasedRunner"
        return dict(
            lr_config=dict(policy="step", step=[2] if by_epoch else [2 * self.batches]),
            optimizer_config=dict(grad_clip=None),
            checkpoint_config=dict(interval=1 if by_epoch else self.batches),
            log_config=dict(interval=50, hooks=[dict(type="TextLoggerHook")]),
        )


CASES = {
    "tiny": Case(mlp, (32,), 8, 128, 3),
    "cnn": Case(cnn, (3, 32, 32), 32, 60, 2),
    "tiny-iter": Case(mlp, (32,), 8, 128, 3, "IterBasedRunner"),
    "cnn-iter": Case(cnn, (3, 32, 32), 32, 60, 2, "IterBasedRunner"),
}


class Clock(mmcv_runner.Hook):
    def before_run(self, runner: Any) -> None:
        self.start = cpu_clock()

    def after_run(self, runner: Any) -> None:
        self.seconds = cpu_clock() - self.start


class LitModel(pl.LightningModule):
    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        return self.model.train_step(batch, None)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.model.parameters(), lr=0.01)


class BareModule(LitModel):
    """The same model and SGD in Lightning's manual optimisation without the adapter: each step does what mmcv's
    OptimizerHook does (``zero_grad``, backward, ``step``) after the model's ``train_step``, nothing else."""

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        outputs = self.model.train_step(batch, None)
        optimizer = self.optimizers()
        optimizer.zero_grad()
        self.manual_backward(outputs["loss"])
        optimizer.step()
        return outputs


class LightningClock(pl.Callback):
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.start = cpu_clock()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.seconds = cpu_clock() - self.start


def quiet_logger() -> logging.Logger:
    logger = logging.getLogger("bench-mmcv")
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    return logger


def run_runner(case: Case, work_dir: str, hooks: bool = True) -> float:
    """Seconds per iteration under mmcv's runner."""
    torch.manual_seed(0)
    model = case.model()
    limits = {k: v for k, v in case.runner_cfg().items() if k != "type"}
    runner = getattr(mmcv_runner, case.runner)(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.01),
                                               work_dir=work_dir, logger=quiet_logger(), **limits)  # fmt: skip
    if hooks:
        runner.register_training_hooks(**case.configs())
    else:
        runner.register_hook(mmcv_runner.OptimizerHook(grad_clip=None))
    clock = Clock()
    runner.register_hook(clock, priority="HIGHEST")
    with mock.patch("time.sleep"):  # the runner sleeps 2 s after each epoch
        runner.run([case.loader()], [("train", 1)])
    return clock.seconds / case.iters


def run_lightning(case: Case, work_dir: str, hooks: bool = True) -> float:
    """Seconds per iteration under lightning.Trainer + MMCVAdapter, holding the hooks or OptimizerHook alone."""
    torch.manual_seed(0)
    clock: Any = Clock()
    clock.priority = "HIGHEST"  # what the runner's register_hook(clock, priority="HIGHEST") sets
    if hooks:
        built = MMCVAdapter.from_config(**case.configs(), runner=case.runner_cfg()).hooks
    else:
        built = [mmcv_runner.OptimizerHook(grad_clip=None)]
    adapter = MMCVAdapter([*built, clock], runner=case.runner_cfg(), work_dir=work_dir, logger=quiet_logger())
    callbacks, limits = [adapter], adapter.trainer_kwargs()
    trainer = pl.Trainer(callbacks=callbacks, default_root_dir=work_dir, **limits, **LIGHTNING_SETTINGS)
    trainer.fit(LitModel(case.model()), case.loader())
    return clock.seconds / case.iters


def run_bare_lightning(case: Case, work_dir: str) -> float:
    """Seconds per iteration under lightning.Trainer without the adapter (:class:`BareModule`, a callback times), with
    the limits ``MMCVAdapter.trainer_kwargs()`` hands Lightning."""
    torch.manual_seed(0)
    by_epoch = case.runner == "EpochBasedRunner"
    limits = dict(max_epochs=case.epochs) if by_epoch else dict(max_steps=case.iters, max_epochs=-1)
    clock = LightningClock()
    trainer = pl.Trainer(callbacks=[clock], default_root_dir=work_dir, **limits, **LIGHTNING_SETTINGS)
    trainer.fit(BareModule(case.model()), case.loader())
    return clock.seconds / case.iters


def run_plain(case: Case, work_dir: str) -> float:
    """Seconds per iteration of a plain PyTorch loop: the same model, loss, data and SGD step, nothing else."""
    torch.manual_seed(0)
    model, loader = case.model(), case.loader()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    start = cpu_clock()
    for _ in range(case.epochs):
        for batch in loader:
            model.train_step(batch)["loss"].backward()
            optimizer.step()
            optimizer.zero_grad()
    return (cpu_clock() - start) / case.iters


#: each host's run of a case in a work dir
HOSTS = {
    "host": run_runner,
    "bare host": lambda c, d: run_runner(c, d, hooks=False),
    "lightning": run_lightning,
    "adapter, no hooks": lambda c, d: run_lightning(c, d, hooks=False),
    "bare lightning": run_bare_lightning,
    "plain loop": run_plain,
}

#: the optimizer's step inside ``OptimizerHook.after_train_iter`` (backward, ``step``): the training's, on both hosts
STEP = [(mmcv_runner.OptimizerHook, "after_train_iter")]
#: the points each host's hooks' cost is timed in (the module's docstring): the runner's ``call_hook``, the adapter's
#: Lightning callbacks and ``trigger``
TIMERS = {name: PointTimer(call_hook_points(mmcv_runner.BaseRunner), STEP) for name in ("host", "bare host")} | {
    name: adapter_timer(MMCVAdapter, LitModel, STEP) for name in ("lightning", "adapter, no hooks")}

#: the mount points the hooks' classes define themselves (``--mount-points``); mmcv's ``Hook`` itself is not timed
MOUNT_POINTS = ("before_run", "after_run", "before_epoch", "after_epoch", "before_iter", "after_iter",
                "before_train_epoch", "after_train_epoch", "before_train_iter", "after_train_iter")  # fmt: skip


def mount_points(case: str, tmp: str, repeats: int, probe: bool) -> None:
    """Print the thread time of each hook's mount points under mmcv's runner and under Lightning + MMCVAdapter."""
    classes = [mmcv_runner.LrUpdaterHook, mmcv_runner.StepLrUpdaterHook, mmcv_runner.OptimizerHook,
               mmcv_runner.CheckpointHook, mmcv_runner.IterTimerHook, mmcv_runner.LoggerHook,
               mmcv_runner.TextLoggerHook]  # fmt: skip
    timer = MountPointTimer(classes, MOUNT_POINTS, probe)
    runs = iter(range(10**6))
    hosts = {CASES[case].runner: lambda: run_runner(CASES[case], f"{tmp}/runner-{case}-{next(runs)}"),
             "Lightning + MMCVAdapter": lambda: run_lightning(CASES[case], f"{tmp}/lit-{case}-{next(runs)}")}  # fmt: skip
    mount_point_report(f"[{case}] hooks' mount points", hosts, CASES[case].iters, timer, repeats)


#: ``--calls`` rows: (label, host, host subtracted from it)
CALL_ROWS = (
    ("adapter's own bookkeeping (OptimizerHook alone) over Lightning", "adapter, no hooks", "bare lightning"),
    ("hooks under the Runner", "host", "bare host"),
    ("hooks under Lightning + adapter", "lightning", "bare lightning"),
    ("hooks under the adapter, its bookkeeping apart", "lightning", "adapter, no hooks"),
)


def call_counts(name: str, tmp: str) -> None:
    """Print Python calls per iteration under each host (``_common.python_calls``: the case's epochs less one epoch),
    ``lightning_hooks``' own apart, and which of the package's functions the adapter runs per iteration."""
    hosts = {row[i] for row in CALL_ROWS for i in (1, 2)}
    per_host = {host: python_calls(lambda e, host=host: HOSTS[host](replace(CASES[name], epochs=e),
                                                                   f"{tmp}/calls-{host}-{e}"),
                                   CASES[name].epochs, CASES[name].batches) for host in sorted(hosts)}  # fmt: skip
    call_report(f"[{name}]", per_host, CALL_ROWS, ("adapter, no hooks", "lightning"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread",
                        help="the headline's clock: thread CPU time (default) or wall time, for a quiet machine")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--mount-points", action="store_true", help="time each hook's mount points under both hosts")
    parser.add_argument("--probe", action="store_true", help="with --mount-points: time a fixed probe at each call")
    parser.add_argument("--calls", action="store_true", help="count Python calls per iteration instead of timing")
    args = parser.parse_args()
    use_clock(args.clock)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    for name in ("lightning.pytorch", "lightning.pytorch.utilities.rank_zero"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if args.calls or args.mount_points:
        with tempfile.TemporaryDirectory() as tmp:
            for case in args.cases:
                if args.calls:
                    call_counts(case, tmp)
                else:
                    mount_points(case, tmp, args.repeats, args.probe)
        return
    timed = {host: lambda c, d, warm, run=run: run(CASES[c], d) for host, run in HOSTS.items()}
    with tempfile.TemporaryDirectory() as tmp:
        us, direct = hook_cost_rounds(args.cases, timed, args.repeats, tmp, TIMERS)
    hook_cost_report("hooks: register_training_hooks' (StepLr, Optimizer, Checkpoint, IterTimer, TextLogger/50)",
                     "Runner", "MMCVAdapter", args.cases, us, direct, {c: CASES[c].iters for c in args.cases},
                     bare_lightning="bare Lightning (manual step)")  # fmt: skip


if __name__ == "__main__":
    main()
