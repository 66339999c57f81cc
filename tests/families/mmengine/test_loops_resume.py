"""``runner.train_loop.dataloader = loader`` in ``before_train_epoch`` of a fit resumed inside that epoch trains the
epoch on the new loader, as under the Runner (#33). Found resuming mmpose's shipped
``yoloxpose/coco/yoloxpose_s_8xb32-300e_coco-640.py`` (derived to tiny data) from a checkpoint inside the epoch where
``YOLOXPoseModeSwitchHook`` assigns its last epochs' loader: Lightning restarted the epoch at its first batch without
counting it ready, so the assignment waited for the next epoch and Lightning's fit loop found no train loader
(``assert combined_loader is not None``)."""

from __future__ import annotations

import torch
from mmengine.hooks import Hook
from mmengine_testkit import Points, run_lightning, run_mmengine, unprefixed

_TRAIN_CFG = dict(by_epoch=True, max_epochs=3, val_interval=1)
_HOOKS = dict(checkpoint=dict(type="CheckpointHook", interval=6, by_epoch=False))


class SwapLoaderHook(Hook):
    """Trains the second epoch on, on 8 other samples, as mmdet's / mmpose's mode-switch hooks swap the loader."""

    def before_train_epoch(self, runner) -> None:
        if runner.epoch == 1:
            runner.train_loop.dataloader = torch.utils.data.DataLoader(Points(8, 3), batch_size=4, shuffle=False)


def test_a_loader_assigned_in_the_epoch_a_resumed_fit_restarts_trains_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # the Runner's resume loads the message hub's pickles
    hooks = [SwapLoaderHook()]
    run_mmengine(tmp_path / "runner", default_hooks=_HOOKS, custom_hooks=hooks, train_cfg=_TRAIN_CFG, val=False)
    run_lightning(tmp_path / "lightning", default_hooks=_HOOKS, custom_hooks=hooks, train_cfg=_TRAIN_CFG, val=False)
    # iter_6.pth: at the second epoch's last batch (on the swapped loader), before the epoch ended: both run it again
    runner = run_mmengine(tmp_path / "runner-resumed", custom_hooks=hooks, train_cfg=_TRAIN_CFG, val=False,
                          resume_from=str(tmp_path / "runner" / "iter_6.pth"))  # fmt: skip
    trainer, _, module = run_lightning(tmp_path / "lightning-resumed", custom_hooks=hooks, train_cfg=_TRAIN_CFG,
                                       val=False, resume_from=str(tmp_path / "lightning" / "iter_6.pth"))  # fmt: skip
    assert runner.iter == trainer.global_step == 10  # 4 + 2 (the epoch run again from 6) + 2
    final = unprefixed(module.state_dict())
    for key, value in runner.model.state_dict().items():
        assert torch.equal(value, final[key]), key
