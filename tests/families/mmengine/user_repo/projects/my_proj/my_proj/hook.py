import json
import os

from mmengine.hooks import Hook
from mmpretrain.registry import HOOKS


@HOOKS.register_module()
class LossTrackerHook(Hook):
    """Logs the running mean of the training loss, and writes the losses it saw to the work dir at the end."""

    def before_train(self, runner):
        self.losses = []
        runner.logger.info(f"my_proj: tracking the loss of {runner.max_epochs} epochs")

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.losses.append(outputs["loss"].item())
        runner.message_hub.update_scalar("train/loss_mean", sum(self.losses) / len(self.losses))

    def after_train(self, runner):
        if runner.rank == 0:
            with open(os.path.join(runner.work_dir, "losses.json"), "w") as f:
                json.dump(self.losses, f)
