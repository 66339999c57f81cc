"""Every row of every family's event table is installed by its adapter and fires in a real Lightning run.

Probe hooks implement every mount point of their family; a handful of runs per family (fit with validation and test,
an epoch cut short, a resume, a standalone validation, a failure, iMIX with and without a step-owning hook) must fire
every row between them. A row whose trigger the adapter never installs or never reaches fails here.
"""

from __future__ import annotations

import imix.engine.hooks as imix_hooks
import lightning.pytorch as pl
import mmengine.hooks as mm_hooks
import pytest
import torch
from lh_testing import TinyModule, tiny_loader
from lightning.pytorch.callbacks import Callback

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter, families
from lightning_hooks.compat import classy as compat_classy
from lightning_hooks.core.triggers import LightningEvent


class Boom(RuntimeError):
    pass


class Module(TinyModule):
    """TinyModule with a test step, returning Classy's step dict; fails at ``fail_at`` global steps if set."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.fail_at = fail_at

    def training_step(self, batch, batch_idx):
        if self.fail_at is not None and self.global_step >= self.fail_at:
            raise Boom("injected")
        return super().training_step(batch, batch_idx)

    def test_step(self, batch, batch_idx):
        x, y = batch
        output = self(x)
        return {"loss": torch.nn.functional.mse_loss(output, y), "output": output, "target": y}


def probe(base: type, adapter: type) -> object:
    """A hook of ``base`` that implements every mount point of ``adapter``'s table and does nothing."""
    mounts = {m: lambda self, *args, **kwargs: None for m in adapter.events.mount_points()}
    return type(f"Probe{adapter.__name__}", (base,), mounts)()


def fit(adapter, tmp_path, module=None, ckpt_path=None, test=True, **kwargs):
    kwargs = {**dict(max_epochs=2, default_root_dir=tmp_path, logger=False, enable_progress_bar=False,
                     enable_model_summary=False, num_sanity_val_steps=1), **kwargs}  # fmt: skip
    trainer = pl.Trainer(callbacks=[adapter], **kwargs)
    module = module or Module()
    trainer.fit(module, tiny_loader(), tiny_loader(4), ckpt_path=ckpt_path)
    if test:
        trainer.test(module, tiny_loader(4), verbose=False)
    return trainer


def failing_fit(adapter, tmp_path, module=None):
    with pytest.raises(Boom):
        fit(adapter, tmp_path, module=module or Module(fail_at=1), test=False)


def mmengine_runs(tmp_path):
    make = lambda: MMEngineAdapter([probe(mm_hooks.Hook, MMEngineAdapter)], work_dir=tmp_path)  # noqa: E731
    first = make()
    trainer = fit(first, tmp_path / "a")  # ModelCheckpoint saves at each epoch end: on_save_checkpoint
    resumed = make()
    fit(resumed, tmp_path / "b", ckpt_path=trainer.checkpoint_callback.best_model_path, max_epochs=3, test=False)
    short = make()
    fit(short, tmp_path / "c", max_steps=3, test=False)  # cut inside epoch 0
    failed = make()
    failing_fit(failed, tmp_path / "d")
    return [first, resumed, short, failed]


def classy_runs(tmp_path):
    make = lambda: ClassyAdapter([probe(compat_classy.ClassyHook, ClassyAdapter)])  # noqa: E731
    first, short, alone, failed = make(), make(), make(), make()
    trainer = fit(first, tmp_path / "a")
    fit(short, tmp_path / "b", max_steps=3, test=False)
    pl.Trainer(callbacks=[alone], logger=False, enable_progress_bar=False).validate(trainer.lightning_module, tiny_loader(4))
    failing_fit(failed, tmp_path / "c")
    return [first, short, alone, failed]


def imix_runs(tmp_path):
    make = lambda *extra: IMIXAdapter([probe(imix_hooks.HookBase, IMIXAdapter), *extra])  # noqa: E731
    lightning_steps, hooks_step, failed = make(), make(imix_hooks.OptimizerHook()), make()
    fit(lightning_steps, tmp_path / "a", test=False)
    fit(hooks_step, tmp_path / "b", test=False)
    failing_fit(failed, tmp_path / "c")
    return [lightning_steps, hooks_step, failed]


