"""The log buffer and the hooks and writers that feed or read it: IterationTimerHook, PeriodicLogger with
CommonMetricLoggerHook, JSONLoggerHook and TensorboardLoggerHook, TextLoggerHook."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch
from imix.engine.hooks import (
    CommonMetricLoggerHook,
    HookBase,
    IterationTimerHook,
    JSONLoggerHook,
    LRSchedulerHook,
    OptimizerHook,
    PeriodicLogger,
    PriorityStatus,
    TensorboardLoggerHook,
    TextLoggerHook,
    get_log_buffer,
)
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.nn.functional import mse_loss

from lightning_hooks import IMIXAdapter

ITERS = 12  # 2 epochs x 6 batches


class Losses(HookBase):
    """Records the loss of every iteration, as iMIX's engine hands it to after_train_iter."""

    def __init__(self):
        super().__init__()
        self.values, self.buffers = [], []

    def after_train_iter(self):
        self.values.append(float(self.trainer.output["loss"]))
        self.buffers.append(get_log_buffer() is self.trainer.log_buffer)


def test_json_and_tensorboard_logs_hold_per_iteration_losses_and_lr(module, loader, make_trainer, tmp_path, caplog):
    sched = torch.optim.lr_scheduler.StepLR(module.optimizer, step_size=4, gamma=0.5)
    writers = [
        CommonMetricLoggerHook(max_iter=ITERS, max_epoch=2),
        JSONLoggerHook(str(tmp_path / "training_status.json")),
        TensorboardLoggerHook(str(tmp_path)),
    ]
    losses = Losses()
    losses.level = PriorityStatus.LOWEST
    hooks = [OptimizerHook(), LRSchedulerHook(module.optimizer, sched), IterationTimerHook(), PeriodicLogger(writers, 5), losses]
    adapter = IMIXAdapter(hooks, cfg=dict(log_config=dict(period=1)))
    with caplog.at_level(logging.INFO):
        make_trainer([adapter]).fit(module, loader)

    lrs = [0.1 * 0.5 ** (i // 4) for i in range(ITERS)]
    rows = [json.loads(line) for line in (tmp_path / "training_status.json").read_text().splitlines()]
    assert len(rows) == ITERS  # cfg.log_config.period=1 overrides the constructor's 5, as in iMIX
    # smoothed scalars are written as the median of the last `window_size` (20) values, as iMIX does
    medians = [float(np.median(losses.values[max(0, i - 19) : i + 1])) for i in range(ITERS)]
    assert [r["total_loss"] for r in rows] == pytest.approx(medians)
    assert [r["lr"] for r in rows] == lrs
    assert [(r["epoch"], r["inner-iteration"]) for r in rows] == [(i // 6, i) for i in range(ITERS)]
    assert all(r["iter_time"] > 0 and r["data_time"] >= 0 for r in rows)
    assert all(losses.buffers)  # the facade's buffer is iMIX's current global buffer

    events = EventAccumulator(str(tmp_path / "runs")).Reload()
    loss_events = events.Scalars("total_loss")
    assert [e.step for e in loss_events][:ITERS] == list(range(ITERS))
    assert [e.value for e in loss_events][:ITERS] == pytest.approx(medians, rel=1e-6)
    assert [e.value for e in events.Scalars("lr")][:ITERS] == [float(torch.tensor(lr)) for lr in lrs]
    assert "epoch_time" in events.Tags()["scalars"]  # written after each epoch
    metric_lines = [r.getMessage() for r in caplog.records if "current_iter:" in r.getMessage()]
    assert len(metric_lines) == ITERS and "total_loss:" in metric_lines[0] and "lr:1.000000e-01" in metric_lines[0]


def test_log_buffer_steps_per_iteration_and_epoch_as_imix_engine(module, loader, make_trainer):
    class Probe(HookBase):
        def __init__(self):
            super().__init__()
            self.seen = []

        def before_train_iter(self):
            buf = self.trainer.log_buffer
            self.seen.append(("iter", self.trainer.iter, self.trainer.inner_iter, buf.iter, buf.epoch))

        def after_train_epoch(self):
            buf = self.trainer.log_buffer
            self.seen.append(("epoch", self.trainer.iter, self.trainer.inner_iter, buf.iter, buf.epoch))

    probe = Probe()
    make_trainer([IMIXAdapter([OptimizerHook(), probe])]).fit(module, loader)
    expected = []
    for it in range(ITERS):
        expected.append(("iter", it, it % 6, it, it // 6))
        if it % 6 == 5:  # iMIX: iter has advanced past the last iteration when after_train_epoch runs
            expected.append(("epoch", it + 1, 5, it + 1, it // 6))
    assert probe.seen == expected


def test_iteration_timer_hook_reports_iterations_and_epochs(module, loader, make_trainer, caplog):
    with caplog.at_level(logging.INFO):
        make_trainer([IMIXAdapter([IterationTimerHook()])]).fit(module, loader)
    messages = [r.getMessage() for r in caplog.records]
    # iMIX counts iter + 1 - start_iter, and by epoch its iter has already advanced past the last iteration: 13
    assert any(f"The Whole training speed:{ITERS + 1} iterations" in m for m in messages)
    assert any("The Whole training speed:2 epochs" in m for m in messages)


def test_text_logger_hook_logs_at_its_mount_points(module, loader, make_trainer, caplog):
    with caplog.at_level(logging.INFO, logger="imix.engine.hooks.text_logger_hook"):
        make_trainer([IMIXAdapter([TextLoggerHook(text="hi")])]).fit(module, loader)
    messages = [r.getMessage() for r in caplog.records if r.name == "imix.engine.hooks.text_logger_hook"]
    assert messages == ["before_train:hi"] + ["after_train_iter:hi"] * ITERS + ["after_train:hi"]


def test_output_loss_is_graph_attached_before_after_train_iter(module, loader, make_trainer):
    class Check(HookBase):
        def __init__(self):
            super().__init__()
            self.ok = []

        def after_train_iter(self):
            loss = self.trainer.output["loss"]
            self.ok.append(loss.requires_grad and loss.grad_fn is not None)

    for hooks in ([Check()], [OptimizerHook(), Check()]):  # Lightning steps / the hook steps
        make_trainer([IMIXAdapter(hooks)], max_epochs=1).fit(module, loader)
        assert hooks[-1].ok == [True] * 6


def test_dict_outputs_are_logged_as_imix_losser_outputs(module, loader, make_trainer, tmp_path):
    def training_step(batch, batch_idx):
        x, y = batch
        loss = mse_loss(module.net(x), y)
        return {"mse_loss": loss.item(), "total_loss": loss.item(), "loss": loss}

    module.training_step = training_step
    writer = JSONLoggerHook(str(tmp_path / "status.json"))
    adapter = IMIXAdapter([OptimizerHook(), PeriodicLogger([writer], 1)], cfg=dict(log_config=dict(period=3)))
    make_trainer([adapter], max_epochs=1).fit(module, loader)
    rows = [json.loads(line) for line in (tmp_path / "status.json").read_text().splitlines()]
    assert len(rows) == 2 and {"mse_loss", "total_loss", "data_time"} <= rows[0].keys() and "loss" not in rows[0]
