"""What an MMEngine fit leaves behind (docs/architecture.md, "What a run leaves behind"): no optimizer step hook (the
``OptimWrapper`` step count of param schedulers), the Trainer's train data source as given (the endless loader of an
``IterBasedTrainLoop``)."""

from __future__ import annotations

import torch
from mmengine.hooks import RuntimeInfoHook
from mmengine_testkit import MMEngineSteps, loaders, make_model, run_lightning
from torch.optim.optimizer import _global_optimizer_post_hooks

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.mmengine import MMEngineAdapter
from lightning_hooks.families.mmengine.iter_based import EndlessSource


def test_mmengine_param_schedulers_count_steps_during_the_fit_and_leave_no_optimizer_hook(tmp_path):
    before = set(_global_optimizer_post_hooks)
    trainer, adapter, module = run_lightning(tmp_path, max_epochs=1, val=False,
                                             param_schedulers=[dict(type="MultiStepLR", milestones=[2])])  # fmt: skip
    wrapper = module.optim_wrapper  # runner.optim_wrapper: the module's, whose step() the scheduler counts
    assert wrapper._global_step == 3  # 4 steps counted from the scheduler's -1, once each, as under the Runner
    assert set(_global_optimizer_post_hooks) == before
    assert not trainer.optimizers[0]._optimizer_step_post_hooks
    assert adapter.runner._step_counted is None


class PlainToy(MMEngineSteps):
    """A LightningModule of the user's, with no ``OptimWrapper`` of its own: Lightning steps its optimizer."""

    def __init__(self) -> None:
        super().__init__()
        self.model = make_model()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_mmengine_param_schedulers_on_the_view_of_a_plain_module_count_its_steps(tmp_path):
    before = set(_global_optimizer_post_hooks)
    schedulers = [dict(type="MultiStepLR", milestones=[2])]
    adapter = MMEngineAdapter([RuntimeInfoHook()], work_dir=str(tmp_path), param_schedulers=schedulers)
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    trainer.fit(PlainToy(), loaders()[0])
    wrapper = adapter.runner._optim_wrappers[1][0]  # runner.optim_wrapper: a view of Lightning's optimizer
    assert wrapper.optimizer is trainer.optimizers[0]
    assert wrapper._global_step == 3  # 4 steps counted from the scheduler's -1 by the optimizer step hook
    assert set(_global_optimizer_post_hooks) == before


def test_mmengine_iter_based_fit_gives_the_train_loader_back(tmp_path):
    train, _ = loaders()
    trainer, adapter, module = run_lightning(tmp_path, val=False, train=train,
                                             train_cfg=dict(type="IterBasedTrainLoop", max_iters=6, val_interval=10))  # fmt: skip
    assert adapter.runner.iter == 6
    source = lightning_api.train_data_source(trainer)
    assert not isinstance(source, EndlessSource) and source.instance is train
