"""Train speed of iMIX's ``imixEngine`` vs lightning.Trainer + IMIXAdapter on the same models, data and hooks::

    .venv/bin/python benchmarks/imix_vs_lightning.py [--repeats 9] [--cases tiny cnn tiny-iter]

iMIX 0.1.0's engine does not import on torch 2 as installed (its Organizer imports its model zoo, which needs
allennlp, transformers and data files the wheel lacks): this benchmark runs it as the iMIX differential tests do,
through ``tests/helpers/imix_reference.py``, which executes iMIX's own ``imix_engine.py`` and ``organizer.py`` with
only the model / loss / data / optimizer builders stood in for, and patches out the engine's sleeps (2 s per epoch).
The models, losses and data below are registered in its stand-in registries.

Cases, each under the hosts below, round-robin in one process with single-threaded torch:

* ``tiny``: an MLP 32-64-1 with MSE, batch 8, by epoch (128 iterations per epoch, 3 epochs): a step takes well under
  1 ms, so each loop's fixed per-step cost dominates.
* ``cnn``: a 3-layer CNN with BatchNorm on 3x32x32 images, 10 classes, cross-entropy, batch 32 (60 iterations, 2
  epochs).
* ``tiny-iter``: the tiny MLP by iteration (``by_iter``: iMIX's ``train_by_iter`` makes one pass over a 384-batch
  loader); the Organizer's CheckPointHook is left out, as imix 0.1.0 cannot run it by iteration unless it saves
  every iteration.

The hooks are what iMIX's Organizer builds for the config: OptimizerHook, LRSchedulerHook (StepLR), IterationTimerHook,
CheckPointHook (every epoch), CommonMetricLoggerHook, JSONLoggerHook and TensorboardLoggerHook (``log_config.period``
50). The bare engine keeps OptimizerHook only (iMIX's loop does not step without it); "adapter, no hooks" is
IMIXAdapter holding OptimizerHook alone (manual optimisation, as with all the hooks: the adapter's own per-step
bookkeeping, which the engine's bare run does in its own loop: the counters, the loss dict, ``write_metrics``, the log
buffer's step); bare Lightning is :class:`BareModule` without the adapter, stepping as OptimizerHook does. A custom
hook, moved first at level HIGHEST (a callback in bare Lightning), times ``before_train`` to ``after_train`` in process
CPU time.

The report's headline is the hooks' cost timed where it is spent, in the same run (``_common.PointTimer``: thread CPU
time, ``time.thread_time_ns``, of every outermost call of a host's hook-calling points, so other tenants' load does
not enter an interval as it enters a whole run's difference):

* under the engine: the time inside ``EngineBase.before_train_epoch`` / ``before_train_iter`` / ``after_train_iter``
  / ``after_train_epoch`` (the loops over ``engine._hooks``, the hooks' work, and the log buffer's step, which the
  bare engine does too), less the time inside ``OptimizerHook.after_train_iter`` (backward and ``step``: the
  training's); less the same in the bare engine's run (OptimizerHook and the timing hook);
* under Lightning: the time inside IMIXAdapter's Lightning callbacks of the train epochs (``on_train_epoch_start``,
  ``on_train_batch_start``, ``on_train_batch_end``, ``on_train_epoch_end``), its ``trigger`` (``after_train_iter``
  once the strategy returned) and its ``run_step`` (``before_train_iter``, the loss dict, ``write_metrics``), less
  ``IMIXModule.training_step`` inside it and ``OptimizerHook.after_train_iter``; less the same for the adapter
  holding OptimizerHook alone, whose callbacks do what the engine's loop does outside the hooks' loops (the counters,
  the loss dict, ``write_metrics``, the log buffer's step);
* on neither side: ``before_train`` / ``after_train`` (the adapter fires them from ``on_train_start`` /
  ``on_train_end``: not counted, nor anything they call), the model's step, Lightning's own call of its callbacks
  (bare Lightning pays it too).

The clock, its floor and the figures printed with the headline: benchmarks/_common.py's ``direct_report``. The figures
by subtraction of whole runs follow as the second part of the report: the hooks' cost under Lightning + adapter over
their cost under the engine, counted from bare Lightning (the adapter's bookkeeping charged to the hooks) and from the
adapter with no hooks; see benchmarks/_common.py's ``hook_cost_report``.

Where the adapter's per-step microseconds go (round 4, cProfile in process time of ``run_lightning`` on ``tiny`` with
the hooks, microseconds per iteration as profiled, so several times the real cost): per iteration the adapter fires
two triggers (``before_train_iter`` inside the wrapped step, ``after_train_iter`` once the strategy returned,
through ``IMIXLoop``), hands the loss dict to ``write_metrics`` (as iMIX's ``run_train_iter``) and steps the log
buffer; the rest is the hooks' own work. Bookkeeping removed this round: ``trainer.optimizer`` (OptimizerHook,
LRSchedulerHook) went through ``trainer.lightning_module.optimizers()`` each read: 92 -> 4 once the facade keeps the
fit's wrapper; each batch start read Lightning's batch index (44 -> 26 for the batch start: ``IMIXLoop`` counts);
the adapter fired ``on_train_batch_start``'s rows although none applies with OptimizerHook: 3 -> 2 fires per
iteration.

Figures (``--repeats 7``, process CPU time, the shared 2-core machine; before = c7e5052, after = 6a70f6b, the same
``.venv``): hooks under the imixEngine / under Lightning + IMIXAdapter, us/it, tiny, cnn, tiny-iter: before 19 / 174,
426 / 334, 26 / 153 (ratios 9.19, 0.79, 5.98); after 131 / 16, 541 / 286, 105 / 119 (ratios 0.12, 0.53, 1.13). The
spread between repeats on this machine (about +-100 us/it on the tiny cases, more on the CNN) is larger than what the
ratio measures, so neither run says whether the 1.05 target is met: run it on a quiet machine.

Profile, round 5 (``tiny-iter``, 384 iterations; 1650 us/it unprofiled, 4.8x that profiled): own time in
lightning_hooks 392 us/it as profiled (~80 real). Largest, us/it as profiled (calls per iteration): ``core/dispatch.py``
``fire`` 50 (2), ``imix/adapter.py`` ``run_step`` 47, ``core/manual_step.py`` ``trigger`` 26 + ``start_train_batch``
16, ``core/state_keys.py`` ``state_key`` 23 (4), ``core/lightning_api.py`` ``call_before_backward`` 16 +
``namespace_of`` 6, ``imix/adapter.py`` ``_loss_dict`` 13; the facade's (``imix/engine.py``): ``max_iter`` 36
cumulative (1: ``_iterations`` reads ``max_epochs``, ``max_steps`` and ``num_training_batches`` from the Trainer
every read; a loop holding it from the fit's start, as ``MMCVLoop`` holds ``max_iters``, would make it one read),
``iter`` 11 (7 reads), ``epoch`` / ``_counter`` 16 + 11 (by iteration a hook's ``getattr(trainer, "epoch", ...)``
raises AttributeError: ``Facade.__getattr__`` then calls the property again for its message, 31 cumulative for 2
reads), ``log_buffer`` 9 (2).

Round 6 (#35): the engine keeps ``max_iter`` per fit and batch count, its counters' AttributeError by iteration is
raised once (``Facade.__getattr__`` raises the error the property kept instead of running it again),
``call_before_backward`` finds Lightning's module once per Trainer class, and ``dispatch.fire`` calls rows without
arguments with the engine alone. Profiled on ``tiny-iter``: Python calls per iteration 1824 -> 1800, 58.6 -> 54.6 of
them into lightning_hooks, their own time 407 -> 349 us/it as profiled. Runs of 7 repeats: at a load average of
10-13 on the 2 cores 2.54 tiny, 1.68 CNN, 0.99 tiny-iter (hooks 199 vs 79, 177 vs 106, 177 vs 179 us/it); in a
quieter one 1.43 tiny, 0.98 tiny-iter (86 vs 60, 59 vs 60): met by iteration, not by epoch. The adapter's remaining per-step work: ``run_step`` and
``_loss_dict``, ``manual_step.trigger`` (``trigger == AFTER_STEP``: a dataclass comparison every trigger),
``state_key`` (4 reads per iteration, an f-string each).

Round 7 (#35): ``state_key`` kept in the instance (a plain attribute read), ``ManualStepAdapter.trigger`` tests
``trigger is AFTER_STEP`` (the dataclass ``__eq__`` ran on every trigger), ``run_step`` enters no autocast context
without an Fp16OptimizerHook and checks the loss dict as a plain dict before the ``Mapping`` ABC. Profiled (as above)
Python calls per iteration on ``tiny`` 1806.0 -> 1797.0 (47.1 -> 42.0 into lightning_hooks), on ``tiny-iter`` 1799.5
-> 1790.5 (53.6 -> 48.5). What is left is mostly the facade's properties, which the engine's hooks read as plain
attributes under iMIX (``iter`` 5 reads per iteration, ``inner_iter``, ``log_buffer``, ``optimizer`` 2 each,
``epoch``), the loop's two fires with their ``hooks_step`` condition, and Lightning's manual-optimisation call of
``on_before_backward``. Runs of 7 repeats at a load average of 5-8, before (4f978f6's lightning_hooks first on
``PYTHONPATH``) 1.12 and 0.86 tiny, -2.41 and 2.38 CNN, 1.66 and 1.36 tiny-iter; after 1.03 and 1.50 tiny, 2.31 and
1.88 CNN, 1.27 and -0.57 tiny-iter: the spread between runs (tens of us on ``tiny``, hundreds on the CNN, negative
differences) is larger than the few microseconds the cuts remove, so this host cannot say whether 1.05 is met.

Round 8 (#35): the "adapter, no hooks" host separates the adapter's bookkeeping from the hooks' cost. Python calls per
iteration on ``tiny`` (cProfile; before = 90c13ce's package first on ``PYTHONPATH``, from another folder, which adds
1-3 calls per iteration to both of its runs; the calls into lightning_hooks do not move so): the engine's hooks add 83.5
(540.1 with them, 456.6 bare); under the adapter 88.6 before, 84.6 after (1799.9 -> 1783.2 with the hooks, 1711.3 ->
1698.6 holding OptimizerHook alone, 1723.7 for bare Lightning's manual step); calls into lightning_hooks 42.0 -> 28.0
with the hooks, 34.0 -> 24.0 without. Cut: ``hooks_step`` was asked at both step fires (the dispatch now asks a
condition in the adapter's ``fixed_conditions`` once, when it builds its plan: -2, mmcv's too), the loop fired through
the adapter's pass-through ``fire`` (-2: it holds the dispatch), the facade's ``iter`` ran a Python getter at each of
its 5 reads (``operator.attrgetter`` now: -5), ``epoch`` / ``inner_iter`` / ``log_buffer`` went through their
unset-checks at every read (-5). The step path that is left, per iteration (calls into lightning_hooks): Lightning's
``on_train_batch_start`` -> ``train_epoch_open``, ``start_train_batch`` (2 levels) -> ``IMIXLoop.start_iter``; the
wrapped ``training_step`` -> ``run_step`` -> ``before_step`` -> ``fire`` (``before_train_iter``), the step,
``_loss_dict``, iMIX's ``write_metrics``; the strategy's return -> ``trigger`` -> ``step_loss``,
``call_before_backward`` (Lightning's ``on_before_backward``, as ``manual_backward``), ``end_iter`` -> ``fire``
(``after_train_iter``), the log buffer's step; ``on_train_batch_end`` (2 levels); the hooks' reads of ``optimizer``
(2), ``inner_iter`` (2), ``log_buffer`` (2), ``epoch`` (1). ``--repeats 7`` at a load average of 14-15 on the 2 cores
(us/it, tiny, cnn, tiny-iter): hooks under the engine 153, 377, 142; under the adapter, its bookkeeping apart, 113,
141, 103 (ratios 0.74, 0.37, 0.73); with the bookkeeping 257, 502, 224 (1.68, 1.33, 1.57); the bookkeeping itself 128,
164, 185 us over bare Lightning, although it makes 25 Python calls fewer per iteration than bare Lightning's
``manual_backward`` path: at this load the differences carry about +-100 us of noise.

Round 17 (#35), the hooks' cost timed where it is spent (the headline above). Default runs (``--repeats 9``) one
after the other under the shared machine's load, median ratio (IQR; the report's least-disturbed ratio means nothing
here: a difference of two such noisy figures reads below 0 at times, so noise does not only add),
tiny, cnn, tiny-iter:

    run 1 (load 8-10, 525 s): 1.19 (0.55-2.31); 1.04 (0.71-1.48); 1.09 (0.54-2.58)
    run 2 (load 4-4, 183 s): 1.43 (0.83-2.01); 0.86 (0.57-1.36); 1.76 (1.07-1.88)
    run 3 (load 3-5, 160 s): 0.94 (0.78-1.21); 1.00 (0.77-1.12); 1.23 (0.92-1.62)

As mmcv's (mmcv_vs_lightning.py's docstring), the points hold the step (OptimizerHook's backward and ``step``, the
module's step inside ``run_step``), excluded, with a thread-clock read after a model step at each exclusion; so the
points read large figures without the hooks, whose difference spreads: ``tiny``, run 1, us/it in the points, the
engine 147.4 (75.8 bare: its log buffer's step), the adapter 389.3 (247.8 holding OptimizerHook alone: the loss dict,
``write_metrics``, the log buffer's step, Lightning's ``on_before_backward`` call); the hooks' cost 75 against 91.
The calls per iteration (round 8 above; round 16's count: the adapter's extra calls are iMIX's own
``write_metrics`` / log buffer work) are the figure that does not move; nothing was left to cut.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "tests" / "helpers")]
import imix_reference as ref  # noqa: E402  (iMIX's engine and Organizer, run as they are on torch 2)
from _common import (  # noqa: E402
    CLOCKS,
    TRAIN_STAGES,
    PointTimer,
    adapter_timer,
    cpu_clock,
    hook_cost_report,
    hook_cost_rounds,
    use_clock,
)
from imix.engine.base_engine import EngineBase  # noqa: E402
from imix.engine.hooks import HookBase, OptimizerHook, PriorityStatus  # noqa: E402

from lightning_hooks import IMIXAdapter  # noqa: E402

LIGHTNING_SETTINGS = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                          enable_model_summary=False, num_sanity_val_steps=0, accelerator="cpu")  # fmt: skip


class Net(nn.Module):
    """An iMIX model: ``forward(batch, cur_epoch, cur_iter, inner_iter)`` returns what the loss reads."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, batch: Any, cur_epoch: Any = None, cur_iter: Any = None, inner_iter: Any = None) -> dict:
        x, y = batch
        return {"scores": self.net(x), "target": y}


