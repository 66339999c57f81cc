"""Lightning's caution on a resume inside an epoch (``lightning_api.MID_EPOCH_RESUME_WARNING``) with ``MMCVAdapter`` in
a user's own ``Trainer`` (``trainer.fit(..., ckpt_path=...)``): absent under IterBasedRunner, whose resume the adapter
makes mmcv's (``MMCVLoop.resumed``: a new pass from the loader's first batch, checked against ``runner.resume`` in
test_resume.py), present under EpochBasedRunner, where Lightning's resume stands (mmcv's runs the whole epoch again;
Lightning goes on after the saved batch). The other families' cases: tests/integration/test_mid_epoch_resume_caution.py."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from mmcv_testkit import Module, ToyModel, loader, mmcv_runner, sgd
from resume_caution import SaveAt, cautions

from lightning_hooks import MMCVAdapter

R = mmcv_runner
ITER_BASED = dict(type="IterBasedRunner", max_iters=14)  # 5 batches a pass
EPOCH_BASED = dict(type="EpochBasedRunner", max_epochs=2)


def fit(work_dir, runner, callbacks=(), ckpt_path=None):
    adapter = MMCVAdapter([R.OptimizerHook()], runner=runner, work_dir=work_dir)
    trainer = pl.Trainer(callbacks=[adapter, *callbacks], logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, default_root_dir=work_dir,
                         limit_val_batches=0, **adapter.trainer_kwargs())  # fmt: skip
    torch.manual_seed(0)
    trainer.fit(Module(ToyModel(), sgd), loader(), ckpt_path=ckpt_path)


class SaveAtEnd(pl.Callback):
    def __init__(self, path):
        self.path = path

    def on_train_end(self, trainer, pl_module):
        trainer.save_checkpoint(self.path)


@pytest.mark.parametrize(("runner", "expected"), [(ITER_BASED, 0), (EPOCH_BASED, 1)], ids=["iter-based", "epoch-based"])
def test_a_checkpoint_saved_inside_a_pass(tmp_path, runner, expected):
    """Saved after iteration 7 (the 2nd of the 2nd pass's 5 batches)."""
    fit(tmp_path / "a", runner, callbacks=[SaveAt(tmp_path / "7.ckpt", 7)])
    assert cautions(lambda: fit(tmp_path / "b", runner, ckpt_path=str(tmp_path / "7.ckpt"))) == expected


def test_iter_based_trained_on_after_stopping_at_max_iters_inside_a_pass(tmp_path):
    """IterBasedRunner stopped at ``max_iters`` 7 and trained on to 14: a new pass, as mmcv's ``runner.resume``."""
    fit(tmp_path / "a", {**ITER_BASED, "max_iters": 7}, callbacks=[SaveAtEnd(tmp_path / "cut.ckpt")])
    assert cautions(lambda: fit(tmp_path / "b", ITER_BASED, ckpt_path=str(tmp_path / "cut.ckpt"))) == 0
