"""iMIX's own engine is the reference: one config, trained by ``imixEngine`` (imix_reference.train) and by Lightning
with IMIXAdapter driving the hooks iMIX's Organizer built from it (imix_reference.fit). Both must show the same event
stream with the same counters at every mount point, the same log buffer, learning rates, weights, checkpoint files,
JSON status log, TensorBoard scalars and log lines (wall-clock times aside): imix_reference.assert_runs_as_imix.
The tests the README names for single hooks run the cases that show them, beside their other tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from imix.engine.hooks import PriorityStatus
from imix_reference import (Recorder, SwitchOffNoise, assert_runs_as_imix, assert_same, checkpoints, config, fit, organize,
                            recorder, train)  # fmt: skip  # names aligned under the import
from lightning.pytorch.callbacks import ModelCheckpoint

from lightning_hooks import IMIXAdapter
from lightning_hooks.compat import imix as compat
from lightning_hooks.core.adapter_state import StateFormatError

CASES = {
    "by_epoch": dict(),
    "by_epoch-fp16-accumulate-clip": dict(
        fp16=dict(init_scale=2.0**16), gradient_accumulation_steps=3,
        optimizer_config=dict(grad_clip=dict(max_norm=0.5)),
    ),
    # by iteration: iMIX's train_by_iter makes one pass over the loader (max_iter only tells the hooks); CheckPointHook
    # by iteration crashes on an iteration it does not save (imix 0.1.0), so it saves every iteration here
    "by_iter": dict(by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=1)),
    "by_iter-accumulate": dict(by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=1),
                               gradient_accumulation_steps=2),
    "by_iter-fp16-clip": dict(by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=1), fp16=dict(),
                              optimizer_config=dict(grad_clip=dict(max_norm=0.5))),
    # no hook owns the step: Lightning optimises (imix_reference.LightningStep in the engine)
    "lightning_steps-by_epoch": dict(lightning_steps=True),
    "lightning_steps-by_epoch-accumulate": dict(lightning_steps=True, gradient_accumulation_steps=2),
    "lightning_steps-by_iter-accumulate-no_lr_accumulation": dict(
        lightning_steps=True, by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=1),
        gradient_accumulation_steps=2, is_lr_accumulation=False),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore::UserWarning")  # GradScaler / autocast without CUDA: disabled, as under iMIX
@pytest.mark.parametrize("case", CASES)
def test_lightning_runs_the_config_as_imix_engine(tmp_path, case):
    assert_runs_as_imix(tmp_path, **CASES[case])


@pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's note on a checkpoint written before an epoch's end
def test_resume_continues_as_imix_resumes_from_its_checkpoint_hook_files(tmp_path):
    """iMIX trains one epoch, then resumes from CheckPointHook's file (Organizer.resume_or_load: model, optimizer,
    scheduler, start_iter / start_epoch) for the second; Lightning trains one epoch, then resumes from its own
    checkpoint, written at the epoch's end or at its last batch (before ``after_train_epoch``: iMIX writes no file
    there, ``_is_save_epoch_state``; its epoch file, written right after, holds the same iterations and resumes at
    ``epoch + 1``, iteration ``epoch_iter``). And iMIX resumes from the file CheckPointHook wrote under Lightning just
    as from its own."""
    first = "TinyNet_TinyData_epoch0(6iters)_model.pth"
    train(config(tmp_path / "imix-1", total_epochs=1))
    engine = train(config(tmp_path / "imix-2", resume_from=str(tmp_path / "imix-1" / first)))
    last = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    at_last_batch = ModelCheckpoint(dirpath=tmp_path / "at-last-batch", every_n_train_steps=6)
    fit(config(tmp_path / "lightning-1", total_epochs=1), callbacks=[last, at_last_batch], enable_checkpointing=True)
    organizer = fit(config(tmp_path / "lightning-2"), ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))[0]
    [batch_ckpt] = (tmp_path / "at-last-batch").glob("*.ckpt")
    [state] = [s for k, s in torch.load(batch_ckpt)["callbacks"].items() if k.startswith("IMIXAdapter")]
    imix_file = torch.load(tmp_path / "imix-1" / first, weights_only=False)  # resume_or_load's epoch + 1, epoch_iter
    assert state["host"]["loop"] == {"epoch": imix_file["epoch"] + 1, "iter": imix_file["epoch_iter"],
                                     "inner_iter": imix_file["epoch_inner_iter"]} == {"epoch": 1, "iter": 6, "inner_iter": 5}
    from_batch = fit(config(tmp_path / "lightning-3"), ckpt_path=str(batch_ckpt))[0]
    crossed = train(config(tmp_path / "imix-from-lightning", resume_from=str(tmp_path / "lightning-1" / first)))

    ref = recorder(engine._hooks)
    assert ref.events[0][:5] == ("before_train", 6, None, None, 6)  # resumed at iteration 6, epoch 1
    assert ref.events[1][:4] == ("before_train_epoch", 6, None, 1) and ref.events[2][:4] == ("before_train_iter", 6, 0, 1)
    for hooks, model, work_dir in [(organizer.hooks, organizer.model, "lightning-2"),
                                   (from_batch.hooks, from_batch.model, "lightning-3"),
                                   (crossed._hooks, crossed.model, "imix-from-lightning")]:  # fmt: skip
        mine = recorder(hooks)
        assert (mine.events, mine.scalars, mine.lrs, mine.history) == (ref.events, ref.scalars, ref.lrs, ref.history)
        assert_same(model.state_dict(), engine.model.state_dict(), "weights")
        assert_same(checkpoints(tmp_path / work_dir), checkpoints(tmp_path / "imix-2"))


@pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's note on a checkpoint written before an epoch's end
def test_a_loader_worker_resumed_into_an_epoch_whose_hook_switches_the_data_goes_on_as_imix(tmp_path):
    """One loader worker, a shuffled dataset with noise drawn in the worker (imix_reference.noisy_data) and a hook that
    turns the noise off in ``before_train_epoch`` from epoch 1 on (imix_reference.SwitchOffNoise): resumed for epoch 1
    (iMIX from CheckPointHook's file, Lightning from its checkpoint), the worker forks the dataset as the hook left it
    and draws its seed after it, as iMIX's engine iterates the loader after ``before_train_epoch``: the same events,
    scalars, learning rates and weights."""
    data = dict(dataset_type="NoisyData", train_data=dict(batches=6, workers=1),
                custom_hooks=[dict(type=Recorder, level=PriorityStatus.LOWEST), dict(type=SwitchOffNoise, epoch=1)])  # fmt: skip
    train(config(tmp_path / "imix-1", total_epochs=1, **data))
    [first] = (tmp_path / "imix-1").glob("*epoch0*_model.pth")
    engine = train(config(tmp_path / "imix-2", resume_from=str(first), **data))
    last = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    fit(config(tmp_path / "lightning-1", total_epochs=1, **data), callbacks=[last], enable_checkpointing=True)
    organizer = fit(config(tmp_path / "lightning-2", **data), ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))[0]
    ref, mine = recorder(engine._hooks), recorder(organizer.hooks)
    assert ref.events[1][:4] == ("before_train_epoch", 6, None, 1)  # resumed at epoch 1
    assert (mine.events, mine.scalars, mine.lrs, mine.history) == (ref.events, ref.scalars, ref.lrs, ref.history)
    assert_same(organizer.model.state_dict(), engine.model.state_dict(), "weights")


def test_levels_order_hooks_as_imix_add_custom_hooks(tmp_path):
    """The adapter orders the Organizer's hooks plus ``cfg.custom_hooks`` (built by compat.build_custom_hooks) as
    iMIX's add_custom_hooks inserts them (for levels it does not crash on: none below every hook)."""

    def custom():
        return [dict(type="TextLoggerHook", text=text, level=level) for text, level in
                [("low", PriorityStatus.LOW), ("high", 20), ("normal", PriorityStatus.NORMAL), ("lower", 50),
                 ("high2", PriorityStatus.HIGH)]]  # fmt: skip

    organizer = organize(config(tmp_path, custom_hooks=custom()))
    built = organize(config(tmp_path, custom_hooks=[]))
    adapter = IMIXAdapter(built.hooks + compat.build_custom_hooks(custom()))
    names = [[getattr(h, "text", type(h).__name__) for h in hooks] for hooks in (adapter.hooks, organizer.hooks)]
    assert names[0] == names[1]
    assert names[1] == ["OptimizerHook", "LRSchedulerHook", "high", "high2", "IterationTimerHook", "PeriodicLogger",
                        "CheckPointHook", "normal", "low", "lower"]  # fmt: skip


def test_max_iter_is_kept_per_fit_and_follows_the_batches_per_epoch():
    """``max_iter``, read by hooks every iteration, is computed once per batch count of the fit (a reloaded loader of
    another length changes it) and again for the next fit's trainer."""
    from types import SimpleNamespace

    from imix.engine.hooks import IterationTimerHook

    engine = IMIXAdapter([IterationTimerHook()], cfg=dict(total_epochs=2)).engine

    def trainer(batches):
        return SimpleNamespace(fit_loop=SimpleNamespace(max_batches=batches), max_epochs=2, num_training_batches=batches,
                               max_steps=-1)  # fmt: skip

    engine._attach(run := trainer(5))
    assert engine.max_iter == 10
    run.fit_loop.max_batches = run.num_training_batches = 4
    assert engine.max_iter == 8
    engine._attach(trainer(4))
    engine.lightning.max_epochs = 3
    assert engine.max_iter == 12


#: checkpoints of adapter state format 1, written by lightning-hooks at commit 4f978f6 (tests/helpers/
#: old_format_checkpoints.py): the config trained one epoch, saved at its last batch and at its end
FORMAT_1 = Path(__file__).parent / "fixtures"


@pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's note on a checkpoint written before an epoch's end
def test_checkpoints_of_state_format_1_resume_as_imix_resumes_its_own_file(tmp_path):
    """Format 1 kept the epoch at its last batch as the current one (``epoch`` 0 there): converted on load (epoch 1,
    as iMIX's epoch file resumes at ``epoch + 1``), both of 4f978f6's checkpoints go on as imixEngine from
    CheckPointHook's epoch file: events with their counters, scalars, learning rates, log buffer history, weights,
    checkpoint files. Given alone, without the checkpoint that tells the two apart, the state is refused."""
    first = "TinyNet_TinyData_epoch0(6iters)_model.pth"
    train(config(tmp_path / "imix-1", total_epochs=1))
    engine = train(config(tmp_path / "imix-2", resume_from=str(tmp_path / "imix-1" / first)))
    ref = recorder(engine._hooks)
    for name in ("imix_at_last_batch_format1.ckpt", "imix_epoch_end_format1.ckpt"):
        [state] = [s for k, s in torch.load(FORMAT_1 / name)["callbacks"].items() if k.startswith("IMIXAdapter")]
        assert "format" not in state
        organizer = fit(config(tmp_path / name), ckpt_path=str(FORMAT_1 / name))[0]
        mine = recorder(organizer.hooks)
        assert (mine.events, mine.scalars, mine.lrs, mine.history) == (ref.events, ref.scalars, ref.lrs, ref.history), name
        assert_same(organizer.model.state_dict(), engine.model.state_dict(), "weights")
        assert_same(checkpoints(tmp_path / name), checkpoints(tmp_path / "imix-2"))
    adapter = IMIXAdapter(organize(config(tmp_path / "alone")).hooks, cfg=config(tmp_path / "alone"))
    with pytest.raises(StateFormatError, match=r"IMIXAdapter \(.*\): the state given to load_state_dict holds imix "
                                               r"adapter state of format 1, .*resume it with trainer\.fit\(ckpt_path"):  # fmt: skip
        adapter.load_state_dict(state)