def mlp() -> Net:
    return Net(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))


def cnn() -> Net:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return Net(nn.Sequential(*block(3, 8), nn.MaxPool2d(2), *block(8, 16), nn.MaxPool2d(2), *block(16, 32),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)))  # fmt: skip


class CELoss(nn.Module):
    """An iMIX loss: ``forward(model_output)``, named by ``str()``."""

    def forward(self, output: dict) -> torch.Tensor:
        return nn.functional.cross_entropy(output["scores"], output["target"])

    def __str__(self) -> str:
        return "ce_loss"


@dataclass(frozen=True)
class Case:
    model: str
    loss: str
    inputs: tuple[int, ...]
    batch_size: int
    batches: int
    epochs: int
    by_iter: bool = False

    @property
    def iters(self) -> int:
        return self.batches * self.epochs

    def loader(self, cfg: Any = None) -> DataLoader:
        n = (self.iters if self.by_iter else self.batches) * self.batch_size
        g = torch.Generator().manual_seed(0)
        x = torch.randn(n, *self.inputs, generator=g)
        y = x.sum(1, keepdim=True) if len(self.inputs) == 1 else torch.randint(0, 10, (n,), generator=g)
        return DataLoader(TensorDataset(x, y), batch_size=self.batch_size)

    def config(self, name: str, work_dir: str) -> Any:
        limits: dict[str, Any] = dict(total_epochs=self.epochs)
        if self.by_iter:
            limits = dict(total_epochs=1, by_iter=True, max_iter=self.iters)
        return ref.config(Path(work_dir), model=dict(type=self.model), loss=dict(type=self.loss), dataset_type=name,
                          optimizer=dict(type="SGD", lr=0.01), lr_config=dict(type="StepLR", step_size=200, gamma=0.5),
                          log_config=dict(period=50), custom_hooks=[dict(type=Clock)],
                          **limits)  # fmt: skip


