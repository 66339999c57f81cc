"""lightning_hooks.console: log lines print above the progress bar, and the bar counts right in every adapter mode."""

from __future__ import annotations

import io
import logging
import re
import sys

import lightning as L
import torch
from imix.engine.hooks import OptimizerHook
from tqdm import tqdm

from lightning_hooks import IMIXAdapter
from lightning_hooks.console import ProgressBar, RichBar, TQDMBar
from lightning_hooks.core.console import route_console
from lightning_hooks.demo import DemoNet, SyntheticData


def test_a_log_line_prints_on_its_own_line_above_a_tqdm_bar(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    logger = logging.getLogger("test_core_console.hook")
    handler = logging.StreamHandler(sys.stdout)  # as MMLogger builds its console handler
    logger.addHandler(handler)
    logger.propagate = False
    try:
        route_console(logger)
        with tqdm(total=10, file=sys.stdout, ascii=True) as bar:
            bar.update(3)
            logger.warning("a line from a hook")
            bar.update(3)
    finally:
        logger.removeHandler(handler)
    assert "a line from a hook" in re.split(r"[\r\n]", out.getvalue())  # not glued onto the bar


class Model(DemoNet):
    """iMIX's OptimizerHook owns the step: its optimizer exists before fit."""

    def __init__(self) -> None:
        super().__init__()
        self.optimizer = torch.optim.SGD(self.parameters(), lr=0.1)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer


class Totals(L.Callback):
    """The bar's total and the batches the epoch really ran, per epoch."""

    def __init__(self) -> None:
        self.totals: list[int] = []
        self.ran: list[int] = []

    def on_train_epoch_start(self, trainer, pl_module):
        self.totals.append(trainer.progress_bar_callback.total_train_batches)
        self.ran.append(0)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.ran[-1] += 1


def test_bar_counts_batches_of_imix_accumulation_with_max_steps(tmp_path):
    totals = Totals()
    adapter = IMIXAdapter([OptimizerHook()], gradient_accumulation_steps=2)
    for bar in (ProgressBar(), TQDMBar()):
        trainer = L.Trainer(max_steps=6, callbacks=[adapter, bar, totals], default_root_dir=tmp_path, logger=False,
                            enable_checkpointing=False, enable_model_summary=False, limit_val_batches=0)  # fmt: skip
        totals.totals.clear(), totals.ran.clear()
        trainer.fit(Model(), SyntheticData(n_train=256, n_val=32))  # 8 batches = 4 steps an epoch
        assert totals.totals == totals.ran == [8, 4]  # Lightning's own bar: [6, 2] (steps left, as batches)


def test_bar_shows_no_negative_epoch_total_and_an_integer_version(tmp_path):
    unbounded = L.Trainer(max_steps=3, callbacks=[ProgressBar()], default_root_dir=tmp_path, logger=False)
    unbounded.progress_bar_callback.setup(unbounded, DemoNet(), "fit")
    bounded = L.Trainer(max_epochs=3, callbacks=[ProgressBar()], logger=L.pytorch.loggers.CSVLogger(tmp_path))
    bar = bounded.progress_bar_callback
    bar.setup(bounded, DemoNet(), "fit")
    if isinstance(bar, RichBar):  # Lightning >= 2.5 (its rich bar); tqdm shows no epoch total
        assert unbounded.progress_bar_callback.train_description(4).strip() == "Epoch 4"  # Lightning's: "Epoch 4/-2"
        assert bar.train_description(1).strip() == "Epoch 1/2"
    assert bar.get_metrics(bounded, DemoNet())["v_num"] == "0"  # Lightning's rich bar: "v_num: 0.000"


def test_configure_logging_sets_up_each_adapted_family_as_its_entry_point_did(tmp_path, monkeypatch):
    """Routed through the registry (``Family.configure_logging``): a Trainer with a Classy adapter gets the root
    logger at INFO, as ``classy_train.py`` set it, and the iMIX adapter the ``imix`` logger writing ``imix.log`` in
    its work dir; a Trainer with neither leaves the root logger as it was."""
    from classy_vision.hooks import LossLrMeterLoggingHook
    from imix.engine.hooks import IterationTimerHook

    from lightning_hooks import ClassyAdapter
    from lightning_hooks.console import configure_logging

    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.WARNING)
    monkeypatch.setattr(root, "handlers", [logging.NullHandler()])
    configure_logging(L.Trainer(logger=False, enable_progress_bar=False, default_root_dir=tmp_path))
    assert root.level == logging.WARNING
    callbacks = [ClassyAdapter([LossLrMeterLoggingHook()]), IMIXAdapter([IterationTimerHook()], work_dir=tmp_path / "imix")]
    configure_logging(L.Trainer(logger=False, enable_progress_bar=False, callbacks=callbacks, default_root_dir=tmp_path))
    assert root.level == logging.INFO
    assert any(type(f).__name__ == "DropMessages" for f in root.handlers[0].filters)  # Classy's EMA notice
    assert (tmp_path / "imix" / "imix.log").exists()
