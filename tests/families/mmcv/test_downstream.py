"""Hooks of the OpenMMLab 1.x libraries (mmdet 2.28, mmcls 0.25) and mmcv's EvalHook under MMCVAdapter against
mmcv's own runner. The libraries import on CPU with ``mmcv._ext`` stubbed (tests/helpers/openmmlab_stubs.py)."""

from __future__ import annotations

import os

import pytest
import torch
from mmcv_testkit import (
    BATCH,
    Recorder,
    assert_same_weights,
    import_with_stubbed_ops,
    mmcv_runner,
    run_lightning,
    run_mmcv,
    weights,
)
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks import MMCVAdapter

R = mmcv_runner


mmdet_core, mmcls_core = import_with_stubbed_ops("mmdet.core", "mmcls.core")


def both(make_hooks, tmp_path, max_epochs=2, meta=None):
    ref_hooks, our_hooks = make_hooks(), make_hooks()
    real = run_mmcv(ref_hooks, tmp_path / "mmcv", max_epochs=max_epochs, meta=meta)
    adapter = MMCVAdapter(our_hooks, runner=dict(type="EpochBasedRunner", max_epochs=max_epochs),
                          work_dir=tmp_path / "lightning", meta=None if meta is None else dict(meta))  # fmt: skip
    trainer = run_lightning(adapter, tmp_path / "lightning")
    recorders = [next(h for h in hooks if isinstance(h, Recorder)).seen for hooks in (ref_hooks, our_hooks)]
    return recorders, real, trainer, adapter


@pytest.mark.parametrize("hook", ["ExpMomentumEMAHook", "LinearMomentumEMAHook"])
def test_mmdet_ema_hooks_match_runner(hook, tmp_path):
    def hooks():
        return [R.OptimizerHook(), getattr(mmdet_core, hook)(interval=2), mmdet_core.CheckInvalidLossHook(interval=1),
                Recorder()]  # fmt: skip

    (ref, ours), real, trainer, _ = both(hooks, tmp_path)
    assert ours == ref
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))


def test_mmdet_yolox_and_mmcls_cooldown_lr_updaters_match_runner(tmp_path):
    for i, updater in enumerate([
        lambda: mmdet_core.YOLOXLrUpdaterHook(num_last_epochs=1, min_lr_ratio=0.05, warmup="exp", warmup_iters=3,
                                              warmup_ratio=1, by_epoch=False),
        lambda: mmcls_core.CosineAnnealingCooldownLrUpdaterHook(min_lr=0.001, cool_down_time=2, cool_down_ratio=0.1,
                                                                by_epoch=False, warmup="linear", warmup_iters=2),
    ]):  # fmt: skip
        (ref, ours), real, trainer, _ = both(lambda make=updater: [make(), R.OptimizerHook(), Recorder()], tmp_path / str(i), 3)
        assert ours == ref
        assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))


class EvalSet(TensorDataset):
    """A dataset with the ``evaluate`` OpenMMLab 1.x datasets have."""

    def evaluate(self, results, logger=None, **kwargs):
        return {"mse": float(sum(results) / len(results))}


def eval_loader():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3 * BATCH, 4, generator=g)
    return DataLoader(EvalSet(x, x.sum(1, keepdim=True)), batch_size=BATCH)


def squared_errors(model, loader):
    with torch.no_grad():
        return [torch.nn.functional.mse_loss(model(x), y).item() for x, y in loader]


def test_eval_hook_save_best_and_log_match_runner(tmp_path):
    def hooks():
        evaluation = R.EvalHook(eval_loader(), interval=1, save_best="mse", rule="less", test_fn=squared_errors)
        logger = R.TextLoggerHook(interval=2)
        evaluation.priority, logger.priority = "LOW", "VERY_LOW"  # as OpenMMLab 1.x's train scripts register them
        return [R.StepLrUpdaterHook(step=[2]), R.OptimizerHook(), evaluation, logger, Recorder()]

    (ref, ours), real, trainer, adapter = both(hooks, tmp_path, max_epochs=3, meta=dict(exp_name="eval"))
    assert ours == ref
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))
    best = sorted(f for f in os.listdir(tmp_path / "mmcv") if f.startswith("best_"))
    assert best and best == sorted(f for f in os.listdir(tmp_path / "lightning") if f.startswith("best_"))
    assert adapter.runner.meta["hook_msgs"]["best_score"] == real.meta["hook_msgs"]["best_score"]
    logs = [(tmp_path / d / f"{adapter.runner.timestamp}.log.json").read_text().count('"mse"') for d in ("mmcv", "lightning")]
    assert logs[0] == logs[1] == 3
