"""What an mmcv fit leaves behind (docs/architecture.md, "What a run leaves behind"): the module's patched methods
and the switch to manual optimisation are gone after teardown (the hooks' optimizer steps stay counted in
``trainer.global_step``), so a plain Trainer fitting the module afterwards optimises it."""

from __future__ import annotations

import torch
from mmcv_testkit import Module, ToyModel, loader, mmcv_runner, sgd

from lightning_hooks import MMCVAdapter
from lightning_hooks.core.lightning_api import pl

R = mmcv_runner


def _fit(module: Module, hooks: list, tmp_path, **kwargs) -> pl.Trainer:
    adapter = MMCVAdapter(hooks, work_dir=tmp_path, runner=dict(type="EpochBasedRunner", max_epochs=1))
    trainer = pl.Trainer(callbacks=[adapter], logger=False, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, default_root_dir=tmp_path, num_sanity_val_steps=0,
                         **adapter.trainer_kwargs(), **kwargs)  # fmt: skip
    trainer.fit(module, loader())
    return trainer


def test_mmcv_fit_leaves_the_module_unpatched_and_in_automatic_optimisation(tmp_path):
    torch.manual_seed(0)
    module = Module(ToyModel(), sgd)
    first = _fit(module, [R.OptimizerHook()], tmp_path / "a")
    # training_step's wrapper and on_load_checkpoint's hold-back are removed at teardown
    assert not {"training_step", "on_load_checkpoint"} & vars(module).keys()
    assert module.automatic_optimization is True and first.global_step == 5
    before = [p.detach().clone() for p in module.parameters()]
    second = pl.Trainer(max_epochs=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, default_root_dir=tmp_path / "b")  # fmt: skip
    second.fit(module, loader())
    assert second.global_step == 5 and any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))


def test_mmcv_fit_refused_at_setup_leaves_the_module_unpatched(tmp_path):
    module = Module(ToyModel(), sgd)
    try:
        _fit(module, [R.OptimizerHook()], tmp_path, accumulate_grad_batches=2)
    except ValueError as err:
        assert "must not accumulate" in str(err)
    else:
        raise AssertionError("accumulate_grad_batches=2 with an OptimizerHook was not refused")
    assert not {"training_step", "on_load_checkpoint"} & vars(module).keys()


class Priority(R.Hook):
    """Notes its ``priority`` during the run (an int there, as mmcv's ``register_hook`` leaves it); ``fail`` raises."""

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.seen = fail, []

    def before_run(self, runner) -> None:
        self.seen.append(self.priority)
        if self.fail:
            raise RuntimeError("boom")


def test_mmcv_fit_leaves_the_hooks_priorities_as_given(tmp_path):
    named, unset = Priority(), Priority()
    named.priority = "VERY_LOW"
    _fit(Module(ToyModel(), sgd), [named, unset], tmp_path / "a")
    assert (named.seen, unset.seen) == ([90], [50]) and named.priority == "VERY_LOW" and "priority" not in vars(unset)
    failing = Priority(fail=True)
    failing.priority = "HIGH"
    try:
        _fit(Module(ToyModel(), sgd), [failing], tmp_path / "b")
    except RuntimeError as err:
        assert "boom" in str(err)
    else:
        raise AssertionError("before_run's error did not reach the caller")
    assert failing.seen == [30] and failing.priority == "HIGH"
