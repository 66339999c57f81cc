"""A fit with nothing left to train (resumed from the checkpoint of a finished run): MMEngine's ``Runner.train()``
runs its train loop empty (``before_train`` ... ``after_train``), while Lightning skips its fit loop; the adapter's
translation (``LegacyHookAdapter.fit_loop_returned``) against the real Runner."""

from __future__ import annotations

import pytest
from mmengine_testkit import RecorderHook, hook_of, run_lightning, run_mmengine

HOOKS = dict(custom_hooks=[dict(type="RecorderHook")])


@pytest.mark.parametrize(
    "loop",
    [
        dict(hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1)), train_cfg=None, ckpt="epoch_1.pth"),
        dict(
            hooks=dict(checkpoint=dict(type="CheckpointHook", interval=2, by_epoch=False)),
            train_cfg=dict(type="IterBasedTrainLoop", max_iters=4, val_interval=4),
            ckpt="iter_4.pth",
        ),
    ],
    ids=["EpochBasedTrainLoop", "IterBasedTrainLoop"],
)
def test_resuming_a_finished_run_fires_the_empty_train_loop_as_the_runner(tmp_path, monkeypatch, loop):
    options = dict(default_hooks=loop["hooks"], train_cfg=loop["train_cfg"], max_epochs=1, **HOOKS)
    run_mmengine(tmp_path / "mm", **options)
    first, _, _ = run_lightning(tmp_path / "lt", **options)
    # CheckpointHook writes its epoch checkpoint inside Lightning's epoch (which a resume finishes): the run's end is
    # the checkpoint Lightning writes after the fit (``ModelCheckpoint``'s last.ckpt)
    finished = tmp_path / "lt" / ("last.ckpt" if loop["train_cfg"] is None else loop["ckpt"])
    if loop["train_cfg"] is None:
        first.save_checkpoint(finished)

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # mmengine 0.10.7's torch.load on torch >= 2.6
    runner = run_mmengine(tmp_path / "mm2", resume_from=str(tmp_path / "mm" / loop["ckpt"]), **options)
    _, adapter, _ = run_lightning(tmp_path / "lt2", resume_from=str(finished), **options)

    expected = hook_of(runner.hooks, RecorderHook).events
    assert "before_train" in [mount for mount, *_ in expected]  # the Runner runs its loop, empty
    assert hook_of(adapter.hooks, RecorderHook).events == expected
