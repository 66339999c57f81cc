"""Python logging and the progress bar's step accounting for mmcv 1.x hooks (``Family.configure_logging``,
``Family.batches_per_step``), as OpenMMLab 1.x's train scripts set them up."""

from __future__ import annotations

from mmcv_testkit import TIMESTAMP, mmcv_runner, run_lightning

from lightning_hooks import MMCVAdapter
from lightning_hooks.console import configure_logging
from lightning_hooks.families.mmcv import FAMILY

R = mmcv_runner


def test_configure_logging_writes_the_runner_logger_to_the_work_dirs_log_file(tmp_path):
    for run in ("a", "b"):  # mmcv's get_logger sets its logger up once per process: each run gets its own file
        adapter = MMCVAdapter([R.OptimizerHook(), R.IterTimerHook(), R.TextLoggerHook(interval=5)],
                              runner=dict(type="EpochBasedRunner", max_epochs=1), work_dir=tmp_path / run)  # fmt: skip
        adapter.runner.timestamp = TIMESTAMP
        trainer = run_lightning(adapter, tmp_path / run, configure=configure_logging)
        assert adapter.runner.logger.name == "mmcv" and trainer.global_rank == 0
        text = (tmp_path / run / f"{TIMESTAMP}.log").read_text()
        assert "mmcv - INFO - Epoch [1][5/5]" in text


def test_batches_per_step_is_the_cumulative_hooks_accumulation():
    def adapter(*hooks):
        return MMCVAdapter([*hooks, R.IterTimerHook()])

    assert FAMILY.batches_per_step(adapter()) is None  # Lightning steps
    assert FAMILY.batches_per_step(adapter(R.OptimizerHook())) == 1
    assert FAMILY.batches_per_step(adapter(R.GradientCumulativeOptimizerHook(cumulative_iters=3))) == 3
