"""Lightning's caution on a resume inside an epoch ("You're resuming from a checkpoint that ended before the epoch
ended and your dataloader is not resumable", ``lightning_api.MID_EPOCH_RESUME_WARNING``) in a user's own ``Trainer``
resumed with ``trainer.fit(..., ckpt_path=...)``: absent where the family's adapter rewrites the checkpoint to go on as
the host's own resume (MMEngine with an epoch-based ``train_cfg``: that epoch again from its first batch, as the
Runner), present where Lightning's resume stands and goes on other than the host (MMEngine without ``train_cfg``,
Classy, iMIX). mmcv 1.x's cases are ``tests/families/mmcv/test_resume_caution.py`` (``.venv-mmcv1``)."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import pytest
from resume_caution import SaveAt, cautions


def mmengine_fit(folder: Path, train_cfg: dict | None, callbacks: list = (), ckpt_path: str | None = None) -> None:
    """``mmengine_testkit``'s Toy in 2 epochs of 4 batches under ``MMEngineAdapter`` (with MMEngine's default hooks)
    in a Trainer of the user's, with ``train_cfg``'s loop or the Trainer's own."""
    from lh_testing import load_options
    from mmengine_testkit import LitToy, loaders, make_model

    from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks

    adapter = MMEngineAdapter(build_hooks(), work_dir=folder, train_cfg=train_cfg)
    loop = adapter.trainer_kwargs() if train_cfg else dict(max_epochs=2)
    trainer = pl.Trainer(callbacks=[adapter, *callbacks], default_root_dir=folder, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, **loop)  # fmt: skip
    trainer.fit(LitToy(make_model()), loaders()[0], ckpt_path=ckpt_path, **load_options(ckpt_path and False))


@pytest.mark.parametrize("train_cfg", [dict(by_epoch=True, max_epochs=2), None], ids=["epoch-based", "own-loop"])
def test_mmengine(tmp_path, train_cfg):
    """Saved after the 2nd of an epoch's 4 batches (where MMEngine's CheckpointHook by iteration saves too)."""
    mmengine_fit(tmp_path / "a", train_cfg, callbacks=[SaveAt(tmp_path / "2.ckpt", 2)])
    resumed = lambda: mmengine_fit(tmp_path / "b", train_cfg, ckpt_path=str(tmp_path / "2.ckpt"))  # noqa: E731
    assert cautions(resumed) == (0 if train_cfg else 1)


def test_classy(tmp_path):
    """Classy's own resume starts at a phase's start: a checkpoint inside an epoch has no Classy counterpart."""
    from classy_real import Recorder
    from classy_testkit import Net, loader, make_trainer

    from lightning_hooks import ClassyAdapter

    make_trainer(tmp_path / "a", [ClassyAdapter([Recorder()]), SaveAt(tmp_path / "2.ckpt", 2)]).fit(Net(), loader())
    resumed = lambda: make_trainer(tmp_path / "b", [ClassyAdapter([Recorder()])]).fit(  # noqa: E731
        Net(), loader(), ckpt_path=str(tmp_path / "2.ckpt"))
    assert cautions(resumed) == 1


def test_imix(tmp_path):
    """iMIX's ``resume_or_load`` resumes at an epoch's start only: a checkpoint inside one has no iMIX counterpart."""
    from imix_reference import config, fit

    fit(config(tmp_path / "a"), callbacks=[SaveAt(tmp_path / "3.ckpt", 3)])
    resumed = lambda: fit(config(tmp_path / "b"), ckpt_path=str(tmp_path / "3.ckpt"))  # noqa: E731
    assert cautions(resumed) == 1
