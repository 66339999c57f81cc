"""Writes the Lightning checkpoints of the adapter state format before ``"format"`` (format 1) that the tests of its
conversion resume: run it with the package and test helpers of a checkout of lightning-hooks at commit 4f978f6 first
on the path (``git worktree add /tmp/old 4f978f6``), once per family, in the family's venv::

    PYTHONPATH=/tmp/old:/tmp/old/tests/helpers .venv/bin/python tests/helpers/old_format_checkpoints.py imix \\
        tests/families/imix/fixtures
    PYTHONPATH=/tmp/old:/tmp/old/tests/helpers .venv-mmcv1/bin/python tests/helpers/old_format_checkpoints.py \\
        mmcv tests/families/mmcv/fixtures

``imix``: ``imix_reference``'s config trained one epoch (6 iterations) under Lightning, checkpointed at the epoch's
last batch (``imix_at_last_batch_format1.ckpt``, before ``after_train_epoch``) and at its end
(``imix_epoch_end_format1.ckpt``). ``mmcv``: ``mmcv_testkit``'s toy model under ``IterBasedRunner`` (``max_iters=14``,
``N_BATCHES`` = 5 a pass) with ``OptimizerHook`` and ``mmcv_testkit.Recorder``, checkpointed at iteration 7, inside the
loader's second pass (``mmcv_iter_based_format1.ckpt``)."""

from __future__ import annotations

import sys
from pathlib import Path
from tempfile import TemporaryDirectory


def imix(out: Path) -> None:
    """The two iMIX checkpoints (see the module's docstring)."""
    from imix_reference import config, fit
    from lightning.pytorch.callbacks import ModelCheckpoint

    with TemporaryDirectory() as tmp:
        work = Path(tmp)
        last = ModelCheckpoint(dirpath=work / "end", save_last=True, save_top_k=0)
        at_last_batch = ModelCheckpoint(dirpath=work / "batch", every_n_train_steps=6)
        fit(config(work / "run", total_epochs=1), callbacks=[last, at_last_batch], enable_checkpointing=True)
        (work / "end" / "last.ckpt").rename(out / "imix_epoch_end_format1.ckpt")
        [batch] = (work / "batch").glob("*.ckpt")
        batch.rename(out / "imix_at_last_batch_format1.ckpt")


def mmcv(out: Path) -> None:
    """The mmcv ``IterBasedRunner`` checkpoint (see the module's docstring)."""
    import lightning.pytorch as pl
    import torch
    from mmcv.runner import OptimizerHook
    from mmcv_testkit import Module, Recorder, ToyModel, loader, sgd

    from lightning_hooks import MMCVAdapter

    with TemporaryDirectory() as tmp:
        adapter = MMCVAdapter([OptimizerHook(), Recorder()], runner=dict(type="IterBasedRunner", max_iters=14),
                              work_dir=tmp)  # fmt: skip
        saver = pl.callbacks.ModelCheckpoint(dirpath=Path(tmp) / "ckpt", every_n_train_steps=7, save_top_k=-1)
        trainer = pl.Trainer(callbacks=[adapter, saver], logger=False, enable_progress_bar=False,
                             enable_model_summary=False, default_root_dir=tmp, limit_val_batches=0,
                             **adapter.trainer_kwargs())  # fmt: skip
        torch.manual_seed(0)
        trainer.fit(Module(ToyModel(), sgd), loader())
        (Path(tmp) / "ckpt" / "epoch=1-step=7.ckpt").rename(out / "mmcv_iter_based_format1.ckpt")


if __name__ == "__main__":
    family, folder = sys.argv[1], Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    {"imix": imix, "mmcv": mmcv}[family](folder)