CASES = {
    "tiny": Case("BenchMLP", "MSELoss", (32,), 8, 128, 3),
    "cnn": Case("BenchCNN", "BenchCELoss", (3, 32, 32), 32, 60, 2),
    "tiny-iter": Case("BenchMLP", "MSELoss", (32,), 8, 128, 3, by_iter=True),
}
ref.MODELS.update(BenchMLP=lambda **kw: mlp(), BenchCNN=lambda **kw: cnn())
ref.LOSSES.update(BenchCELoss=CELoss)
ref.DATASETS.update({name: case.loader for name, case in CASES.items()})


class Clock(HookBase):
    def before_train(self) -> None:
        self.start = cpu_clock()

    def after_train(self) -> None:
        self.seconds = cpu_clock() - self.start


def kept(hooks: list[Any], all_hooks: bool, case: Case) -> list[Any]:
    """The clock first, at level HIGHEST (iMIX's ``add_custom_hooks`` cannot insert a hook before all others), then all
    the other hooks or (bare) only OptimizerHook; no CheckPointHook by iteration (see the module's docstring)."""
    clock = clock_of(hooks)
    clock.level = PriorityStatus.HIGHEST
    dropped = ("CheckPointHook",) if case.by_iter else ()
    others = [h for h in hooks if h is not clock and type(h).__name__ not in dropped
              and (all_hooks or type(h).__name__ == "OptimizerHook")]  # fmt: skip
    return [clock, *others]


