"""``MMEngineLoop`` (``families/mmengine/host_loop.py``) driven without a Trainer, against MMEngine's own
``EpochBasedTrainLoop`` / ``IterBasedTrainLoop``: the rows it fires, in order, with the counters hooks read then, and
where it tells Lightning to validate and to stop (the facade that reads them: ``test_loops.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from mmengine_testkit import RecorderHook, hook_of, run_mmengine

from lightning_hooks.core.host_loop import TrainStart
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON
from lightning_hooks.families.mmengine.events import EVENTS
from lightning_hooks.families.mmengine.host_loop import MMEngineLoop
from lightning_hooks.families.mmengine.iter_based import parse_train_cfg

#: the mount points the host loop fires, and ``before_val``, where the loop has Lightning validate
TRAIN_MOUNTS = ("before_train", "before_train_epoch", "before_train_iter", "after_train_iter", "after_train_epoch",
                "before_val", "after_train")  # fmt: skip
BATCHES = 4  # mmengine_testkit's train loader: 16 samples, 4 per batch


class RecordingCaller:
    """A HookCaller that records the mount points of each fired trigger with ``runner.epoch`` / ``runner.iter`` (the
    loop's counters) and ``batch_idx``, as ``mmengine_testkit.RecorderHook`` records them under the Runner."""

    def __init__(self) -> None:
        self.loop: Any = None
        self.events: list[tuple] = []

    def fire(self, trigger: Any, **context: Any) -> None:
        for row in EVENTS.rows:
            if row.event == trigger and row.mount in TRAIN_MOUNTS:
                self.events.append((row.mount, self.loop.epoch, self.loop.iter, context.get("batch_idx")))

    def call_hook(self, mount: str, **context: Any) -> None:
        raise AssertionError(f"the train loop fires rows; it does not call {mount} by name")


def fake_trainer() -> SimpleNamespace:
    """What the loop reads and sets on Lightning's trainer (through ``lightning_api``), as a fit starts."""
    return SimpleNamespace(
        current_epoch=0, global_step=0, world_size=1, should_stop=False, sanity_checking=False,
        num_training_batches=BATCHES, val_check_batch=None, state=SimpleNamespace(fn="fit"),
        fit_loop=SimpleNamespace(epoch_loop=SimpleNamespace(max_steps=-1)),
    )  # fmt: skip


def drive(train_cfg: dict, max_epochs: int = 0) -> tuple[MMEngineLoop, list[tuple], SimpleNamespace]:
    """Play Lightning's fit loop around the host loop, as the adapter translates its events: an epoch ends at its
    last batch; validation runs where the loop set ``val_check_batch`` (after that many batches of the epoch); the
    fit ends at ``max_epochs`` or where the loop bounded ``max_steps``."""
    caller, trainer = RecordingCaller(), fake_trainer()
    loop = caller.loop = MMEngineLoop(caller, parse_train_cfg(train_cfg))
    loop.start_run(trainer, "fit")
    loop.start_train(TrainStart(trainer.current_epoch, 0, BATCHES))
    while True:
        loop.start_epoch(mid_epoch=False)
        for batch_idx in range(BATCHES if loop.by_epoch else 10**6):
            trainer.global_step += 1  # Lightning's optimizer step, before on_train_batch_end
            loop.start_iter(batch=None, batch_idx=batch_idx)
            loop.end_iter(outputs=None, batch=None, batch_idx=batch_idx)
            if loop.by_epoch and batch_idx == BATCHES - 1:
                loop.end_epoch(LAST_TRAIN_BATCH)
            if trainer.val_check_batch == (batch_idx + 1 if loop.by_epoch else 1):
                caller.events.append(("before_val", loop.epoch, loop.iter, None))
                loop.end_validation()
            if trainer.fit_loop.epoch_loop.max_steps == trainer.global_step:
                break
        if not loop.by_epoch:
            loop.end_epoch(ON["on_train_epoch_end"])  # the endless epoch, ended by max_steps
        trainer.current_epoch += 1
        if not loop.by_epoch or trainer.current_epoch == max_epochs or trainer.should_stop:
            break
    loop.end_train()
    return loop, caller.events, trainer


def reference(tmp_path: Any, train_cfg: dict) -> list[tuple]:
    """MMEngine's Runner on mmengine_testkit's Toy with ``train_cfg``: RecorderHook's train rows and validations."""
    runner = run_mmengine(tmp_path, custom_hooks=[dict(type="RecorderHook")], train_cfg=train_cfg)
    return [e for e in hook_of(runner.hooks, RecorderHook).events if e[0] in TRAIN_MOUNTS]


EPOCH_CFG = dict(type="EpochBasedTrainLoop", max_epochs=3, val_begin=2, val_interval=1)
ITER_CFG = dict(type="IterBasedTrainLoop", max_iters=10, val_interval=4)


def test_epoch_based_rows_counters_and_validation_are_the_epoch_based_train_loops(tmp_path):
    loop, events, _ = drive(EPOCH_CFG, max_epochs=3)
    assert events == reference(tmp_path, EPOCH_CFG)
    assert events[:4] == [("before_train", 0, 0, None), ("before_train_epoch", 0, 0, None),
                          ("before_train_iter", 0, 0, 0), ("after_train_iter", 0, 0, 0)]  # fmt: skip
    assert [e[1:3] for e in events if e[0] == "before_val"] == [(2, 8), (3, 12)]  # from val_begin=2 on
    assert (loop.epoch, loop.iter, loop.inner_iter, loop.state_dict()) == (3, 12, 4, {"iter": 12})


def test_iter_based_rows_counters_validation_and_stop_are_the_iter_based_train_loops(tmp_path, monkeypatch):
    import mmengine.runner.loops

    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))  # restart sleep
    loop, events, trainer = drive(ITER_CFG)
    assert events == reference(tmp_path, ITER_CFG)
    assert [e[3] for e in events if e[0] == "after_train_iter"] == list(range(10))  # batch_idx: the global iteration
    assert [e[2] for e in events if e[0] == "before_val"] == [4, 8, 10]  # every val_interval, and at max_iters
    assert (loop.epoch, loop.iter, trainer.global_step) == (0, 10, 10)


