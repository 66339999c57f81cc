"""Lightning resume: a fit resumed from a Lightning checkpoint carries on as mmcv's uninterrupted runner does
(counters, ``runner.meta``, LR schedule, EMA buffers the hooks registered on the model)."""

from __future__ import annotations

import pytest
import torch
from mmcv_testkit import Module, Recorder, ToyModel, assert_same_weights, loader, mmcv_runner, run_mmcv, sgd, weights

from lightning_hooks import MMCVAdapter

R = mmcv_runner
pl = pytest.importorskip("lightning.pytorch")


def hooks():
    return [R.StepLrUpdaterHook(step=[2], warmup="linear", warmup_iters=7), R.OptimizerHook(),
            R.EMAHook(momentum=0.2, interval=1), R.CheckpointHook(interval=1), Recorder()]  # fmt: skip


def test_resumed_fit_continues_as_the_uninterrupted_runner(tmp_path):
    ref_hooks = hooks()
    real = run_mmcv(ref_hooks, tmp_path / "mmcv", max_epochs=3, meta=dict(exp_name="toy"))
    saver = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_top_k=-1, every_n_epochs=1)
    first = MMCVAdapter(hooks(), runner=dict(type="EpochBasedRunner", max_epochs=2), work_dir=tmp_path / "a",
                        meta=dict(exp_name="toy"))  # fmt: skip
    trainer = pl.Trainer(callbacks=[first, saver], max_epochs=2, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path / "a", num_sanity_val_steps=0)  # fmt: skip
    torch.manual_seed(0)
    trainer.fit(Module(ToyModel(), sgd), loader())
    resumed_hooks = hooks()
    resumed = MMCVAdapter(resumed_hooks, runner=dict(type="EpochBasedRunner", max_epochs=3), work_dir=tmp_path / "b")
    trainer = pl.Trainer(callbacks=[resumed], max_epochs=3, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, default_root_dir=tmp_path / "b")  # fmt: skip
    torch.manual_seed(1)  # other initial weights: the checkpoint must bring them back
    module = Module(ToyModel(), sgd)
    trainer.fit(module, loader(), ckpt_path=str(tmp_path / "ckpt" / "epoch=1-step=10.ckpt"))
    # mmcv's own resume from the file CheckpointHook wrote at the same point sees the same stream
    mmcv_resumed = hooks()
    run_mmcv(mmcv_resumed, tmp_path / "mmcv-resumed", max_epochs=3, resume_from=tmp_path / "mmcv" / "epoch_2.pth")
    ref, ours = mmcv_resumed[-1].seen, resumed_hooks[-1].seen
    assert ours == ref
    assert ours[0][:3] == ("before_run", 2, 10)
    uninterrupted = ref_hooks[-1].seen
    assert [s[:3] + s[4:] for s in ours[1:]] == [s[:3] + s[4:] for s in uninterrupted[_epoch_start(uninterrupted, 2):]]
    assert resumed.runner.meta["exp_name"] == "toy" and resumed.runner.meta["hook_msgs"]["last_ckpt"].endswith("epoch_3.pth")
    # EMA buffers included: mmcv's own resume loses them (they do not exist when it loads the file), Lightning's keeps them
    assert_same_weights(weights(real.model), weights(module.model))


def _epoch_start(stream, epoch):
    return next(i for i, seen in enumerate(stream) if seen[0] == "before_train_epoch" and seen[1] == epoch)