def clock_of(hooks: list[Any]) -> Clock:
    return next(h for h in hooks if isinstance(h, Clock))


def run_engine(name: str, work_dir: str, all_hooks: bool = True) -> float:
    """Seconds per iteration under iMIX's ``imixEngine(cfg).train()``."""
    torch.manual_seed(0)
    cfg = CASES[name].config(name, work_dir)
    ref.ORGANIZER._AUTOMATIC_imixED_PRECISION = False
    with ref._set_up(cfg):
        engine = ref.ENGINE.imixEngine(cfg)
    engine._hooks = kept(engine._hooks, all_hooks, CASES[name])
    engine.train()
    return clock_of(engine._hooks).seconds / CASES[name].iters


def run_lightning(name: str, work_dir: str, all_hooks: bool = True) -> float:
    """Seconds per iteration under lightning.Trainer + IMIXAdapter holding the Organizer's hooks (or OptimizerHook)."""
    torch.manual_seed(0)
    cfg = CASES[name].config(name, work_dir)
    organizer = ref.organize(cfg)
    hooks = kept(organizer.hooks, all_hooks, CASES[name])
    adapter = IMIXAdapter(hooks, cfg=cfg, work_dir=cfg.work_dir)
    trainer = pl.Trainer(callbacks=[adapter], default_root_dir=work_dir, max_epochs=cfg.total_epochs,
                         **LIGHTNING_SETTINGS)  # fmt: skip
    trainer.fit(ref.IMIXModule(organizer), organizer.train_data_loader)
    return clock_of(hooks).seconds / CASES[name].iters


