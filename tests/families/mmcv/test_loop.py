"""``MMCVLoop`` without a Trainer: driven as the adapter drives it at Lightning's events, through a caller that notes
each mount point the mmcv table fires with the loop's counters, against mmcv's own ``EpochBasedRunner`` /
``IterBasedRunner`` running a hook that notes the same."""

from __future__ import annotations

from typing import Any

import pytest
from mmcv_testkit import mmcv_runner, run_mmcv

from lightning_hooks.core.host_loop import HostLoop, TrainStart, evaluation
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON, Trigger
from lightning_hooks.families.mmcv.events import EVENTS
from lightning_hooks.families.mmcv.loop import MMCVLoop

BATCHES, VAL_BATCHES = 5, 2  # mmcv_testkit's loaders: loader() and loader(2, seed=2)
MOUNTS = ("before_run", "before_epoch", "before_train_epoch", "before_train_iter", "after_train_iter",
          "after_train_epoch", "before_val_epoch", "before_val_iter", "after_val_iter", "after_val_epoch",
          "after_epoch", "after_run")  # fmt: skip


class Noter(mmcv_runner.Hook):
    """Under mmcv's runner: each mount point with the runner's counters and mode."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []


for _mount in MOUNTS:
    setattr(Noter, _mount, lambda self, runner, _m=_mount: self.seen.append(
        (_m, runner.epoch, runner.iter, runner.inner_iter, runner.mode)))  # fmt: skip


class Caller:
    """A HookCaller that fires the mmcv table's rows by hand: each mount point a trigger fires (its condition read as
    the adapter reads it, validation real) is noted with the loop's counters and mode."""

    def __init__(self, iter_based: bool, hooks_step: bool) -> None:
        self.loop = MMCVLoop(self, iter_based=iter_based, hooks_step=hooks_step)
        self.epoch_open = False
        self.conditions = {
            "iter_based": iter_based, "epoch_based": not iter_based, "hooks_step": hooks_step,
            "lightning_steps": not hooks_step, "real_validation": True, "epoch_validation": not iter_based,
        }  # fmt: skip
        self.seen: list[tuple[Any, ...]] = []

    def fire(self, trigger: Trigger, **context: Any) -> None:
        loop = self.loop
        for row in EVENTS.rows:
            if row.event == trigger and self._holds(row.when):
                self.seen.append((row.mount, loop.epoch, loop.iter, loop.inner_iter, loop.mode))

    def call_hook(self, mount: str, **context: Any) -> None:
        raise AssertionError("the loop calls no hook by name")

    def _holds(self, when: str | None) -> bool:
        if when == "epoch_cut_short":
            return not self.conditions["iter_based"] and self.epoch_open
        return when is None or self.conditions[when]


def _iteration(caller: Caller, batch_idx: int) -> None:
    """One train batch as Lightning runs it: batch start, the step (wrapped when a hook owns it), the step's end."""
    loop = caller.loop
    loop.start_iter(("batch", batch_idx), batch_idx)
    if loop.hooks_step:
        loop.before_step()
    loop.end_iter(None, ("batch", batch_idx), batch_idx)


def _validation(caller: Caller) -> None:
    loop = caller.loop
    run = evaluation("val", sanity_check=False, in_fit=True)
    loop.start_eval(run)
    loop.start_mode("val", "val loader", VAL_BATCHES)
    loop.start_eval_epoch(run)
    for i in range(VAL_BATCHES):
        loop.start_eval_iter(run, ("val", i), i)
        loop.end_eval_iter(run, None, ("val", i), i)
    loop.end_eval_epoch(run)
    loop.end_eval(run)


