"""What a Classy fit leaves behind (docs/architecture.md, "What a run leaves behind"): the strategy's checkpoint IO
reads Lightning's files only again, the module's step methods are its own."""

from __future__ import annotations

from classy_testkit import Net, loader, make_trainer
from classy_vision.hooks import LossLrMeterLoggingHook

from lightning_hooks import ClassyAdapter


def test_classy_fit_leaves_checkpoint_io_and_module_unpatched(tmp_path):
    model = Net()
    trainer = make_trainer(tmp_path, [ClassyAdapter(LossLrMeterLoggingHook())], max_epochs=1)
    trainer.fit(model, loader(), loader(8, seed=1))
    assert "load_checkpoint" not in vars(trainer.strategy.checkpoint_io)
    assert not {"training_step", "validation_step", "test_step", "on_load_checkpoint"} & vars(model).keys()
