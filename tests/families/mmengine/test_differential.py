"""Differential runs: the same model, data, seed and hooks under MMEngine's Runner and under Lightning + adapter."""

from __future__ import annotations

import itertools
import pickle
import re
import warnings
from types import SimpleNamespace

import lightning.pytorch as pl
import pytest
import torch
from mmengine_testkit import (
    LitToy,
    RecorderHook,
    assert_same_tensors,
    files,
    hook_of,
    loaders,
    make_model,
    run_lightning,
    run_mmengine,
    unprefixed,
)
from mmengine.hooks import EMAHook, Hook
from packaging.version import Version
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from lightning_hooks.core import lightning_api
from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks

EMA_CKPT = dict(
    default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1, max_keep_ckpts=2)),
    custom_hooks=[dict(type="RecorderHook"), dict(type="EMAHook", momentum=0.2)],
)


def test_mmengine_ema_checkpoint_validation_match_runner(tmp_path):
    runner = run_mmengine(tmp_path / "mm", **EMA_CKPT)
    trainer, adapter, module = run_lightning(tmp_path / "lt", **EMA_CKPT)

    mm_rec, lt_rec = hook_of(runner.hooks, RecorderHook), hook_of(adapter.hooks, RecorderHook)
    assert lt_rec.events == mm_rec.events
    # Lightning's self.log stores float32: equal to MMEngine's float64 metric up to float32 rounding
    assert [m["toy/mse"] for m in lt_rec.metrics] == [pytest.approx(m["toy/mse"], rel=1e-6) for m in mm_rec.metrics]
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    mm_ema, lt_ema = hook_of(runner.hooks, EMAHook), hook_of(adapter.hooks, EMAHook)
    assert_same_tensors(unprefixed(lt_ema.ema_model.state_dict()), mm_ema.ema_model.state_dict())
    assert files(tmp_path / "lt") == files(tmp_path / "mm") == {"epoch_2.pth", "epoch_3.pth"}
    assert (tmp_path / "lt" / "last_checkpoint").read_text().endswith("epoch_3.pth")

    mm_ckpt = torch.load(tmp_path / "mm" / "epoch_3.pth", weights_only=False)
    lt_ckpt = torch.load(tmp_path / "lt" / "epoch_3.pth", weights_only=False)
    assert mm_ckpt.keys() <= lt_ckpt.keys()  # MMEngine's layout, plus Lightning's own keys
    assert_same_tensors(unprefixed(lt_ckpt["state_dict"]), mm_ckpt["state_dict"])  # EMA weights swapped in
    assert_same_tensors(unprefixed(lt_ckpt["ema_state_dict"]), mm_ckpt["ema_state_dict"])
    assert {k: lt_ckpt["meta"][k] for k in ("epoch", "iter")} == {k: mm_ckpt["meta"][k] for k in ("epoch", "iter")}
    assert len(lt_rec.checkpoint_keys) == len(mm_rec.checkpoint_keys) == 3
    for mm_keys, lt_keys in zip(mm_rec.checkpoint_keys, lt_rec.checkpoint_keys):
        assert set(mm_keys) <= set(lt_keys)  # what before_save_checkpoint sees: MMEngine's layout (+ Lightning's)



def test_mmengine_by_iter_checkpointing_matches_runner(tmp_path):
    hooks = dict(
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=5, by_epoch=False, max_keep_ckpts=2)),
        custom_hooks=[dict(type="RecorderHook")],
    )
    runner = run_mmengine(tmp_path / "mm", **hooks)
    _, adapter, module = run_lightning(tmp_path / "lt", **hooks)

    assert hook_of(adapter.hooks, RecorderHook).events == hook_of(runner.hooks, RecorderHook).events
    assert files(tmp_path / "lt") == files(tmp_path / "mm") == {"iter_10.pth", "iter_12.pth"}  # + save_last
    mm_ckpt = torch.load(tmp_path / "mm" / "iter_10.pth", weights_only=False)
    lt_ckpt = torch.load(tmp_path / "lt" / "iter_10.pth", weights_only=False)
    assert lt_ckpt["meta"]["iter"] == mm_ckpt["meta"]["iter"] == 10
    assert_same_tensors(unprefixed(lt_ckpt["state_dict"]), mm_ckpt["state_dict"])
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


