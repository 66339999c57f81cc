"""The host loop protocol: the module's own example is a ``HostLoop``, and so is every family's loop."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from lightning_hooks.core import host_loop
from lightning_hooks.core.host_loop import HostLoop, TrainStart
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON


class RecordingCaller:
    """A :class:`~lightning_hooks.core.dispatch.HookCaller` that records what a loop fires, with its counters."""

    def __init__(self) -> None:
        self.loop: Any = None
        self.fired: list[tuple[str, int, int, int, dict[str, Any]]] = []

    def fire(self, trigger: Any, **context: Any) -> None:
        self.fired.append((str(trigger), self.loop.epoch, self.loop.iter, self.loop.inner_iter, context))

    def call_hook(self, mount: str, **context: Any) -> None:
        raise AssertionError(f"a host loop fires rows, it does not call {mount} by name")


def _example_class() -> type:
    """The ``CountingLoop`` of :mod:`lightning_hooks.core.host_loop`'s docstring, as written there."""
    doc = host_loop.__doc__
    code = textwrap.dedent(doc[doc.index("class CountingLoop") - 4:])
    namespace: dict[str, Any] = {"ON": ON, "EvalRows": host_loop.EvalRows}
    exec(compile(code, "core/host_loop.py docstring", "exec"), namespace)
    return namespace["CountingLoop"]


def test_the_docstring_example_is_a_host_loop_that_counts_after_its_rows():
    caller = RecordingCaller()
    loop = caller.loop = _example_class()(caller)
    assert isinstance(loop, HostLoop)

    loop.start_train(TrainStart(epoch=0, batches_fetched=0, epoch_batches=3))
    for _ in range(2):
        loop.start_epoch(mid_epoch=False)
        for i in range(3):
            loop.start_iter(batch=f"b{i}", batch_idx=i)
            loop.end_iter(outputs=None, batch=f"b{i}", batch_idx=i)
        loop.end_epoch(LAST_TRAIN_BATCH)
    loop.end_train()

    counters = [(event, epoch, it, inner) for event, epoch, it, inner, _ in caller.fired]
    assert counters[0] == (str(ON["on_train_start"]), 0, 0, 0)
    assert counters[1:9] == [
        (str(ON["on_train_epoch_start"]), 0, 0, 0),
        (str(ON["on_train_batch_start"]), 0, 0, 0), (str(ON["on_train_batch_end"]), 0, 0, 0),
        (str(ON["on_train_batch_start"]), 0, 1, 1), (str(ON["on_train_batch_end"]), 0, 1, 1),
        (str(ON["on_train_batch_start"]), 0, 2, 2), (str(ON["on_train_batch_end"]), 0, 2, 2),
        (str(LAST_TRAIN_BATCH), 0, 3, 3),
    ]  # fmt: skip  # one row per line pair: event, epoch, iter, inner_iter
    assert counters[9] == (str(ON["on_train_epoch_start"]), 1, 3, 0)
    assert counters[-1] == (str(ON["on_train_end"]), 2, 6, 3)
    assert caller.fired[3][4] == {"batch_idx": 0, "data_batch": "b0", "outputs": None}
    assert loop.state_dict() == {"epoch": 2, "iter": 6, "inner_iter": 3}

    resumed = _example_class()(RecordingCaller())
    resumed.load_state_dict(loop.state_dict())
    assert (resumed.epoch, resumed.iter, resumed.inner_iter) == (2, 6, 3)

    following = RecordingCaller()
    following.loop = _example_class()(following)
    following.loop.start_train(TrainStart(epoch=1, batches_fetched=4, epoch_batches=3))  # a resumed fit's Lightning counts
    assert following.fired[0][:3] == (str(ON["on_train_start"]), 1, 4)


def test_a_loop_missing_a_step_is_not_a_host_loop():
    class NoEndIter:
        epoch = iter = inner_iter = 0

        def start_epoch(self, mid_epoch: bool) -> None: ...
        def start_iter(self, batch: Any, batch_idx: int) -> None: ...
        def end_epoch(self, trigger: Any) -> None: ...
        def state_dict(self) -> dict[str, Any]: return {}
        def load_state_dict(self, state: dict[str, Any]) -> None: ...

    assert not isinstance(NoEndIter(), HostLoop)


def test_the_mmengine_loop_is_a_host_loop():
    pytest.importorskip("mmengine")
    from lightning_hooks.families.mmengine.host_loop import MMEngineLoop

    assert isinstance(MMEngineLoop(RecordingCaller(), None), HostLoop)


def test_eval_rows_fire_each_evaluation_event_with_the_standard_context():
    fired: list[tuple[str, dict[str, Any]]] = []
    rows = host_loop.EvalRows()
    rows.caller = SimpleNamespace(fire=lambda trigger, **context: fired.append((str(trigger), context)))
    for stage, event in (("val", "validation"), ("test", "test")):
        run = host_loop.evaluation(stage, False, stage == "val")
        assert run is host_loop.evaluation(stage, False, stage == "val")  # one instance per kind of evaluation
        fired.clear()
        rows.start_eval(run)
        rows.start_eval_epoch(run)
        rows.start_eval_iter(run, "b", 0)
        rows.end_eval_iter(run, "out", "b", 0)
        rows.end_eval_epoch(run)
        rows.end_eval(run)
        assert fired == [
            (f"on_{event}_start", {}), (f"on_{event}_epoch_start", {}),
            (f"on_{event}_batch_start", {"batch_idx": 0, "data_batch": "b"}),
            (f"on_{event}_batch_end", {"batch_idx": 0, "data_batch": "b", "outputs": "out"}),
            (f"on_{event}_epoch_end", {}), (f"on_{event}_end", {}),
        ]  # fmt: skip  # the six events in Lightning's order
