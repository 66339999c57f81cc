"""``IMIXLoop`` without a Trainer: driven as the adapter drives it at Lightning's events, through a caller that notes
each mount point the iMIX table fires with what the engine facade reads (counters, iMIX's own log buffer), against
iMIX's ``imixEngine`` (imix_reference.train) running a hook that notes the same."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from imix.engine.hooks.periods import LogBufferStorage
from imix_reference import config, recorder, train

from lightning_hooks.core.host_loop import HostLoop, TrainStart
from lightning_hooks.core.triggers import ON, Trigger
from lightning_hooks.families.imix.engine import Engine
from lightning_hooks.families.imix.events import EVENTS
from lightning_hooks.families.imix.loop import IMIXLoop

BATCHES = 6  # imix_reference.config's train_data


class Caller:
    """A HookCaller that fires the iMIX table's rows by hand: each mount point a trigger fires (its condition read as
    the adapter reads it) is noted with the engine facade's counters and its log buffer's."""

    def __init__(self, by_epoch: bool, hooks_step: bool) -> None:
        self.loop = IMIXLoop(self, by_epoch=by_epoch, hooks_step=hooks_step)
        self.engine = Engine([], self.loop, by_epoch=by_epoch)
        self.conditions = {"by_epoch": by_epoch, "hooks_step": hooks_step, "lightning_steps": not hooks_step,
                           "train_running": True}  # fmt: skip
        self.seen: list[tuple[Any, ...]] = []

    def fire(self, trigger: Trigger, **context: Any) -> None:
        engine = self.engine
        for row in EVENTS.rows:
            if row.event == trigger and (row.when is None or self.conditions[row.when]):
                buffer = getattr(engine, "log_buffer", None)
                counts = (buffer.iter, buffer.epoch, buffer.epoch_inner_iter) if buffer is not None else ()
                self.seen.append((row.mount, engine.iter, getattr(engine, "inner_iter", None),
                                  getattr(engine, "epoch", None), engine.start_iter, *counts))  # fmt: skip

    def call_hook(self, mount: str, **context: Any) -> None:
        raise AssertionError("the loop calls no hook by name")


def fit(caller: Caller, epochs: int) -> None:
    """The IMIXAdapter's loop calls in a fit of ``epochs`` epochs of :data:`BATCHES` batches from iteration 0."""
    loop = caller.loop
    loop.start_run()
    loop.log_buffer_class = LogBufferStorage
    loop.start_train(TrainStart(epoch=0, batches_fetched=0, epoch_batches=BATCHES))
    try:
        for _ in range(epochs):
            loop.start_epoch(mid_epoch=False)
            for i in range(BATCHES):
                loop.start_iter(("batch", i), i)
                if loop.hooks_step:
                    loop.before_step()
                loop.end_iter(None, ("batch", i), i)
            loop.end_epoch(ON["on_train_epoch_end"])
        loop.end_train()
    finally:
        loop.close_log_buffer()


def _noted(events: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """imix_reference.Recorder's rows without the limits (iMIX's max_iter / max_epoch: the facade reads Lightning's)."""
    return [(e[0], *e[1:5], *e[7:]) for e in events]


@pytest.mark.parametrize("hooks_step", [False, True], ids=["lightning_steps", "hooks_step"])
@pytest.mark.parametrize("by_epoch", [True, False], ids=["by_epoch", "by_iter"])
def test_loop_fires_and_counts_as_imix_engine(tmp_path, by_epoch, hooks_step):
    # by iteration CheckPointHook crashes on an iteration it does not save (imix 0.1.0): it saves every one here
    options = {} if by_epoch else dict(by_iter=True, max_iter=BATCHES, checkpoint_config=dict(iter_period=1))
    engine = train(config(tmp_path, **options))
    caller = Caller(by_epoch=by_epoch, hooks_step=hooks_step)
    fit(caller, epochs=2 if by_epoch else 1)
    assert caller.seen == _noted(recorder(engine._hooks).events)
    last_iter = 2 * BATCHES if by_epoch else BATCHES - 1
    assert caller.seen[-1][:4] == ("after_train", last_iter, *((BATCHES - 1, 1) if by_epoch else (None, None)))
    assert caller.loop.log_buffer is None  # left, as iMIX's `with`


def test_resumed_training_starts_at_lightnings_count_and_keeps_the_counters_in_its_state():
    caller = Caller(by_epoch=True, hooks_step=True)
    loop = caller.loop
    assert isinstance(loop, HostLoop)
    loop.start_run()
    loop.start_train(TrainStart(epoch=1, batches_fetched=9, epoch_batches=6))  # a fit resumed at batch 3 of epoch 1
    loop.start_epoch(mid_epoch=True)
    loop.start_iter(None, 3)
    assert (caller.engine.iter, caller.engine.inner_iter, caller.engine.epoch, caller.engine.start_iter) == (9, 3, 1, 9)
    loop.end_iter(None, None, 3)
    assert loop.state_dict() == {"epoch": 1, "iter": 10, "inner_iter": 3}
    fresh = Caller(by_epoch=True, hooks_step=True).loop
    fresh.load_state_dict(loop.state_dict())
    assert (fresh.epoch, fresh.iter, fresh.inner_iter) == (1, 10, 3)
    with pytest.raises(KeyError, match="inner_iter"):
        fresh.load_state_dict({"epoch": 1, "iter": 10})


def test_the_adapter_travels_pickled_and_its_loop_fires_through_the_copy():
    """strategy='ddp_spawn' pickles each hook alone, then the adapter: a hook's trainer proxy copies the engine and its
    loop, which must not drag the adapter (and its pickling check) in again."""
    from imix.engine.hooks import IterationTimerHook

    from lightning_hooks import IMIXAdapter

    adapter = IMIXAdapter([IterationTimerHook()])
    copy = pickle.loads(pickle.dumps(adapter))
    assert copy.loop.caller is copy.dispatch and copy.engine._loop is copy.loop and copy.hooks[0].trainer._loop is copy.loop