class Passes(BatchSampler):
    """``loaders()``' 16 training samples in order, 4 per batch; pass ``i`` stops after ``batches[i]`` batches
    (``len`` stays 4: the Runner sizes its loop from it)."""

    def __init__(self, batches: list[int]) -> None:
        super().__init__(SequentialSampler(range(16)), batch_size=4, drop_last=False)
        self.batches, self.passes = batches, 0

    def __iter__(self):
        n, self.passes = self.batches[self.passes], self.passes + 1
        return itertools.islice(super().__iter__(), n)


def test_mmengine_max_steps_mid_epoch_ends_the_epoch_like_a_runner_epoch_cut_short(tmp_path):
    # Trainer(max_steps=6) stops 2 batches into the 2nd of 4-batch epochs. Reference: the Runner whose 2nd epoch has
    # only those 2 batches. It still ends that epoch: after_train_epoch, and CheckpointHook saves epoch_2.pth.
    hooks = dict(default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1)),
                 custom_hooks=[dict(type="RecorderHook")])
    train, _ = loaders()
    cut_short = DataLoader(train.dataset, batch_sampler=Passes([4, 2]))
    runner = run_mmengine(tmp_path / "mm", max_epochs=2, val=False, train=cut_short, **hooks)
    _, adapter, module = run_lightning(tmp_path / "lt", max_epochs=3, max_steps=6, val=False, **hooks)

    mm_events = hook_of(runner.hooks, RecorderHook).events
    assert mm_events[-4:] == [("after_train_epoch", 1, 6, None), ("before_save_checkpoint", 1, 6, None),
                              ("after_train", 2, 6, None), ("after_run", 2, 6, None)]
    assert hook_of(adapter.hooks, RecorderHook).events == mm_events
    assert files(tmp_path / "lt") == files(tmp_path / "mm") == {"epoch_1.pth", "epoch_2.pth"}
    mm_meta = torch.load(tmp_path / "mm" / "epoch_2.pth", weights_only=False)["meta"]
    lt_meta = torch.load(tmp_path / "lt" / "epoch_2.pth", weights_only=False)["meta"]
    assert (lt_meta["epoch"], lt_meta["iter"]) == (mm_meta["epoch"], mm_meta["iter"]) == (2, 6)
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    # the epochs the run trains, not Trainer(max_epochs=3)
    assert adapter.runner.message_hub.get_info("max_epochs") == runner.message_hub.get_info("max_epochs") == 2


def test_mmengine_max_iters_is_the_limit_that_ends_the_run_first(tmp_path):
    # Trainer(max_epochs=2, max_steps=100) ends after 2 epochs of 4 batches, as Runner(max_epochs=2): max_iters is 8,
    # so CheckpointHook(by_epoch=False, save_last=True) saves the last iteration
    hooks = dict(default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=5, by_epoch=False, save_last=True)),
                 custom_hooks=[dict(type="RecorderHook")])
    runner = run_mmengine(tmp_path / "mm", max_epochs=2, **hooks)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, adapter, _ = run_lightning(tmp_path / "lt", max_epochs=2, max_steps=100, **hooks)
    assert not [w for w in caught if "MMEngineAdapter" in str(w.message)]  # max_epochs ends it: nothing to warn of

    assert adapter.runner.max_iters == runner.max_iters == 8
    assert adapter.runner.message_hub.get_info("max_iters") == runner.message_hub.get_info("max_iters")
    assert hook_of(adapter.hooks, RecorderHook).events == hook_of(runner.hooks, RecorderHook).events
    assert files(tmp_path / "lt") == files(tmp_path / "mm") == {"iter_5.pth", "iter_8.pth"}


