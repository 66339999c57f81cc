"""The mmcv runner facade's ``call_hook`` goes through the adapter: counted, muted under ``fast_dev_run``, and an
error names the hook and the mount point, as for the table's rows."""

from __future__ import annotations

import pytest
from mmcv_testkit import Module, ToyModel, loader, mmcv_runner, sgd

from lightning_hooks import MMCVAdapter
from lightning_hooks.core.lightning_api import pl

R = mmcv_runner


class Caller(R.Hook):
    def after_train_epoch(self, runner) -> None:
        runner.call_hook("custom")


class Custom(R.Hook):
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.calls = fail, 0

    def custom(self, runner) -> None:
        if self.fail:
            raise ValueError("custom failed")
        self.calls += 1


class CustomCheckpoint(R.CheckpointHook, Custom):
    """A checkpoint hook (muted under fast_dev_run) with the same by-name method."""

    def __init__(self) -> None:
        R.CheckpointHook.__init__(self, interval=1)
        Custom.__init__(self)


def _fit(hooks: list, tmp_path, **kwargs) -> MMCVAdapter:
    adapter = MMCVAdapter(hooks, work_dir=tmp_path, runner=dict(type="EpochBasedRunner", max_epochs=2))
    trainer = pl.Trainer(callbacks=[adapter], logger=False, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, default_root_dir=tmp_path, num_sanity_val_steps=0,
                         **{**adapter.trainer_kwargs(), **kwargs})  # fmt: skip
    trainer.fit(Module(ToyModel(), sgd), loader())
    return adapter


def test_call_hook_calls_the_hooks_by_name_through_the_adapter(tmp_path):
    custom, checkpoint = Custom(), CustomCheckpoint()
    adapter = _fit([Caller(), custom, checkpoint], tmp_path / "a")
    assert (custom.calls, checkpoint.calls, adapter.fired["custom"]) == (2, 2, 2)
    custom, checkpoint = Custom(), CustomCheckpoint()
    with pytest.warns(UserWarning, match="fast_dev_run"):
        _fit([Caller(), custom, checkpoint], tmp_path / "b", fast_dev_run=1, max_epochs=None)
    assert (custom.calls, checkpoint.calls) == (1, 0)  # the checkpoint hook is muted for call_hook too


def test_call_hook_error_names_the_hook_and_the_mount_point(tmp_path):
    with pytest.raises(ValueError, match="custom failed") as info:
        _fit([Caller(), Custom(fail=True)], tmp_path)
    assert "raised by mmcv hook Custom in mount point 'custom' (called by name" in "\n".join(info.value.__notes__)


def test_max_iters_is_the_loops_from_the_fit_start_and_an_error_naming_the_way_out_otherwise(tmp_path):
    fresh = MMCVAdapter([R.OptimizerHook()], runner=dict(type="EpochBasedRunner", max_epochs=2))
    with pytest.raises(AttributeError, match="'max_iters' is not available before the Lightning trainer"):
        fresh.runner.max_iters
    adapter = _fit([R.OptimizerHook()], tmp_path)  # 2 epochs of 5 batches
    assert (adapter.runner.max_iters, adapter.runner._max_iters, adapter.runner.max_epochs) == (10, 10, 2)
    adapter.loop.set_limits(None, None)  # what the loop holds for a Trainer without bounds
    with pytest.raises(AttributeError, match="'max_epochs' is unbounded .* Give the Trainer max_steps or max_epochs"):
        adapter.runner.max_epochs
