"""Lightning resume: a fit resumed from a Lightning checkpoint carries on as mmcv's uninterrupted runner does
(counters, ``runner.meta``, LR schedule, EMA buffers the hooks registered on the model)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from mmcv_testkit import Module, Recorder, ToyModel, assert_same_weights, loader, mmcv_runner, run_mmcv, sgd, weights

from lightning_hooks import MMCVAdapter

R = mmcv_runner
pl = pytest.importorskip("lightning.pytorch")


def hooks():
    return [R.StepLrUpdaterHook(step=[2], warmup="linear", warmup_iters=7), R.OptimizerHook(),
            R.EMAHook(momentum=0.2, interval=1), R.CheckpointHook(interval=1), Recorder()]  # fmt: skip


def test_resumed_fit_continues_as_the_uninterrupted_runner(tmp_path):
    ref_hooks = hooks()
    real = run_mmcv(ref_hooks, tmp_path / "mmcv", max_epochs=3, meta=dict(exp_name="toy"))
    saver = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_top_k=-1, every_n_epochs=1)
    first = MMCVAdapter(hooks(), runner=dict(type="EpochBasedRunner", max_epochs=2), work_dir=tmp_path / "a",
                        meta=dict(exp_name="toy"))  # fmt: skip
    trainer = pl.Trainer(callbacks=[first, saver], max_epochs=2, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path / "a", num_sanity_val_steps=0)  # fmt: skip
    torch.manual_seed(0)
    trainer.fit(Module(ToyModel(), sgd), loader())
    resumed_hooks = hooks()
    resumed = MMCVAdapter(resumed_hooks, runner=dict(type="EpochBasedRunner", max_epochs=3), work_dir=tmp_path / "b")
    trainer = pl.Trainer(callbacks=[resumed], max_epochs=3, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, default_root_dir=tmp_path / "b")  # fmt: skip
    torch.manual_seed(1)  # other initial weights: the checkpoint must bring them back
    module = Module(ToyModel(), sgd)
    trainer.fit(module, loader(), ckpt_path=str(tmp_path / "ckpt" / "epoch=1-step=10.ckpt"))
    # mmcv's own resume from the file CheckpointHook wrote at the same point sees the same stream
    mmcv_resumed = hooks()
    run_mmcv(mmcv_resumed, tmp_path / "mmcv-resumed", max_epochs=3, resume_from=tmp_path / "mmcv" / "epoch_2.pth")
    ref, ours = mmcv_resumed[-1].seen, resumed_hooks[-1].seen
    assert ours == ref
    assert ours[0][:3] == ("before_run", 2, 10)
    uninterrupted = ref_hooks[-1].seen
    assert [s[:3] + s[4:] for s in ours[1:]] == [s[:3] + s[4:] for s in uninterrupted[_epoch_start(uninterrupted, 2):]]
    assert resumed.runner.meta["exp_name"] == "toy" and resumed.runner.meta["hook_msgs"]["last_ckpt"].endswith("epoch_3.pth")
    # EMA buffers included: mmcv's own resume loses them (they do not exist when it loads the file), Lightning's keeps them
    assert_same_weights(weights(real.model), weights(module.model))


def _epoch_start(stream, epoch):
    return next(i for i, seen in enumerate(stream) if seen[0] == "before_train_epoch" and seen[1] == epoch)


ITER_BASED = dict(type="IterBasedRunner", max_iters=14)  # N_BATCHES = 5 a pass: the resumed run crosses a pass's end
#: a checkpoint of adapter state format 1 (``epoch`` the loader's pass, 1), written by lightning-hooks at commit 4f978f6
#: (tests/helpers/old_format_checkpoints.py): IterBasedRunner, OptimizerHook and Recorder, saved at iteration 7 (mid-pass)
FORMAT_1 = Path(__file__).parent / "fixtures" / "mmcv_iter_based_format1.ckpt"


def _shuffled(*args, workers=0, **kwargs):
    """:func:`mmcv_testkit.loader`'s loader through a shuffling sampler with ``set_epoch`` (a DistributedSampler of
    one replica), with ``workers`` loader workers: each pass's order follows the epoch the sampler was given (with
    workers, when the pass's iterator is made)."""
    from torch.utils.data import DataLoader, DistributedSampler

    plain = loader(*args, **kwargs)
    sampler = DistributedSampler(plain.dataset, num_replicas=1, rank=0, shuffle=True, seed=3)
    return DataLoader(plain.dataset, batch_size=plain.batch_size, sampler=sampler, num_workers=workers)


class Batches(R.Hook):
    """Notes each train batch's first value and the sampler's epoch."""

    def __init__(self):
        self.seen = []

    def after_train_iter(self, runner):
        loader_ = getattr(runner.data_loader, "_dataloader", runner.data_loader)  # mmcv's IterLoader holds it there
        self.seen.append((runner.iter, round(float(runner.data_batch[0][0, 0]), 5), loader_.sampler.epoch))