def mmcv_runs(tmp_path):
    runner = pytest.importorskip("mmcv.runner", reason="mmcv 1.x lives in .venv-mmcv1 (tests/core/test_core_mmcv_env.py)")
    from lightning_hooks import MMCVAdapter

    make = lambda *extra, **options: MMCVAdapter([probe(runner.Hook, MMCVAdapter), *extra], **options)  # noqa: E731
    lightning_steps, hooks_step, short = make(), make(runner.OptimizerHook()), make()
    iter_based = make(runner=dict(type="IterBasedRunner", max_iters=6))
    fit(lightning_steps, tmp_path / "a", test=False)
    fit(hooks_step, tmp_path / "b", test=False)
    fit(short, tmp_path / "c", max_steps=3, test=False)  # cut inside epoch 0
    fit(iter_based, tmp_path / "d", test=False, max_steps=6, max_epochs=-1)
    return [lightning_steps, hooks_step, short, iter_based]


RUNS = {"mmengine": mmengine_runs, "classy": classy_runs, "imix": imix_runs, "mmcv": mmcv_runs}


def test_every_registered_family_is_covered_here():
    assert sorted(RUNS) == sorted(f.name for f in families.registered())


@pytest.mark.parametrize("family", sorted(RUNS))
def test_every_table_row_is_installed_and_fires(family, tmp_path):
    adapters = RUNS[family](tmp_path)
    fired = {row for adapter in adapters for row, n in adapter.fired_rows.items() if n}
    never = [f"{row.event} -> {row.mount}" for row in adapters[0].events.rows if row not in fired]
    assert not never, f"{family}: rows that no run fired: {never}"


@pytest.mark.parametrize("family", families.registered(), ids=lambda f: f.name)
def test_every_lightning_event_in_a_table_is_implemented_by_its_adapter(family):
    """Not a test of inheritance: the family's adapter class (or the shared base) must override the Callback method."""
    for trigger in family.adapter.events.events():
        if isinstance(trigger, LightningEvent):
            method = getattr(family.adapter, trigger.name)
            assert method is not getattr(Callback, trigger.name), f"{family.adapter.__name__} ignores {trigger}"


def test_fire_refuses_a_trigger_outside_the_table():
    adapter = MMEngineAdapter([probe(mm_hooks.Hook, MMEngineAdapter)])
    with pytest.raises(ValueError, match="is not a trigger of the mmengine event table"):
        adapter.fire("on_train_start")  # a plain string is not a trigger
    from lightning_hooks.families.classy.events import FORWARD

    with pytest.raises(ValueError, match=r"ModelForward\(\) is not a trigger of the mmengine event table"):
        adapter.fire(FORWARD)


def test_patches_are_removed_after_fit_and_after_a_failure(tmp_path):
    module = Module()
    adapters = [ClassyAdapter([probe(compat_classy.ClassyHook, ClassyAdapter)]),
                IMIXAdapter([probe(imix_hooks.HookBase, IMIXAdapter), imix_hooks.OptimizerHook()])]  # fmt: skip
    for adapter in adapters:
        trainer = fit(adapter, tmp_path / type(adapter).__name__, module=module, test=False)
        assert "training_step" not in vars(module) and "training_step" not in vars(trainer.strategy)
        assert not module._forward_hooks
    failing = Module(fail_at=1)
    failing_fit(MMEngineAdapter([probe(mm_hooks.Hook, MMEngineAdapter)]), tmp_path / "mm", failing)
    failing_fit(ClassyAdapter([probe(compat_classy.ClassyHook, ClassyAdapter)]), tmp_path / "classy", failing)
    assert not {"on_load_checkpoint", "training_step", "validation_step"} & set(vars(failing))
    assert not failing._forward_hooks