class BareModule(pl.LightningModule):
    """The Organizer's model, loss and optimizer in Lightning's manual optimisation without the adapter: each step
    does what OptimizerHook does under iMIX (``zero_grad``, forward, loss, backward, ``step``), nothing else."""

    def __init__(self, organizer: Any) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.model, self.losses_fn, self.optimizer = organizer.model, organizer.losses_fn, organizer.optimizer

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        optimizer = self.optimizers()
        optimizer.zero_grad()
        loss = self.losses_fn(self.model(batch))["loss"]
        self.manual_backward(loss)
        optimizer.step()
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer


class LightningClock(pl.Callback):
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.start = cpu_clock()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.seconds = cpu_clock() - self.start


def run_bare_lightning(name: str, work_dir: str) -> float:
    """Seconds per iteration under lightning.Trainer without the adapter (:class:`BareModule`, a callback times)."""
    torch.manual_seed(0)
    cfg = CASES[name].config(name, work_dir)
    organizer = ref.organize(cfg)
    clock = LightningClock()
    trainer = pl.Trainer(callbacks=[clock], default_root_dir=work_dir, max_epochs=cfg.total_epochs,
                         **LIGHTNING_SETTINGS)  # fmt: skip
    trainer.fit(BareModule(organizer), organizer.train_data_loader)
    return clock.seconds / CASES[name].iters