def test_mmengine_per_iteration_reads_follow_the_loader_lightning_reloads_each_epoch(tmp_path):
    # what hooks read every iteration (train_dataloader, max_iters, optim_wrapper) is computed once per train epoch:
    # with Trainer(reload_dataloaders_every_n_epochs=1) each epoch's reads see the loader Lightning reloaded for it
    class Probe(Hook):
        def __init__(self) -> None:
            self.seen: list[tuple[int, int, int]] = []

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
            assert runner.optim_wrapper is runner.trainer.lightning_module.optim_wrapper  # the wrapper that steps
            assert runner.optim_wrapper.optimizer.optimizer is runner.trainer.optimizers[0]  # in a LightningOptimizer
            self.seen.append((runner.epoch, len(runner.train_dataloader), runner.max_iters))

    class Shrinking(LitToy):
        def train_dataloader(self) -> DataLoader:
            return loaders(n_train=16 if self.current_epoch == 0 else 8)[0]  # 4 batches, then 2

    probe = Probe()
    adapter = MMEngineAdapter([probe], work_dir=tmp_path)
    with pytest.raises(AttributeError, match=r"runner.optim_wrapper: the Lightning trainer has no optimizer \(yet\)"):
        adapter.runner.optim_wrapper  # the attribute's own reason, not "the facade has no attribute"
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=3, reload_dataloaders_every_n_epochs=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(Shrinking(make_model()))
    # max_iters: the Trainer's max_epochs times the current loader's batches, as Lightning estimates the run
    assert probe.seen == [(0, 4, 12)] * 4 + [(1, 2, 6)] * 2 + [(2, 2, 6)] * 2
    with pytest.raises(AttributeError, match="runner.max_iters is read-only under lightning-hooks"):
        adapter.runner.max_iters = 6


