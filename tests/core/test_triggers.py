"""``core/triggers.py``: each patch fires at its place in a real Lightning fit, in order, and its undo leaves the
module, the strategy and the optimizers as they came in; a trigger that names no such place is refused."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from lh_testing import TinyModule, tiny_loader

from lightning_hooks.core.lightning_api import Callback, pl
from lightning_hooks.core.triggers import (
    ON,
    LightningEvent,
    ModuleForward,
    ModuleLoadCheckpoint,
    ModuleStep,
    OptimizerStep,
    StrategyTrainingStep,
)

PATCHES = (ModuleStep("training_step", "before"), ModuleForward(), StrategyTrainingStep(), OptimizerStep(),
           ModuleLoadCheckpoint(), ModuleStep("validation_step"))  # fmt: skip  # one patch a line would hide the set


class TrainOnly(TinyModule):
    """TinyModule without a validation step of its own: ``ModuleStep("validation_step")`` must leave it alone."""

    validation_step = pl.LightningModule.validation_step


class Installer(Callback):
    """Stands in for an adapter: installs the patches at setup, removes them at teardown, records what fires."""

    def __init__(self) -> None:
        self.fired: list[str] = []
        self.removes: list[Any] = []

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.removes = [patch.install(self, trainer, pl_module) for patch in PATCHES]

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        for remove in reversed(self.removes):
            remove()

    def trigger(self, trigger: Any, **context: Any) -> None:
        self.fired.append(str(trigger))

    def run_step(self, method: str, step: Any, args: tuple, kwargs: dict) -> Any:
        self.fired.append(f"{method} runs")
        return step(*args, **kwargs)


def _fit(tmp_path, installer: Installer, ckpt_path: str | None = None, max_steps: int = 1) -> pl.Trainer:
    trainer = pl.Trainer(max_steps=max_steps, callbacks=[installer], default_root_dir=tmp_path, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")  # fmt: skip  # kwargs
    trainer.fit(TrainOnly(), tiny_loader(), ckpt_path=ckpt_path)
    return trainer


def test_each_patch_fires_at_its_place_in_a_training_step_in_order(tmp_path):
    installer = Installer()
    _fit(tmp_path, installer)
    assert installer.fired == ["training_step runs", "LightningModule.forward", "Strategy.training_step (after the step)",
                               "Optimizer.step"]  # fmt: skip  # the order is the point


class OtherStep(Installer):
    """Also steps an optimizer the run does not train, in every train batch (as a hook stepping its own would)."""

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        other = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        other.step()


def test_the_optimizer_step_patch_fires_only_for_the_runs_optimizers(tmp_path):
    installer = OtherStep()
    _fit(tmp_path, installer, max_steps=2)
    assert installer.fired.count("Optimizer.step") == 2

def test_the_load_checkpoint_patch_fires_on_a_resume_and_every_undo_restores_the_original(tmp_path):
    _fit(tmp_path, Installer())
    [checkpoint] = tmp_path.rglob("*.ckpt")
    installer = Installer()
    trainer = _fit(tmp_path, installer, ckpt_path=str(checkpoint), max_steps=2)
    assert installer.fired[0] == "LightningModule.on_load_checkpoint"
    module = trainer.lightning_module
    assert "training_step" not in vars(module) and "on_load_checkpoint" not in vars(module)
    assert not module._forward_hooks
    assert "training_step" not in vars(trainer.strategy)
    fired = len(installer.fired)
    trainer.optimizers[0].step()  # the optimizer post-hook is gone
    module(torch.ones(1, 4))  # and the forward hook
    assert len(installer.fired) == fired


def test_a_step_method_the_module_does_not_override_is_left_alone():
    module = TrainOnly()
    removes = [ModuleStep(method).install(Installer(), None, module) for method in ("validation_step", "training_step")]
    assert "validation_step" not in vars(module) and "training_step" in vars(module)  # only the overridden one wrapped
    for remove in removes:
        remove()
    assert "training_step" not in vars(module)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: LightningEvent("on_nothing"), "'on_nothing' is not a lightning Callback method"),
        (lambda: LightningEvent("_private"), "is not a lightning Callback method"),
        (lambda: ModuleStep("forward"), "not a step method"),
        (lambda: ModuleStep("training_step", at="during"), "at not before/after"),
    ],
)
def test_a_trigger_that_names_no_such_place_is_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_on_names_every_public_callback_method_and_triggers_are_equal_by_place():
    assert ON["on_train_start"] == LightningEvent("on_train_start") and str(ON["setup"]) == "setup"
    assert ModuleStep("training_step", "before").key == ModuleStep("training_step", "after").key
    assert ModuleForward().key == ModuleForward()
