"""Two runs in one process (a notebook, a sweep, a test suite) each write to their own work dir.

OpenMMLab's configs name their visualizer (``visualizer = dict(type="SegLocalVisualizer", name="visualizer")``), and
``VISUALIZERS.build`` hands back an existing instance of that name: the second run would write its scalars and images
into the first run's ``{timestamp}/vis_data/``.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from mmengine_testkit import LitToy, loaders, make_model

from lightning_hooks.families.mmengine import MMEngineAdapter

VISUALIZER = dict(type="Visualizer", name="visualizer", vis_backends=[dict(type="LocalVisBackend")])


def fit(work_dir: Path) -> MMEngineAdapter:
    adapter = MMEngineAdapter.from_config(visualizer=dict(VISUALIZER), work_dir=str(work_dir),
                                          default_hooks=dict(logger=dict(type="LoggerHook", interval=1)))  # fmt: skip
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    trainer.fit(LitToy(make_model()), *loaders(n_train=8))
    return adapter


def test_a_second_run_with_a_named_visualizer_writes_its_scalars_to_its_own_work_dir(tmp_path: Path) -> None:
    first, second = fit(tmp_path / "first"), fit(tmp_path / "second")
    assert second.runner.visualizer is not first.runner.visualizer
    for adapter, work_dir in ((first, tmp_path / "first"), (second, tmp_path / "second")):
        (scalars,) = work_dir.glob("*/vis_data/scalars.json")
        assert len(scalars.read_text().splitlines()) == 2 + 1  # two iterations, one validation
        assert scalars.parent.parent.name == adapter.runner.timestamp
