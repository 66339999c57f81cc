"""``ClassyLoop`` without a Trainer: a fake HookCaller records what each fired trigger shows, over a train phase and a
test phase; the order and the Classy counters are compared with Classy's real ``ClassificationTask`` +
``LocalTrainer`` (``classy_hook_order``), VISSL's counters and the HostLoop view with their values."""

from __future__ import annotations

from typing import Any

import pytest
import real_torchvision
from classy_hook_order import reference

from lightning_hooks.core.host_loop import HostLoop, TrainStart, evaluation
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, Trigger
from lightning_hooks.families.classy.events import EVENTS
from lightning_hooks.families.classy.loop import COUNTERS, ClassyLoop
from lightning_hooks.families.classy.timing import StepClock

BATCH = 4
MOUNT = {row.event: row.mount for row in reversed(EVENTS.rows)}  # a trigger's first row


class Caller:
    """The fake HookCaller: per fired trigger, the mount point its row calls and what the loop shows then."""

    def __init__(self) -> None:
        self.loop: ClassyLoop
        self.fired: list[dict[str, Any]] = []

    def fire(self, trigger: Trigger, **context: Any) -> None:
        loop = self.loop
        self.fired.append({"mount": MOUNT[trigger], "type": "train" if loop.train else "test", **loop.state_dict(),
                           "epoch": loop.epoch, "iter": loop.iter, "inner_iter": loop.inner_iter})  # fmt: skip

    def call_hook(self, mount: str, **context: Any) -> None:
        raise AssertionError("the loop calls no hook by name")


class Records:
    """The task's per-phase records, as calls in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def open_phase(self, resumed: bool) -> None:
        self.calls.append(f"open resumed={resumed}")

    def close_phase(self) -> None:
        self.calls.append("close")

    def after_phase_end(self) -> None:
        self.calls.append("after")

    def global_batchsize(self) -> int:
        return BATCH


def _loop() -> tuple[ClassyLoop, Caller, Records]:
    caller, records = Caller(), Records()
    caller.loop = loop = ClassyLoop(caller, records, StepClock(lambda: None))
    return loop, caller, records


def _epoch(loop: ClassyLoop, train_batches: int, test_batches: int) -> None:
    """One Classy epoch as the adapter drives it: a train phase ended at its last batch, then a test phase."""
    loop.start_epoch(mid_epoch=False)
    for i in range(train_batches):
        loop.start_iter(None, i)
        loop.end_iter(None, None, i)
    loop.end_epoch(LAST_TRAIN_BATCH)
    run = evaluation("val", sanity_check=False, in_fit=True)  # its start and end rows are trainer.validate()'s only
    loop.start_eval_epoch(run)
    for i in range(test_batches):
        loop.end_eval_iter(run, None, None, i)
    loop.end_eval_epoch(run)


def _run(epochs: int, train_batches: int, test_batches: int) -> tuple[ClassyLoop, Caller, Records]:
    loop, caller, records = _loop()
    loop.start_train(TrainStart(epoch=0, batches_fetched=0, epoch_batches=train_batches))
    for _ in range(epochs):
        _epoch(loop, train_batches, test_batches)
    loop.end_train()
    return loop, caller, records


@pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")
def test_classy_loop_fires_classys_hook_order_with_its_counters():
    _, caller, _ = _run(epochs=2, train_batches=2, test_batches=3)
    ours = [(f["mount"], f["type"], f["phase_idx"], f["train_phase_idx"], f["num_updates"]) for f in caller.fired]
    assert ours == reference(epochs=2, train_batches=2, test_batches=3, batch_size=BATCH)


def test_classy_loop_vissl_counters_and_host_loop_view_over_a_train_and_a_test_phase():
    loop, caller, records = _run(epochs=1, train_batches=2, test_batches=2)
    keys = ("mount", "type", "iteration", "local_iteration_num", "batches", "phase_batches", "epoch", "iter", "inner_iter")
    assert [tuple(f[k] for k in keys) for f in caller.fired] == [
        ("on_start", "train", 0, -1, -1, 0, 0, 0, 0),
        ("on_phase_start", "train", 0, 0, -1, 0, 0, 0, 0),
        ("on_step", "train", 1, 1, 0, 1, 0, 1, 1),
        ("on_step", "train", 2, 2, 1, 2, 0, 2, 2),
        ("on_phase_end", "train", 2, 2, 1, 2, 0, 2, 2),
        ("on_phase_start", "test", 2, 3, 1, 0, 1, 2, 0),
        ("on_step", "test", 2, 4, 2, 1, 1, 2, 0),
        ("on_step", "test", 2, 5, 3, 2, 1, 2, 0),
        ("on_phase_end", "test", 2, 5, 3, 2, 1, 2, 0),
        ("on_end", "test", 2, 5, 3, 2, 1, 2, 0),
    ]
    assert records.calls == ["open resumed=False", "close", "after"] * 2
    assert len(loop.batch_time) == 4
    assert isinstance(loop, HostLoop)


def test_classy_loop_state_round_trip_and_a_reopened_phase_keeps_its_counters():
    loop, _, _ = _loop()
    loop.start_epoch(mid_epoch=False)
    loop.end_iter(None, None, 0)
    state = loop.state_dict()
    assert list(state) == list(COUNTERS)
    resumed, _, records2 = _loop()
    resumed.load_state_dict(state)
    resumed.start_epoch(mid_epoch=True)  # the phase the checkpoint was written in, reopened: no counter moves
    assert resumed.state_dict() == state and records2.calls == ["open resumed=True"]
    resumed.end_iter(None, None, 1)
    assert (resumed.iteration, resumed.num_updates, resumed.phase_batches) == (2, 2 * BATCH, 2)
    with pytest.raises(KeyError, match="phase_batches"):
        resumed.load_state_dict({k: v for k, v in state.items() if k != "phase_batches"})
