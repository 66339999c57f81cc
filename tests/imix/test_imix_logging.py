"""The step's output as iMIX's engine hands it to hooks and writers. The log buffer, the writers' files and the log
lines against iMIX's own engine are in test_imix_engine.py."""

from __future__ import annotations

import json

from imix.engine.hooks import HookBase, JSONLoggerHook, OptimizerHook, PeriodicLogger
from torch.nn.functional import mse_loss

from lightning_hooks import IMIXAdapter


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
