"""A fit with nothing left to train (resumed from the checkpoint of a finished run): mmcv's ``runner.run`` still
calls ``before_run`` and ``after_run`` (IterBasedRunner also ``before_epoch`` / ``after_epoch``) around its empty
loop, while Lightning skips its fit loop; the adapter's translation against mmcv's own runners."""

from __future__ import annotations

import pytest
import torch
from mmcv_testkit import N_BATCHES, Module, ToyModel, loader, mmcv_runner, run_mmcv, sgd

from lightning_hooks import MMCVAdapter

pl = pytest.importorskip("lightning.pytorch")


class Mounts(mmcv_runner.Hook):
    """Notes (mount point, epoch, iter) at the run's mount points and every train epoch's and iteration's."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []


for _mount in ("before_run", "after_run", "before_epoch", "after_epoch", "before_train_epoch", "after_train_epoch",
               "before_train_iter", "after_train_iter"):  # fmt: skip  # the mount points, listed on two lines
    setattr(Mounts, _mount, lambda self, runner, _m=_mount: self.seen.append((_m, runner.epoch, runner.iter)))


def _fit(runner: dict, work_dir, ckpt_path=None, after=None) -> tuple[Mounts, pl.Trainer]:
    """A fit of the toy module; ``after``: an mmcv checkpoint's (epoch, iter) to go on from (``start_after``)."""
    mounts = Mounts()
    adapter = MMCVAdapter([mounts], runner=runner, work_dir=work_dir)
    if after is not None:
        adapter.start_after(*after)
    trainer = pl.Trainer(callbacks=[adapter], logger=False, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, default_root_dir=work_dir, limit_val_batches=0,
                         **adapter.trainer_kwargs())  # fmt: skip
    torch.manual_seed(0)
    trainer.fit(Module(ToyModel(), sgd), loader(), ckpt_path=ckpt_path)
    return mounts, trainer


@pytest.mark.parametrize(
    "runner", [dict(type="EpochBasedRunner", max_epochs=2), dict(type="IterBasedRunner", max_iters=2 * N_BATCHES)],
    ids=["EpochBasedRunner", "IterBasedRunner"],
)  # fmt: skip
def test_resuming_a_finished_run_fires_the_empty_run_as_mmcvs_runner(tmp_path, runner):
    kind, limits = runner["type"], {k: v for k, v in runner.items() if k != "type"}
    if kind == "EpochBasedRunner":  # its CheckpointHook saves the last epoch as finished
        run_mmcv([mmcv_runner.CheckpointHook(interval=1)], tmp_path / "mmcv", runner=kind, **limits)
        finished = tmp_path / "mmcv" / "epoch_2.pth"
    else:  # IterBasedRunner's CheckpointHook saves before the iteration counts: the run's end, saved after it
        real = run_mmcv([], tmp_path / "mmcv", runner=kind, **limits)
        real.save_checkpoint(str(tmp_path / "mmcv"), filename_tmpl="finished.pth", create_symlink=False)
        finished = tmp_path / "mmcv" / "finished.pth"
    reference = Mounts()
    run_mmcv([reference], tmp_path / "mmcv2", runner=kind, resume_from=finished, **limits)

    _, first = _fit(runner, tmp_path / "a")
    first.save_checkpoint(tmp_path / "finished.ckpt")
    ours, _ = _fit(runner, tmp_path / "b", ckpt_path=str(tmp_path / "finished.ckpt"))

    assert "after_run" in [mount for mount, *_ in reference.seen]  # mmcv runs its loop, empty
    assert ours.seen == reference.seen
    # the counters in our checkpoint are those of mmcv's meta (IterBasedRunner's epoch + 1): either resumes the other's
    [state] = [s["host"] for k, s in torch.load(tmp_path / "finished.ckpt")["callbacks"].items() if k.startswith("MMCV")]
    meta = torch.load(finished, weights_only=False)["meta"]
    assert (state["epoch"], state["iter"]) == (meta["epoch"], meta["iter"])
    if kind == "IterBasedRunner":  # and from mmcv's file, as train --resume-from starts a fit (start_after)
        assert (meta["epoch"], meta["iter"]) == (2, 2 * N_BATCHES)
        assert _fit(runner, tmp_path / "c", after=(meta["epoch"], meta["iter"]))[0].seen == reference.seen