def test_mmengine_second_fit_with_the_same_adapter_runs_like_a_new_runner(tmp_path):
    # a two-stage recipe: each stage is a new Runner in MMEngine, a new fit of the same adapter under Lightning
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook")])
    schedulers = [dict(type="MultiStepLR", by_epoch=True, milestones=[1], gamma=0.1)]
    runner = run_mmengine(tmp_path / "mm", max_epochs=2, val=False, param_scheduler=schedulers, **hooks)
    adapter = MMEngineAdapter(build_hooks(**hooks), work_dir=tmp_path / "lt", param_schedulers=schedulers)
    recorder = hook_of(adapter.hooks, RecorderHook)
    for _ in range(2):
        start = len(recorder.events)
        trainer = pl.Trainer(callbacks=[adapter], max_epochs=2, default_root_dir=tmp_path / "lt", logger=False,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        module = LitToy(make_model())
        trainer.fit(module, loaders()[0])
        assert recorder.events[start:] == hook_of(runner.hooks, RecorderHook).events
        # the schedulers step this fit's optimizer, not the previous fit's
        lr = trainer.optimizers[0].param_groups[0]["lr"]
        assert lr == runner.optim_wrapper.get_lr()["lr"][0] == pytest.approx(0.01)
        assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


def test_mmengine_early_stopping_stops_lightning_like_runner(tmp_path):
    # toy/mse falls every epoch, so with rule="greater" it never improves: patience 1 stops after the 2nd epoch
    hooks = dict(
        default_hooks=dict(checkpoint=None),
        custom_hooks=[
            dict(type="RecorderHook"),
            dict(type="EarlyStoppingHook", monitor="toy/mse", rule="greater", patience=1, min_delta=0.0),
        ],
    )
    runner = run_mmengine(tmp_path / "mm", max_epochs=6, **hooks)
    trainer, adapter, module = run_lightning(tmp_path / "lt", max_epochs=6, **hooks)

    mm_events = hook_of(runner.hooks, RecorderHook).events
    assert hook_of(adapter.hooks, RecorderHook).events == mm_events
    assert runner.train_loop.stop_training and trainer.should_stop
    assert trainer.current_epoch == runner.epoch == 2 < 6
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


class StopAtIter1(Hook):
    """A divergence guard: asks the train loop to stop in the middle of the first epoch."""

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter == 1:
            runner.train_loop.stop_training = True


def test_mmengine_stop_training_mid_epoch_finishes_the_epoch_and_its_validation_like_runner(tmp_path):
    # EpochBasedTrainLoop reads stop_training between epochs only: the epoch, after_train_epoch and validation finish
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook"), StopAtIter1()])
    runner = run_mmengine(tmp_path / "mm", max_epochs=3, **hooks)
    trainer, adapter, module = run_lightning(tmp_path / "lt", max_epochs=3, **hooks)

    mm_events = hook_of(runner.hooks, RecorderHook).events
    assert ("after_val", 1, 4, None) in mm_events and mm_events[-1] == ("after_run", 1, 4, None)
    assert hook_of(adapter.hooks, RecorderHook).events == mm_events
    assert trainer.current_epoch == runner.epoch == 1
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


def _val_events(events: list[tuple]) -> list[tuple]:
    return [e for e in events if e[0] == "after_val"]


def test_mmengine_max_steps_run_warns_how_it_differs_from_iter_based_runner(tmp_path, monkeypatch):
    import mmengine.runner.loops

    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))  # 2 s per loader restart
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook")])
    runner = run_mmengine(tmp_path / "mm", train_cfg=dict(by_epoch=False, max_iters=6, val_interval=1000), **hooks)
    with pytest.warns(UserWarning, match=re.escape(
        "MMEngineAdapter: Trainer(max_steps=6) ends training after 6 iterations, 2 batches into epoch 2 of 4 batches. "
        "Hooks run MMEngine's epoch-based loop, not IterBasedTrainLoop: every pass over the data is an epoch "
        "(before/after_train_epoch, batch_idx from 0, runner.epoch + 1), and an epoch that max_steps cuts short ends "
        "without validation. IterBasedTrainLoop would run one epoch, pass the global iteration as batch_idx and "
        "validate at max_iters: for that loop, give the adapter train_cfg=dict(type='IterBasedTrainLoop', "
        "max_iters=..., val_interval=...) and build the Trainer with Trainer(**adapter.trainer_kwargs(), ...) "
        "(docs/migration-mmengine.md).")):
        _, adapter, _ = run_lightning(tmp_path / "lt", max_epochs=None, max_steps=6, **hooks)

    # what the warning says, against the real IterBasedTrainLoop
    mm, lt = hook_of(runner.hooks, RecorderHook).events, hook_of(adapter.hooks, RecorderHook).events
    assert [e[0] for e in mm].count("after_train_epoch") == 1 and [e[0] for e in lt].count("after_train_epoch") == 2
    assert [e[3] for e in mm if e[0] == "after_train_iter"] == [0, 1, 2, 3, 4, 5]
    assert [e[3] for e in lt if e[0] == "after_train_iter"] == [0, 1, 2, 3, 0, 1]
    assert _val_events(mm) == [("after_val", 0, 6, None)] and _val_events(lt) == [("after_val", 1, 4, None)]


def test_mmengine_check_val_every_n_epoch_not_dividing_max_epochs_warns_of_the_final_validation(tmp_path):
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook")])
    runner = run_mmengine(tmp_path / "mm", train_cfg=dict(by_epoch=True, max_epochs=3, val_interval=2), **hooks)
    with pytest.warns(UserWarning, match=re.escape(
        "MMEngineAdapter: Trainer(max_epochs=3, check_val_every_n_epoch=2) runs no validation after the last train "
        "epoch, while MMEngine's EpochBasedTrainLoop(val_interval=2) also validates at max_epochs, no after_val_epoch "
        "sees the final weights (CheckpointHook(save_best=...), EarlyStoppingHook). Choose a max_epochs that is a "
        "multiple of check_val_every_n_epoch, or call trainer.validate() after fit.")):
        _, adapter, _ = run_lightning(tmp_path / "lt", max_epochs=3, check_val_every_n_epoch=2, **hooks)

    mm, lt = hook_of(runner.hooks, RecorderHook).events, hook_of(adapter.hooks, RecorderHook).events
    assert _val_events(mm) == [("after_val", 2, 8, None), ("after_val", 3, 12, None)]
    assert lt == [e for e in mm if not ("_val" in e[0] and e[1] == 3)]  # all but the Runner's final validation