def _fit_iter_based(work_dir, ckpt_path=None, callbacks=(), recorder=None, data=loader, runner=ITER_BASED):
    recorder = recorder or Recorder()
    adapter = MMCVAdapter([R.OptimizerHook(), recorder], runner=runner, work_dir=work_dir)
    trainer = pl.Trainer(callbacks=[adapter, *callbacks], logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=bool(callbacks), default_root_dir=work_dir,
                         limit_val_batches=0, **adapter.trainer_kwargs())  # fmt: skip
    torch.manual_seed(0)
    module = Module(ToyModel(), sgd)
    trainer.fit(module, data(), ckpt_path=ckpt_path)
    return recorder.seen, module


def _mmcv_resumed_after_7(tmp_path, recorder=None):
    """mmcv's IterBasedRunner: 7 iterations, its checkpoint saved there, resumed to 14 (``runner.resume``)."""
    real = run_mmcv([R.OptimizerHook()], tmp_path / "mmcv", runner="IterBasedRunner", max_epochs=None, max_iters=7)
    real.save_checkpoint(str(tmp_path / "mmcv"), filename_tmpl="at_7.pth", create_symlink=False)
    recorder = recorder or Recorder()
    resumed = run_mmcv([R.OptimizerHook(), recorder], tmp_path / "mmcv-resumed", runner="IterBasedRunner", max_epochs=None, max_iters=14,
                       resume_from=tmp_path / "mmcv" / "at_7.pth")  # fmt: skip
    return recorder.seen, resumed


def test_a_mid_pass_checkpoint_resumes_under_iter_based_runner_as_mmcvs_resume(tmp_path):
    """A Lightning checkpoint written inside a pass of the train loader (iteration 7, the 3rd batch of the 2nd pass)
    resumed under IterBasedRunner goes on as mmcv's ``runner.resume`` of its own file at that point: ``before_run`` /
    ``before_epoch`` at meta's epoch 2, then a new pass from the loader's first batch whose ``runner.epoch`` counts from
    0 (a new IterLoader), ``iter`` and ``inner_iter`` at every mount point, learning rate, final weights. And so does a
    checkpoint of adapter state format 1 (``epoch`` one lower), converted on load."""
    ref, real = _mmcv_resumed_after_7(tmp_path)
    assert ref[0][:3] == ("before_run", 2, 7) and ref[2][:3] == ("before_train_iter", 0, 7)
    saver = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=7, save_top_k=-1)
    _fit_iter_based(tmp_path / "a", callbacks=[saver])
    mid_pass = tmp_path / "ckpt" / "epoch=1-step=7.ckpt"
    assert torch.load(mid_pass)["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["processed"] == 2
    for ckpt in (mid_pass, FORMAT_1):
        seen, module = _fit_iter_based(tmp_path / ckpt.stem, ckpt_path=str(ckpt))
        assert seen == ref, ckpt.name
        assert_same_weights(weights(real.model), weights(module.model))


def test_the_sampler_numbers_the_passes_after_a_mid_pass_resume_as_mmcvs_iter_loader(tmp_path, monkeypatch):
    """Through a sampler with ``set_epoch`` (shuffling by it): resumed mid-pass, each pass draws the batches mmcv's
    resumed run draws, the sampler's epoch numbering the passes of the resumed run from 0 as its new ``IterLoader``
    does (Lightning would give it its own epoch): batches, sampler epochs, final weights. Resumed from a checkpoint
    without the adapter's state (Lightning's resume stands: the passes are Lightning's epochs), with a loader worker,
    whose indices are taken when the fit's first iterator is made (before ``before_epoch``, before Lightning sets the
    sampler's epoch): the pass of Lightning's epoch, as the uninterrupted fit drew it."""
    import mmcv_testkit

    monkeypatch.setattr(mmcv_testkit, "loader", _shuffled)  # run_mmcv's loaders
    ref = Batches()
    _, real = _mmcv_resumed_after_7(tmp_path, ref)
    assert [epoch for _, _, epoch in ref.seen] == [0] * 5 + [1, 1]
    saver = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=7, save_top_k=-1)
    at_pass_end = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "pass_end", every_n_train_steps=5, save_top_k=-1)
    whole = Batches()
    _fit_iter_based(tmp_path / "a", callbacks=[saver, at_pass_end], recorder=whole, data=_shuffled)
    mine = Batches()
    _, module = _fit_iter_based(tmp_path / "b", ckpt_path=str(tmp_path / "ckpt" / "epoch=1-step=7.ckpt"),
                                recorder=mine, data=_shuffled)  # fmt: skip
    assert mine.seen == ref.seen
    assert_same_weights(weights(real.model), weights(module.model))
    checkpoint = torch.load(tmp_path / "pass_end" / "epoch=0-step=5.ckpt", weights_only=False)
    checkpoint["callbacks"] = {k: v for k, v in checkpoint["callbacks"].items() if not k.startswith("MMCVAdapter")}
    torch.save(checkpoint, tmp_path / "without_state.ckpt")
    lightnings = Batches()
    _fit_iter_based(tmp_path / "c", ckpt_path=str(tmp_path / "without_state.ckpt"), recorder=lightnings,
                    data=functools.partial(_shuffled, workers=1))  # fmt: skip
    assert [seen[1:] for seen in lightnings.seen] == [seen[1:] for seen in whole.seen[5:]]
    assert [epoch for _, _, epoch in lightnings.seen] == [1] * 5 + [2] * 4


