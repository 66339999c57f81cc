"""``runner.train_loop`` (``families/mmengine/loops.py``): MMEngine's train loop classes to hooks, serving the host
loop's counters and stop rule without moving them; ``run`` refuses."""

from __future__ import annotations

import pytest
from mmengine.hooks import Hook
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop

from lightning_hooks.families.mmengine import MMEngineAdapter


class Noop(Hook):
    def before_run(self, runner):
        pass


def adapter(**options) -> MMEngineAdapter:
    return MMEngineAdapter([Noop()], work_dir="work", **options)


def test_the_train_loop_is_the_mmengine_loop_of_train_cfg_and_reads_the_host_loops_counters():
    epoch_based = adapter()
    loop = epoch_based.runner.train_loop
    assert isinstance(loop, EpochBasedTrainLoop) and loop.runner is epoch_based.runner
    epoch_based.loop.epoch, epoch_based.loop.iter = 2, 9
    assert (loop.epoch, loop.iter) == (2, 9)

    iter_based = adapter(train_cfg=dict(type="IterBasedTrainLoop", max_iters=10, val_interval=4,
                                        dynamic_intervals=[(6, 2)]))  # fmt: skip
    loop = iter_based.runner.train_loop
    assert isinstance(loop, IterBasedTrainLoop) and not isinstance(loop, EpochBasedTrainLoop)
    assert (loop.max_iters, loop.max_epochs, loop.val_begin, loop.val_interval) == (10, 1, 1, 4)
    iter_based.loop.iter = 5
    assert (loop.iter, loop.val_interval) == (5, 2)  # dynamic_intervals: from iteration 6 on (5 done)


def test_stop_training_is_the_host_loops_stop_rule():
    a = adapter()
    a.runner.train_loop.stop_training = True
    assert a.loop.stop_requested and a.runner.train_loop.stop_training
    a.loop.request_stop(False)
    assert not a.runner.train_loop.stop_training


def test_running_the_mmengine_loop_from_a_hook_is_refused_with_the_lightning_call():
    loop = adapter().runner.train_loop
    for run in (loop.run, loop.run_epoch, loop.run_iter):
        with pytest.raises(RuntimeError, match=r"call trainer\.fit"):
            run()
