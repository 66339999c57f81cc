import json
import os

from mmcv.runner import HOOKS, Hook, get_dist_info


@HOOKS.register_module()
class LossTrackerHook(Hook):
    """Logs the running mean of the training loss, and writes the losses it saw to the work dir at the end."""

    def before_run(self, runner):
        self.losses = []
        runner.logger.info(f"my_proj: tracking the loss of {runner.max_epochs} epochs")

    def after_train_iter(self, runner):
        self.losses.append(float(runner.outputs["log_vars"]["loss"]))
        runner.log_buffer.update({"loss_mean": sum(self.losses) / len(self.losses)})

    def after_run(self, runner):
        if get_dist_info()[0] == 0:
            with open(os.path.join(runner.work_dir, "losses.json"), "w") as f:
                json.dump(self.losses, f)