RESUME = dict(
    default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1, max_keep_ckpts=3)),
    custom_hooks=[dict(type="RecorderHook"), dict(type="EMAHook", momentum=0.2)],
)


def test_mmengine_runner_cannot_resume_its_own_checkpoint_on_torch_2_6_plus(tmp_path):
    # Upstream: mmengine 0.10.7 calls torch.load without weights_only, which defaults to True since torch 2.6, and its
    # checkpoints pickle MessageHub HistoryBuffers. The reference runs below set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD.
    run_mmengine(tmp_path / "mm", max_epochs=1, **RESUME)
    with pytest.raises(pickle.UnpicklingError, match="HistoryBuffer"):
        run_mmengine(tmp_path / "mm2", resume_from=str(tmp_path / "mm" / "epoch_1.pth"), **RESUME)


@pytest.mark.xfail(
    Version(lightning_api.pl.__version__) < Version("2.5"), strict=True,
    reason="Lightning 2.4 runs the batch a batch-end checkpoint was written in once more (the adapter warns)",
)  # fmt: skip
def test_mmengine_resume_from_adapter_checkpoint_matches_runner_resume(tmp_path, monkeypatch):
    run_mmengine(tmp_path / "mm", **RESUME)
    _, full_adapter, full_module = run_lightning(tmp_path / "lt", **RESUME)

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # the upstream bug above, for the reference run only
    runner = run_mmengine(tmp_path / "mm2", resume_from=str(tmp_path / "mm" / "epoch_1.pth"), **RESUME)
    trainer, adapter, module = run_lightning(tmp_path / "lt2", resume_from=str(tmp_path / "lt" / "epoch_1.pth"), **RESUME)

    mm_rec, lt_rec = hook_of(runner.hooks, RecorderHook), hook_of(adapter.hooks, RecorderHook)
    assert lt_rec.events == mm_rec.events
    assert ("after_load_checkpoint", 0, 0, None) in lt_rec.events
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    assert_same_tensors(unprefixed(module.state_dict()), unprefixed(full_module.state_dict()))  # as if never stopped
    ema, mm_ema = hook_of(adapter.hooks, EMAHook), hook_of(runner.hooks, EMAHook)
    assert_same_tensors(unprefixed(ema.ema_model.state_dict()), mm_ema.ema_model.state_dict())
    assert_same_tensors(ema.ema_model.state_dict(), hook_of(full_adapter.hooks, EMAHook).ema_model.state_dict())
    # CheckpointHook's bookkeeping came back through the restored MessageHub
    assert adapter.runner.message_hub.get_info("keep_ckpt_ids") == runner.message_hub.get_info("keep_ckpt_ids")
    assert files(tmp_path / "lt2") == files(tmp_path / "mm2")


def test_mmengine_runner_resumes_from_a_checkpoint_written_under_lightning(tmp_path, monkeypatch):
    # CheckpointHook under Lightning writes the Runner's layout (state_dict keyed as the Toy the LightningModule
    # holds): MMEngine's own Runner resumes from it exactly as from the checkpoint it wrote itself
    run_mmengine(tmp_path / "mm", **RESUME)
    run_lightning(tmp_path / "lt", **RESUME)
    assert torch.load(tmp_path / "lt" / "epoch_1.pth")["state_dict"].keys() == make_model().state_dict().keys()

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # the upstream bug above, for the Runner's loads
    own = run_mmengine(tmp_path / "mm2", resume_from=str(tmp_path / "mm" / "epoch_1.pth"), **RESUME)
    ours = run_mmengine(tmp_path / "mm3", resume_from=str(tmp_path / "lt" / "epoch_1.pth"), **RESUME)
    assert hook_of(ours.hooks, RecorderHook).events == hook_of(own.hooks, RecorderHook).events
    assert_same_tensors(ours.model.state_dict(), own.model.state_dict())
    assert_same_tensors(hook_of(ours.hooks, EMAHook).ema_model.state_dict(),
                        hook_of(own.hooks, EMAHook).ema_model.state_dict())  # fmt: skip
    assert files(tmp_path / "mm3") == files(tmp_path / "mm2")


