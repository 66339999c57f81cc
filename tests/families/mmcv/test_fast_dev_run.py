"""``Trainer(fast_dev_run=...)`` with mmcv 1.x hooks (issue #25): like the other families, no checkpoint and no log
file outlive the smoke test; the runner's work dir is a temporary folder, removed with the log file mmcv's logger
wrote there, and the runner's length (``runner=dict(max_epochs=12)``) does not refuse the short run."""

from __future__ import annotations

import logging
import os

import pytest
from mmcv_testkit import TIMESTAMP, mmcv_runner, run_lightning

from lightning_hooks import MMCVAdapter
from lightning_hooks.console import configure_logging

R = mmcv_runner


class SavesItself(R.Hook):
    """A third-party hook that calls ``runner.save_checkpoint`` itself, and notes the work dir it saw."""

    def __init__(self, out) -> None:
        self.out = str(out)

    def after_train_epoch(self, runner) -> None:
        self.work_dir = runner.work_dir
        runner.save_checkpoint(self.out)


def _files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def test_mmcv_fast_dev_run_leaves_no_files_no_work_dir_and_no_open_log_file(tmp_path):
    saver = SavesItself(tmp_path / "custom")
    adapter = MMCVAdapter.from_config(
        optimizer_config=dict(grad_clip=None), checkpoint_config=dict(interval=1, out_dir=str(tmp_path / "ckpt")),
        log_config=dict(interval=1, hooks=[dict(type="TextLoggerHook")]), custom_hooks=[saver],
        runner=dict(type="EpochBasedRunner", max_epochs=12), work_dir=tmp_path / "work",
    )  # fmt: skip
    with pytest.warns(UserWarning, match=r"MMCVAdapter: Trainer\(fast_dev_run=2\) suppresses checkpointing and "
                      r"logging, so its checkpoint hooks CheckpointHook are skipped .*; and its runner's work_dir is a "
                      r"temporary folder, removed when the run ends"):  # fmt: skip
        trainer = run_lightning(adapter, tmp_path, configure=configure_logging, fast_dev_run=2)
    assert trainer.global_step == 2
    assert saver.work_dir != str(tmp_path / "work") and not os.path.exists(saver.work_dir)  # temporary, and gone
    assert _files(tmp_path) == []  # no checkpoint (CheckpointHook's out_dir, runner.save_checkpoint), no log
    log_files = [h.baseFilename for h in logging.getLogger("mmcv").handlers if isinstance(h, logging.FileHandler)]
    assert not [f for f in log_files if f.startswith(saver.work_dir)]  # the log file's handler is closed
    # a real run afterwards writes its files where it was told
    adapter = MMCVAdapter.from_config(optimizer_config=dict(grad_clip=None), checkpoint_config=dict(interval=1),
                                      runner=dict(type="EpochBasedRunner", max_epochs=1), work_dir=tmp_path / "work")  # fmt: skip
    adapter.runner.timestamp = TIMESTAMP
    run_lightning(adapter, tmp_path, configure=configure_logging)
    assert _files(tmp_path / "work") == [f"{TIMESTAMP}.log", "epoch_1.pth", "latest.pth"]
