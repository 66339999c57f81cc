"""Adapters of every family and every native callback in a Trainer of each Lightning namespace.

``lightning.Trainer`` and ``pytorch_lightning.Trainer`` are distinct classes that each accept only their own
``Callback``/``CheckpointIO`` subclasses; the package's bases derive from both (lightning_hooks/core/lightning_api.py).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import classy_vision.hooks as classy_hooks
import imix.engine.hooks as imix_hooks
import mmengine.hooks as mm_hooks
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter, adapt
from lightning_hooks.callbacks import EMA, AnomalyDetector, AtomicCheckpointIO, LossScaleMonitor, PreciseBN, Profiler
from lightning_hooks.core import lightning_api
from lh_testing import subprocess_env

NAMESPACES = {ns.__name__: ns for ns in lightning_api.NAMESPACES}
ROOT = Path(__file__).resolve().parents[2]


def _module_class(ns: Any) -> type:
    """A linear model with BatchNorm, as a LightningModule of namespace ``ns``."""

    class Net(ns.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.05)

    return Net


def _loader() -> DataLoader:
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)


def _fit(ns: Any, tmp_path: Path, max_epochs: int, ckpt_path: str | None = None) -> tuple[Any, list[Any]]:
    # one EMA that swaps weights per model (core/weight_swaps.py): the native EMA, not MMEngine's or Classy's too
    hooks = [mm_hooks.CheckpointHook(interval=1), classy_hooks.LossLrMeterLoggingHook(),
             imix_hooks.OptimizerHook(), imix_hooks.IterationTimerHook()]  # fmt: skip
    adapters = adapt(hooks, work_dir=str(tmp_path / "work"))
    natives = [EMA(decay=0.9), PreciseBN(num_batches=2), AnomalyDetector(), LossScaleMonitor(),
               Profiler(start_step=1, num_steps=1, dirpath=str(tmp_path / "prof"))]
    trainer = ns.Trainer(
        max_epochs=max_epochs, default_root_dir=tmp_path, accelerator="cpu", devices=1, logger=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
        callbacks=[*adapters, *natives, ns.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)],
        plugins=[AtomicCheckpointIO()],
    )  # fmt: skip
    trainer.fit(_module_class(ns)(), _loader(), _loader(), ckpt_path=ckpt_path)
    return trainer, adapters


@pytest.mark.parametrize("name", sorted(NAMESPACES))
def test_adapters_and_native_callbacks_run_and_resume_in_a_trainer_of_each_namespace(name, tmp_path):
    ns = NAMESPACES[name]
    trainer, adapters = _fit(ns, tmp_path, max_epochs=1)
    assert [type(a) for a in adapters] == [MMEngineAdapter, ClassyAdapter, IMIXAdapter]
    assert type(trainer.strategy.checkpoint_io) is AtomicCheckpointIO
    for adapter in adapters:
        assert adapter.fired, type(adapter).__name__
    assert adapters[2].fired["after_train_iter"] == 4  # iMIX's OptimizerHook stepped every batch
    assert (tmp_path / "work" / "epoch_1.pth").is_file() and (tmp_path / "ckpt" / "last.ckpt").is_file()

    trainer, adapters = _fit(ns, tmp_path, max_epochs=2, ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))
    assert trainer.current_epoch == 2 and trainer.global_step == 8
    assert adapters[0].runner.iter == 8 and (tmp_path / "work" / "epoch_2.pth").is_file()


def test_with_one_namespace_only_the_package_uses_that_one(tmp_path):
    """An environment with only ``lightning`` or only ``pytorch-lightning`` (the other blocked from import): every
    module of the package imports."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules[sys.argv[1]] = None  # as if that distribution were not installed
        import importlib.metadata
        installed = importlib.metadata.version
        importlib.metadata.version = lambda d: (_ for _ in ()).throw(importlib.metadata.PackageNotFoundError(d)) \\
            if d == sys.argv[2] else installed(d)
        from lightning_hooks.core import lightning_api
        import lightning_hooks.callbacks, lightning_hooks.loggers, lightning_hooks.console, lightning_hooks.demo
        import lightning_hooks.lightning_cli, lightning_hooks.core.checkpoint_files, lightning_hooks.core.state_keys
        import lightning_hooks.families.mmengine.runner, lightning_hooks.families.classy.adapter
        import lightning_hooks.families.imix.adapter
        print(" ".join(ns.__name__ for ns in lightning_api.NAMESPACES), lightning_api.fabric.__name__)
        """
    )
    env = subprocess_env()
    for blocked, dist, expected in (("lightning", "lightning", "pytorch_lightning lightning_fabric"),
                                    ("pytorch_lightning", "pytorch-lightning", "lightning.pytorch lightning.fabric")):
        out = subprocess.run([sys.executable, "-c", script, blocked, dist], capture_output=True, text=True, env=env,
                             cwd=tmp_path)  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == expected.split()


@pytest.mark.parametrize("name", sorted(NAMESPACES))
def test_resuming_a_batch_end_checkpoint_warns_where_lightning_runs_that_batch_again(name, tmp_path):
    ns = NAMESPACES[name]

    class Save(ns.Callback):  # where legacy checkpoint hooks save: in on_train_batch_end
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if batch_idx == 1:
                trainer.save_checkpoint(tmp_path / "batch_end.ckpt")

    def fit(steps: int, callbacks: list[Any], ckpt_path: Path | None = None) -> None:
        trainer = ns.Trainer(max_steps=steps, default_root_dir=tmp_path, logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks)  # fmt: skip
        trainer.fit(_module_class(ns)(), _loader(), ckpt_path=ckpt_path)

    fit(2, [*adapt([mm_hooks.IterTimerHook()], work_dir=str(tmp_path)), Save()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit(3, adapt([mm_hooks.IterTimerHook()], work_dir=str(tmp_path)), tmp_path / "batch_end.ckpt")
    replays = [w for w in caught if "by running that batch once more" in str(w.message)]
    assert len(replays) == (ns.__version__.startswith("2.4.")), [str(w.message) for w in caught]
