"""The log buffer and what feeds or reads it: IterationTimerHook, PeriodicLogger with CommonMetricLoggerHook,
JSONLoggerHook and TensorboardLoggerHook (as iMIX's Organizer builds them), TextLoggerHook, against iMIX's own engine
(imix_reference); the step's output as the engine hands it to hooks and writers."""

from __future__ import annotations

import json

from imix.engine.hooks import HookBase, JSONLoggerHook, OptimizerHook, PeriodicLogger, PriorityStatus
from imix_reference import Recorder, assert_runs_as_imix, status_rows, tensorboard
from torch.nn.functional import mse_loss

from lightning_hooks import IMIXAdapter


def test_json_and_tensorboard_logs_hold_per_iteration_losses_and_lr(tmp_path):
    """PeriodicLogger (period from cfg.log_config) writing CommonMetricLoggerHook's lines, JSONLoggerHook's rows and
    TensorboardLoggerHook's scalars as under iMIX's engine, each iteration's losses and lr."""
    imix, lightning = assert_runs_as_imix(tmp_path, log_config=dict(period=1))
    rows = status_rows(lightning.work_dir)
    assert len(rows) == 12 and {"total_loss", "mse_loss", "lr"} <= rows[0].keys()
    assert len(tensorboard(lightning.work_dir)["total_loss"]) == 12
    assert sum("current_iter:" in line for _, line in lightning.log) == 12  # CommonMetricLoggerHook


def test_iteration_timer_hook_reports_iterations_and_epochs(tmp_path):
    """IterationTimerHook's summary as iMIX's engine logs it (13 iterations for 12 by epoch: iMIX's iter has
    advanced)."""
    _, lightning = assert_runs_as_imix(tmp_path)
    lines = [line for name, line in lightning.log if name == "imix.engine.hooks.iteration_time"]
    assert lines[0].startswith("The Whole training speed:13 iterations")
    assert lines[1].startswith("The Whole training speed:2 epochs")


def test_text_logger_hook_logs_at_its_mount_points(tmp_path):
    """TextLoggerHook from cfg.custom_hooks logs at its mount points as under iMIX's engine."""
    custom_hooks = [dict(type=Recorder, level=PriorityStatus.LOWEST), dict(type="TextLoggerHook", text="hi")]
    _, lightning = assert_runs_as_imix(tmp_path, custom_hooks=custom_hooks)
    lines = [line for name, line in lightning.log if name == "imix.engine.hooks.text_logger_hook"]
    assert lines == ["before_train:hi"] + ["after_train_iter:hi"] * 12 + ["after_train:hi"]


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
