"""The ``runner`` facade (``families/mmengine/runner.py``): counters read from the host loop through ``train_loop``,
read-only where MMEngine computes them, and an error that names a missing attribute and the way out."""

from __future__ import annotations

import pytest
from mmengine.hooks import Hook

from lightning_hooks.families.mmengine import MMEngineAdapter


class Noop(Hook):
    def before_run(self, runner):
        pass


def test_runner_counters_are_the_host_loops():
    adapter = MMEngineAdapter([Noop()], work_dir="work")
    runner, loop = adapter.runner, adapter.loop
    assert (runner.epoch, runner.iter) == (0, 0)
    loop.epoch, loop.iter = 3, 11
    assert (runner.epoch, runner.iter) == (runner.train_loop.epoch, runner.train_loop.iter) == (3, 11)
    assert runner.by_epoch and loop.by_epoch

    iter_based = MMEngineAdapter([Noop()], work_dir="work", train_cfg=dict(by_epoch=False, max_iters=6))
    assert not iter_based.runner.by_epoch and iter_based.runner.max_iters == 6


@pytest.mark.parametrize("name", ["iter", "epoch", "max_iters", "train_dataloader"])
def test_a_counter_the_runner_computes_is_read_only(name):
    runner = MMEngineAdapter([Noop()], work_dir="work").runner
    with pytest.raises(AttributeError, match=rf"runner\.{name} is read-only under lightning-hooks"):
        setattr(runner, name, 1)


def test_a_missing_attribute_names_itself_what_the_runner_provides_and_the_way_out():
    runner = MMEngineAdapter([Noop()], work_dir="work").runner
    with pytest.raises(AttributeError) as error:
        runner.not_a_runner_attribute
    message = str(error.value)
    assert "runner facade has no attribute 'not_a_runner_attribute'" in message
    assert "adapter.runner.not_a_runner_attribute = ..." in message and "open an issue naming the hook" in message
    assert "train_loop" in message.partition("It provides: ")[2]