def epoch_based_fit(caller: Caller, epochs: int) -> None:
    """The MMCVAdapter's loop calls in a fit of ``epochs`` epochs, each validated (EpochBasedRunner, workflow
    [('train', 1), ('val', 1)])."""
    loop = caller.loop
    loop.start_run()
    caller.fire(ON["on_fit_start"])
    loop.start_train(TrainStart(epoch=0, batches_fetched=0, epoch_batches=BATCHES))
    for _ in range(epochs):
        loop.start_mode("train", "train loader", BATCHES)
        loop.start_epoch(mid_epoch=False)
        caller.epoch_open = True
        for i in range(BATCHES):
            _iteration(caller, i)
        loop.end_epoch(LAST_TRAIN_BATCH)
        caller.epoch_open = False
        _validation(caller)
        caller.fire(ON["on_train_epoch_end"])  # the epoch ended at its last batch: fires nothing
    loop.end_train()


def iter_based_fit(caller: Caller, iters: int) -> None:
    """The MMCVAdapter's loop calls in a fit of ``iters`` iterations (IterBasedRunner, workflow [('train', 1)]):
    Lightning's epochs are passes over the loader, ending at ``on_train_epoch_end``, the last one cut short."""
    loop = caller.loop
    loop.start_run()
    caller.fire(ON["on_fit_start"])
    loop.start_train(TrainStart(epoch=0, batches_fetched=0, epoch_batches=BATCHES))
    for k in range(iters):
        batch_idx = k % BATCHES
        if batch_idx == 0:
            loop.start_mode("train", "train loader", BATCHES)
            loop.start_epoch(mid_epoch=False)
        _iteration(caller, batch_idx)
        if batch_idx == BATCHES - 1 or k == iters - 1:
            loop.end_epoch(ON["on_train_epoch_end"])
    loop.end_train()


@pytest.mark.parametrize("hooks_step", [False, True], ids=["lightning_steps", "hooks_step"])
def test_epoch_based_loop_fires_and_counts_as_epoch_based_runner(tmp_path, hooks_step):
    noter = Noter()
    run_mmcv([noter], tmp_path, max_epochs=2, val=True)
    caller = Caller(iter_based=False, hooks_step=hooks_step)
    epoch_based_fit(caller, epochs=2)
    assert caller.seen == noter.seen
    assert caller.seen[-1] == ("after_run", 2, 2 * BATCHES, VAL_BATCHES - 1, "val")


@pytest.mark.parametrize("hooks_step", [False, True], ids=["lightning_steps", "hooks_step"])
def test_iter_based_loop_fires_and_counts_as_iter_based_runner(tmp_path, hooks_step):
    iters = 2 * BATCHES + 2  # three passes over the loader, the last cut short
    noter = Noter()
    run_mmcv([noter], tmp_path, runner="IterBasedRunner", max_epochs=None, max_iters=iters)
    caller = Caller(iter_based=True, hooks_step=hooks_step)
    iter_based_fit(caller, iters)
    assert caller.seen == noter.seen
    assert caller.seen[-1] == ("after_run", 2, iters, 1, "train")


def test_resumed_run_starts_at_the_checkpoint_counters_and_keeps_them_in_its_state():
    caller = Caller(iter_based=False, hooks_step=False)
    loop = caller.loop
    assert isinstance(loop, HostLoop)
    loop.start_run(epoch=1, iteration=BATCHES)  # MMCVAdapter.start_after(1, 5): an mmcv checkpoint's meta
    loop.start_mode("train", "train loader", BATCHES)
    loop.start_epoch(mid_epoch=False)
    _iteration(caller, 0)
    assert caller.seen[-2:] == [("before_train_iter", 1, 5, 0, "train"), ("after_train_iter", 1, 5, 0, "train")]
    assert loop.state_dict() == {"epoch": 1, "iter": BATCHES + 1}
    fresh = Caller(iter_based=False, hooks_step=False).loop
    fresh.load_state_dict(loop.state_dict())
    assert (fresh.epoch, fresh.iter) == (1, BATCHES + 1)
    with pytest.raises(KeyError, match="iter"):
        fresh.load_state_dict({"epoch": 1})