def run_plain(name: str, work_dir: str) -> float:
    """Seconds per iteration of a plain PyTorch loop: the same model, loss, data and SGD step, nothing else."""
    torch.manual_seed(0)
    case = CASES[name]
    model, loader = ref.MODELS[case.model](), case.loader()
    loss_fn = ref.LOSSES[case.loss]()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    start = cpu_clock()
    for _ in range(1 if case.by_iter else case.epochs):
        for batch in loader:
            loss_fn(model(batch)).backward()
            optimizer.step()
            optimizer.zero_grad()
    return (cpu_clock() - start) / case.iters


HOSTS = {
    "host": lambda c, d, warm: run_engine(c, d),
    "bare host": lambda c, d, warm: run_engine(c, d, all_hooks=False),
    "lightning": lambda c, d, warm: run_lightning(c, d),
    "adapter, no hooks": lambda c, d, warm: run_lightning(c, d, all_hooks=False),
    "bare lightning": lambda c, d, warm: run_bare_lightning(c, d),
    "plain loop": lambda c, d, warm: run_plain(c, d),
}

#: the optimizer's step inside ``OptimizerHook.after_train_iter`` (backward, ``step``): the training's, on both hosts
STEP = [(OptimizerHook, "after_train_iter")]
#: the points each host's hooks' cost is timed in (the module's docstring): the engine's loops over its hooks, the
#: adapter's Lightning callbacks, ``trigger`` and ``run_step``
TIMERS = {name: PointTimer([*((EngineBase, stage, True) for stage in sorted(TRAIN_STAGES)),
                            (EngineBase, "before_train", False), (EngineBase, "after_train", False)], STEP)
          for name in ("host", "bare host")} | {
    name: adapter_timer(IMIXAdapter, ref.IMIXModule, STEP) for name in ("lightning", "adapter, no hooks")}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread",
                        help="the headline's clock: thread CPU time (default) or wall time, for a quiet machine")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    args = parser.parse_args()
    use_clock(args.clock)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    for logger in ("lightning.pytorch", "lightning.pytorch.utilities.rank_zero"):
        logging.getLogger(logger).setLevel(logging.ERROR)
    logging.getLogger("imix").addHandler(logging.NullHandler())
    logging.getLogger("imix").propagate = False
    with tempfile.TemporaryDirectory() as tmp:
        us, direct = hook_cost_rounds(args.cases, HOSTS, args.repeats, tmp, TIMERS)
    iters = {c: CASES[c].iters for c in args.cases}
    hook_cost_report("hooks: the Organizer's (Optimizer, LRScheduler, IterationTimer, CheckPoint, CommonMetricLogger, "
                     "JSONLogger, TensorboardLogger / 50)", "imixEngine", "IMIXAdapter", args.cases, us, direct, iters,
                     bare_lightning="bare Lightning (manual step)")  # fmt: skip


if __name__ == "__main__":
    main()