class Resumable(DataLoader):
    """A loader Lightning restores mid-epoch (``state_dict`` / ``load_state_dict``): it skips the batches consumed."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.consumed, self.skip = 0, 0

    def __iter__(self):
        skip, self.skip = self.skip, 0
        self.consumed = skip
        for batch in itertools.islice(super().__iter__(), skip, None):
            self.consumed += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        return {"consumed": self.consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.skip = state["consumed"]


def test_mmengine_param_schedulers_keep_the_loader_position_of_a_mid_epoch_resume(tmp_path):
    # building param_schedulers sizes the train loader at on_fit_start, before Lightning restores its position: the
    # resumed fit must still go on with the epoch's 3rd batch, ending as the uninterrupted Runner
    hooks = dict(default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=2, by_epoch=False)))
    schedulers = [dict(type="MultiStepLR", by_epoch=True, milestones=[1])]
    runner = run_mmengine(tmp_path / "mm", max_epochs=1, val=False, param_scheduler=schedulers, **hooks)
    dataset = loaders()[0].dataset
    run_lightning(tmp_path / "lt", max_epochs=1, max_steps=2, val=False, param_schedulers=schedulers,
                  train=Resumable(dataset, batch_size=4), **hooks)
    _, _, module = run_lightning(tmp_path / "lt2", max_epochs=1, val=False, param_schedulers=schedulers,
                                 train=Resumable(dataset, batch_size=4), resume_from=str(tmp_path / "lt" / "iter_2.pth"),
                                 **hooks)
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


def test_mmengine_ema_checkpoint_under_ddp_strategy_match_runner(tmp_path, lightning_ddp_in_this_process):
    # single-process DDP on CPU (gloo): the Runner's runner.model is its DDP wrapper, which EMAHook unwraps with
    # is_model_wrapper; Lightning's DDP wraps the LightningModule, so runner.model is the Toy it holds, unwrapped.
    # Lightning's DistributedSampler would reorder the data, so keep the loader's own order like the Runner.
    class Probe(Hook):
        def before_train(self, runner) -> None:
            self.model = runner.model

    probe = Probe()
    runner = run_mmengine(tmp_path / "mm", **EMA_CKPT)
    trainer, adapter, module = run_lightning(
        tmp_path / "lt", strategy="ddp", accelerator="cpu", devices=1, use_distributed_sampler=False,
        default_hooks=EMA_CKPT["default_hooks"], custom_hooks=[*EMA_CKPT["custom_hooks"], probe],
    )
    assert probe.model is module.model
    assert hook_of(adapter.hooks, RecorderHook).events == hook_of(runner.hooks, RecorderHook).events
    mm_ema, lt_ema = hook_of(runner.hooks, EMAHook), hook_of(adapter.hooks, EMAHook)
    assert lt_ema.src_model is module.model
    assert_same_tensors(lt_ema.ema_model.state_dict(), mm_ema.ema_model.state_dict())
    mm_ckpt = torch.load(tmp_path / "mm" / "epoch_3.pth", weights_only=False)
    lt_ckpt = torch.load(tmp_path / "lt" / "epoch_3.pth", weights_only=False)
    assert_same_tensors(lt_ckpt["state_dict"], mm_ckpt["state_dict"])  # the Runner's keys