class SaveAtEnd(pl.Callback):
    """Saves the fit's checkpoint once it ended, as a user does before training a finished run further."""

    def __init__(self, path):
        self.path = path

    def on_train_end(self, trainer, pl_module):
        trainer.save_checkpoint(self.path)


@pytest.mark.parametrize("workers", [0, 1])
def test_later_fits_on_the_same_loader_start_from_its_sampler_as_later_iter_based_runs(tmp_path, monkeypatch,
                                                                                        workers):  # fmt: skip
    """Three IterBasedRunner runs in one process on one loader whose sampler has ``set_epoch`` (5 batches a pass):
    7 iterations, 7 more afresh, then the first's checkpoint resumed to 14. Each of mmcv's runs makes a new
    ``IterLoader``, which sets no epoch for its first pass: that pass draws the previous run's last epoch (1) again,
    and so does the next (``IterLoader`` sets 1). Three fits of new adapters and Trainers on one loader, the last
    resumed from the first's Lightning checkpoint, draw the same batches at the same sampler epochs: with a loader
    worker, whose indices are taken as the iterator is made (before Lightning sets the sampler's epoch), and without,
    drawn after."""
    import mmcv_testkit

    shared = _shuffled(workers=workers)
    monkeypatch.setattr(mmcv_testkit, "loader", lambda *args, **kwargs: shared)  # run_mmcv's loaders
    refs = [Batches(), Batches(), Batches()]
    first = run_mmcv([R.OptimizerHook(), refs[0]], tmp_path / "mmcv", runner="IterBasedRunner", max_epochs=None,
                     max_iters=7)  # fmt: skip
    first.save_checkpoint(str(tmp_path / "mmcv"), filename_tmpl="at_7.pth", create_symlink=False)
    run_mmcv([R.OptimizerHook(), refs[1]], tmp_path / "mmcv2", runner="IterBasedRunner", max_epochs=None, max_iters=7)
    run_mmcv([R.OptimizerHook(), refs[2]], tmp_path / "mmcv3", runner="IterBasedRunner", max_epochs=None, max_iters=14,
             resume_from=tmp_path / "mmcv" / "at_7.pth")  # fmt: skip
    assert [[epoch for *_, epoch in ref.seen] for ref in refs] == [[0] * 5 + [1] * 2, [1] * 7, [1] * 7]
    ours, cut = _shuffled(workers=workers), tmp_path / "cut.ckpt"
    seven = {**ITER_BASED, "max_iters": 7}
    fits = [dict(callbacks=[SaveAtEnd(cut)], runner=seven), dict(runner=seven), dict(ckpt_path=str(cut))]
    for n, (ref, fit) in enumerate(zip(refs, fits, strict=True)):
        mine = Batches()
        _fit_iter_based(tmp_path / f"fit{n}", recorder=mine, data=lambda: ours, **fit)
        assert mine.seen == ref.seen, f"fit {n}"


def test_a_fit_stopped_at_max_iters_inside_a_pass_resumes_under_iter_based_runner_as_mmcvs_resume(tmp_path):
    """IterBasedRunner stopped at ``max_iters`` 7 (inside the 2nd pass of 5 batches) and its checkpoint trained on to
    14 goes on as mmcv's ``runner.resume`` of the file it saves there: a new pass from the loader's first batch (5
    batches; Lightning's loop, restored as written, counts the cut pass's 2 batches into the next one), counters at
    every mount point, learning rate, final weights."""
    ref, real = _mmcv_resumed_after_7(tmp_path)
    cut = tmp_path / "cut.ckpt"
    _fit_iter_based(tmp_path / "a", callbacks=[SaveAtEnd(cut)], runner={**ITER_BASED, "max_iters": 7})
    assert torch.load(cut)["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["processed"] == 2
    seen, module = _fit_iter_based(tmp_path / "b", ckpt_path=str(cut))
    assert seen == ref
    assert_same_weights(weights(real.model), weights(module.model))