def test_a_stop_requested_inside_an_epoch_stops_lightning_after_it_and_between_epochs_at_once():
    caller, trainer = RecordingCaller(), fake_trainer()
    loop = caller.loop = MMEngineLoop(caller, None)
    loop.start_run(trainer, "fit")
    loop.start_train(TrainStart(trainer.current_epoch, 0, BATCHES))
    loop.start_epoch(mid_epoch=False)
    loop.request_stop(True)
    assert not trainer.should_stop  # MMEngine's loop reads the flag between epochs
    loop.end_epoch(LAST_TRAIN_BATCH)
    assert trainer.should_stop

    trainer.should_stop = False
    loop.start_run(trainer, "validate")  # a new run: no stop requested, counters of the fit kept (its epoch ended)
    assert (loop.stop_requested, loop.iter, loop.epoch) == (False, 0, 1)
    loop.request_stop(True)
    assert trainer.should_stop


def test_a_checkpoint_written_in_after_train_iter_resumes_after_that_iteration():
    caller, trainer = RecordingCaller(), fake_trainer()
    loop = caller.loop = MMEngineLoop(caller, None)
    saved: list[dict] = []
    caller.fire = lambda trigger, **context: saved.append(loop.state_dict()) if trigger == ON["on_train_batch_end"] else None
    loop.start_run(trainer, "fit")
    loop.start_train(TrainStart(trainer.current_epoch, 0, BATCHES))
    loop.start_epoch(mid_epoch=False)
    loop.start_iter(None, 0)
    loop.end_iter(None, None, 0)
    assert saved == [{"iter": 1}] and loop.iter == 1  # CheckpointHook saves in after_train_iter, before iter += 1

    loop.start_run(trainer, "fit")  # the one place the counters reset
    assert (loop.iter, loop.inner_iter, loop.stepped) == (0, 0, False)
    loop.load_state_dict(saved[0])
    assert loop.iter == 1
    with pytest.raises(KeyError, match="iter"):
        loop.load_state_dict({})
