"""Iteration-based training: MMEngine's ``IterBasedTrainLoop`` under the real Runner vs ``MMEngineAdapter(train_cfg=...)``
under Lightning, with the loaders OpenMMLab's iteration-based configs use (``InfiniteSampler``, ``DefaultSampler``)."""

from __future__ import annotations

import glob
import json
import os
import re
from types import SimpleNamespace

import lightning.pytorch as pl
import pytest
import torch
from mmengine.dataset import DefaultSampler, InfiniteSampler
from mmengine.hooks import EMAHook, Hook
from mmengine.runner import IterBasedTrainLoop
from mmengine_testkit import (
    LitToy,
    Points,
    RecorderHook,
    assert_same_tensors,
    files,
    hook_of,
    make_model,
    run_lightning,
    run_mmengine,
    unprefixed,
)
from torch.utils.data import DataLoader

from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks
from lightning_hooks.families.mmengine.iter_based import IterLoopConfig, parse_train_cfg

ITER_CFG = dict(type="IterBasedTrainLoop", max_iters=10, val_interval=4)


@pytest.fixture(autouse=True)
def _no_restart_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmengine.runner.loops

    # MMEngine's _InfiniteDataloaderIterator sleeps 2 s whenever it restarts a finite loader
    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))


def infinite_loader(seed: int = 3) -> DataLoader:
    """16 samples through MMEngine's ``InfiniteSampler`` (shuffled), 4 per batch: ``len()`` 4, never exhausted."""
    dataset = Points(16, 1)
    return DataLoader(dataset, batch_size=4, sampler=InfiniteSampler(dataset, shuffle=True, seed=seed))


def default_loader() -> DataLoader:
    """The same samples through ``DefaultSampler``: exhausted every 4 batches, reshuffled by ``set_epoch``."""
    dataset = Points(16, 1)
    return DataLoader(dataset, batch_size=4, sampler=DefaultSampler(dataset, shuffle=True, seed=3))


def _log_lines(work_dir: str) -> list[str]:
    """LoggerHook's text log lines, without the timing fields that differ between any two runs."""
    (path,) = glob.glob(os.path.join(work_dir, "*", "*.log"))
    lines = [line.split(" - mmengine - INFO - ")[-1] for line in open(path) if re.search(r"(Epoch|Iter)\(", line)]
    return [re.sub(r"\s+(eta|time|data_time): \S+", "", line).strip() for line in lines]


def _json_records(work_dir: str) -> list[dict]:
    (path,) = glob.glob(os.path.join(work_dir, "*", "vis_data", "2*.json"))
    return [{k: v for k, v in json.loads(line).items() if k not in {"time", "data_time", "eta"}} for line in open(path)]


FULL = dict(
    default_hooks=dict(
        logger=dict(type="LoggerHook", interval=2),
        checkpoint=dict(type="CheckpointHook", interval=3, by_epoch=False, max_keep_ckpts=2, save_last=True),
    ),
    custom_hooks=[dict(type="RecorderHook"), dict(type="EMAHook", momentum=0.2)],
    log_processor=dict(by_epoch=False),
)
SCHEDULERS = [
    dict(type="LinearLR", start_factor=0.25, by_epoch=False, begin=0, end=3),
    dict(type="MultiStepLR", by_epoch=False, milestones=[5, 8], gamma=0.5),
]


def test_mmengine_iter_based_hooks_match_the_runners_iter_based_train_loop(tmp_path):
    # the default hooks (runtime info, timer, logger, param scheduler, checkpoint by iteration) plus EMAHook, over an
    # InfiniteSampler loader as OpenMMLab's iteration-based configs build it
    runner = run_mmengine(tmp_path / "mm", train_cfg=ITER_CFG, train=infinite_loader(), param_scheduler=SCHEDULERS,
                          **FULL)  # fmt: skip
    trainer, adapter, module = run_lightning(tmp_path / "lt", train_cfg=ITER_CFG, train=infinite_loader(),
                                             param_schedulers=SCHEDULERS, **FULL)  # fmt: skip

    mm, lt = hook_of(runner.hooks, RecorderHook).events, hook_of(adapter.hooks, RecorderHook).events
    assert lt == mm
    assert [e[0] for e in mm].count("before_train_epoch") == [e[0] for e in mm].count("after_train_epoch") == 1
    assert [e[3] for e in mm if e[0] == "after_train_iter"] == list(range(10))  # batch_idx is runner.iter
    assert [e[2] for e in mm if e[0] == "after_val"] == [4, 8, 10]  # every val_interval and at max_iters
    assert mm[-3:] == [("after_train_epoch", 0, 10, None), ("after_train", 0, 10, None), ("after_run", 0, 10, None)]
    assert trainer.global_step == 10

    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    mm_ema, lt_ema = hook_of(runner.hooks, EMAHook), hook_of(adapter.hooks, EMAHook)
    assert_same_tensors(unprefixed(lt_ema.ema_model.state_dict()), mm_ema.ema_model.state_dict())
    assert trainer.optimizers[0].param_groups[0]["lr"] == runner.optim_wrapper.get_lr()["lr"][0] == 0.025

    assert files(tmp_path / "lt") == files(tmp_path / "mm") == {"iter_9.pth", "iter_10.pth"}
    mm_ckpt = torch.load(tmp_path / "mm" / "iter_10.pth", weights_only=False)
    lt_ckpt = torch.load(tmp_path / "lt" / "iter_10.pth", weights_only=False)
    assert (lt_ckpt["meta"]["epoch"], lt_ckpt["meta"]["iter"]) == (mm_ckpt["meta"]["epoch"], mm_ckpt["meta"]["iter"])
    assert mm_ckpt["meta"]["epoch"] == 0
    assert_same_tensors(unprefixed(lt_ckpt["state_dict"]), mm_ckpt["state_dict"])
    assert_same_tensors(unprefixed(lt_ckpt["ema_state_dict"]), mm_ckpt["ema_state_dict"])
    assert lt_ckpt["param_schedulers"] == mm_ckpt["param_schedulers"]

    assert _log_lines(tmp_path / "lt") == _log_lines(tmp_path / "mm")
    assert any(line.startswith("Iter(train) [10/10]") for line in _log_lines(tmp_path / "mm"))
    lt_json, mm_json = _json_records(tmp_path / "lt"), _json_records(tmp_path / "mm")
    assert [r.keys() for r in lt_json] == [r.keys() for r in mm_json]
    for a, b in zip(lt_json, mm_json):
        assert a == pytest.approx(b, rel=1e-5)
    lt_hub, mm_hub = adapter.runner.message_hub, runner.message_hub
    assert lt_hub.log_scalars.keys() == mm_hub.log_scalars.keys()
    assert list(lt_hub.get_scalar("train/lr").data[0]) == list(mm_hub.get_scalar("train/lr").data[0])
    for key in ("epoch", "iter", "max_epochs", "max_iters", "loop_stage"):
        assert lt_hub.get_info(key) == mm_hub.get_info(key), key


class LoopProbe(Hook):
    """What hooks read from ``runner.train_loop`` after each iteration."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        loop = runner.train_loop
        self.seen.append((isinstance(loop, IterBasedTrainLoop), loop.iter, loop.max_iters, loop.max_epochs,
                          loop.val_begin, loop.val_interval, len(loop.dataloader)))  # fmt: skip


def test_mmengine_iter_based_epoch_logging_val_begin_dynamic_intervals_and_a_restarting_loader(tmp_path):
    # LogProcessor(by_epoch=True) (MMEngine's default) counts len(train loader); DefaultSampler runs out every 4
    # batches and is restarted with set_epoch, as _InfiniteDataloaderIterator does; val_begin and dynamic_intervals
    cfg = dict(type="IterBasedTrainLoop", max_iters=11, val_interval=2, val_begin=3, dynamic_intervals=[(6, 3)])
    hooks = dict(default_hooks=dict(logger=dict(type="LoggerHook", interval=3), checkpoint=None),
                 custom_hooks=[dict(type="RecorderHook"), dict(type="DistSamplerSeedHook")])
    lt_probe = LoopProbe()
    runner = run_mmengine(tmp_path / "mm", train_cfg=cfg, train=default_loader(), default_hooks=hooks["default_hooks"],
                          custom_hooks=[*hooks["custom_hooks"], LoopProbe()])  # fmt: skip
    _, adapter, module = run_lightning(tmp_path / "lt", train_cfg=cfg, train=default_loader(),
                                       default_hooks=hooks["default_hooks"],
                                       custom_hooks=[*hooks["custom_hooks"], lt_probe])  # fmt: skip

    mm, lt = hook_of(runner.hooks, RecorderHook).events, hook_of(adapter.hooks, RecorderHook).events
    assert lt == mm
    mm_seen = hook_of(runner.hooks, LoopProbe).seen  # the Runner got a copy of mm_probe
    assert lt_probe.seen == mm_seen
    assert {s[5] for s in mm_seen} == {2, 3} and mm_seen[0][:5] == (True, 0, 11, 1, 3)
    assert [e[2] for e in mm if e[0] == "after_val"] == [4, 6, 9, 11]
    assert [IterLoopConfig(11, 2, 3, ((6, 3),)).validates_at(i) for i in range(1, 12)].count(True) == 4
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    assert _log_lines(tmp_path / "lt") == _log_lines(tmp_path / "mm")


class StopAt(Hook):
    """Asks the train loop to stop after iteration ``at`` (a divergence guard)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 == self.at:
            runner.train_loop.stop_training = True


@pytest.mark.parametrize("stop", ["early_stopping", "after_train_iter"])
def test_mmengine_iter_based_stop_training_stops_where_the_iter_based_loop_stops(tmp_path, stop):
    # IterBasedTrainLoop reads stop_training after each iteration's validation check: set in after_train_iter of a
    # non-validating iteration, it ends the run without validating (Lightning would validate on should_stop)
    if stop == "early_stopping":  # toy/mse falls, so rule="greater" never improves: stops at the 2nd validation
        extra = dict(type="EarlyStoppingHook", monitor="toy/mse", rule="greater", patience=1, min_delta=0.0)
    else:
        extra = StopAt(5)
    cfg = dict(type="IterBasedTrainLoop", max_iters=20, val_interval=2)
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook"), extra])
    runner = run_mmengine(tmp_path / "mm", train_cfg=cfg, train=infinite_loader(), **hooks)
    trainer, adapter, module = run_lightning(tmp_path / "lt", train_cfg=cfg, train=infinite_loader(), **hooks)

    mm, lt = hook_of(runner.hooks, RecorderHook).events, hook_of(adapter.hooks, RecorderHook).events
    assert lt == mm
    assert mm[-1] == ("after_run", 0, 4 if stop == "early_stopping" else 5, None)
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


def test_mmengine_iter_based_resume_from_an_iteration_checkpoint_matches_runner_resume(tmp_path, monkeypatch):
    hooks = dict(default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=3, by_epoch=False)),
                 custom_hooks=[dict(type="RecorderHook"), dict(type="EMAHook", momentum=0.2)])
    run_mmengine(tmp_path / "mm", train_cfg=ITER_CFG, train=infinite_loader(), **hooks)
    _, _, full_module = run_lightning(tmp_path / "lt", train_cfg=ITER_CFG, train=infinite_loader(), **hooks)

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # mmengine 0.10.7 on torch >= 2.6, reference only
    runner = run_mmengine(tmp_path / "mm2", train_cfg=ITER_CFG, train=infinite_loader(),
                          resume_from=str(tmp_path / "mm" / "iter_6.pth"), **hooks)  # fmt: skip
    _, adapter, module = run_lightning(tmp_path / "lt2", train_cfg=ITER_CFG, train=infinite_loader(),
                                       resume_from=str(tmp_path / "lt" / "iter_6.pth"), **hooks)  # fmt: skip

    mm, lt = hook_of(runner.hooks, RecorderHook).events, hook_of(adapter.hooks, RecorderHook).events
    assert lt == mm
    assert ("before_train_iter", 0, 6, 6) in lt and ("before_train_iter", 0, 5, 5) not in lt
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    assert_same_tensors(unprefixed(module.state_dict()), unprefixed(full_module.state_dict()))  # as if never stopped
    assert files(tmp_path / "lt2") == files(tmp_path / "mm2") == {"iter_9.pth", "iter_10.pth"}


def test_mmengine_iter_based_refuses_a_trainer_that_would_run_another_loop(tmp_path):
    adapter = MMEngineAdapter(build_hooks(default_hooks=dict(checkpoint=None)), work_dir=tmp_path, train_cfg=ITER_CFG)
    assert adapter.trainer_kwargs() == dict(max_steps=10, max_epochs=1, val_check_interval=4,
                                            check_val_every_n_epoch=None)  # fmt: skip
    trainer = pl.Trainer(callbacks=[adapter], max_steps=5, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, default_root_dir=tmp_path)
    with pytest.raises(ValueError, match=re.escape(
        "MMEngineAdapter(train_cfg=IterLoopConfig(max_iters=10, val_interval=4, val_begin=1, dynamic_intervals=())) "
        "runs that loop with Trainer(max_steps=10, max_epochs=1, val_check_interval=4, check_val_every_n_epoch=None, "
        "accumulate_grad_batches=1, limit_train_batches=1.0), but this Trainer has max_steps=5, max_epochs=-1, "
        "val_check_interval=1.0, check_val_every_n_epoch=1. Build it with Trainer(**adapter.trainer_kwargs(), ...).")):
        trainer.fit(LitToy(make_model()), infinite_loader())
    # the Trainer's data source is left as given
    assert trainer.fit_loop._data_source.instance.__class__ is DataLoader


@pytest.mark.parametrize(("cfg", "message"), [
    (dict(type="IterBasedTrainLoop", max_iters=8, by_epoch=True), "has type='IterBasedTrainLoop' and by_epoch=True"),
    (dict(type="MyLoop", max_iters=8), "train_cfg type 'MyLoop' is not a loop the adapter can run"),
    (dict(max_iters=8), "names no loop: add by_epoch=True"),
    (dict(by_epoch=False, max_iter=8), "does not fit IterBasedTrainLoop: IterLoopConfig.__init__() got an unexpected"),
])  # fmt: skip
def test_mmengine_train_cfg_that_the_adapter_cannot_run_is_refused_by_name(cfg, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_train_cfg(cfg)


def test_mmengine_train_cfg_scope_is_the_loops_registrys_key_not_a_loop_setting():
    # mmpretrain's byol/benchmarks/mask-rcnn_r50-c4_ms-1x_coco.py (and its fpn twin) inherit mmdet's train_cfg from an
    # "mmdet::" base, which MMEngine's Config marks with _scope_; the Runner builds the loop through LOOPS with it
    shipped = dict(type="EpochBasedTrainLoop", max_epochs=12, val_interval=1, _scope_="mmdet")
    assert parse_train_cfg(shipped) == parse_train_cfg(dict(type="EpochBasedTrainLoop", max_epochs=12, val_interval=1))
    assert parse_train_cfg(dict(by_epoch=False, max_iters=8, _scope_="mmseg")) == IterLoopConfig(max_iters=8)


def test_mmengine_epoch_based_train_cfg_gives_the_trainer_its_epochs_and_val_interval():
    assert parse_train_cfg(dict(by_epoch=True, max_epochs=12, val_interval=2)).trainer_kwargs() == dict(
        max_epochs=12, check_val_every_n_epoch=2)
    # with val_begin / dynamic_intervals every epoch is a candidate: the adapter decides at each epoch's end
    assert parse_train_cfg(dict(by_epoch=True, max_epochs=12, val_begin=3)).trainer_kwargs() == dict(
        max_epochs=12, check_val_every_n_epoch=1)


class EpochLoopProbe(Hook):
    """What hooks read from ``runner.train_loop``'s validation schedule in each train epoch."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def after_train_epoch(self, runner) -> None:
        loop = runner.train_loop
        self.seen.append((runner.epoch, loop.val_begin, loop.val_interval))


@pytest.mark.parametrize(("cfg", "validated"), [
    # RTMDet / YOLOX configs: from val_begin on, every val_interval epochs, every epoch after a milestone (MMEngine
    # switches one epoch early), and at max_epochs
    (dict(type="EpochBasedTrainLoop", max_epochs=8, val_interval=2, val_begin=3, dynamic_intervals=[(6, 1)]),
     [4, 5, 6, 7, 8]),
    (dict(by_epoch=True, max_epochs=3, val_interval=2), [2, 3]),  # max_epochs no multiple of val_interval
])  # fmt: skip
def test_mmengine_epoch_based_val_begin_and_dynamic_intervals_validate_where_the_epoch_based_loop_does(
    tmp_path, cfg, validated
):
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook")])
    lt_probe = EpochLoopProbe()
    runner = run_mmengine(tmp_path / "mm", train_cfg=cfg, custom_hooks=[*hooks["custom_hooks"], EpochLoopProbe()],
                          default_hooks=hooks["default_hooks"])  # fmt: skip
    _, adapter, module = run_lightning(tmp_path / "lt", train_cfg=cfg, custom_hooks=[*hooks["custom_hooks"], lt_probe],
                                       default_hooks=hooks["default_hooks"])  # fmt: skip

    mm, lt = hook_of(runner.hooks, RecorderHook).events, hook_of(adapter.hooks, RecorderHook).events
    assert [e[1] for e in mm if e[0] == "after_val"] == validated
    assert lt == mm
    assert lt_probe.seen == hook_of(runner.hooks, EpochLoopProbe).seen
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


class FetchData(Hook):
    """Switches the train data as mmagic's PGGANFetchDataHook does: the loader, then the loop's iterator over it;
    records the samples of each iteration and the size of the dataset hooks read (``runner.train_dataloader``)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.samples: list[list[float]] = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.sizes.append(len(runner.train_dataloader.dataset))
        self.samples.append(data_batch["inputs"][:, 0].tolist())

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        if runner.iter == 3:
            from mmengine.runner.loops import _InfiniteDataloaderIterator

            loader = DataLoader(Points(8, 5), batch_size=2)
            runner.train_loop.dataloader = loader
            runner.train_loop.dataloader_iterator = _InfiniteDataloaderIterator(loader)


def test_mmengine_iter_based_data_switch_of_the_loop_iterator_takes_effect_at_the_next_iteration(tmp_path):
    # under the Runner the pair takes effect at the next iteration; Lightning has fetched that batch already and
    # fetches it again from the new iterator
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook")])
    runner = run_mmengine(tmp_path / "mm", train_cfg=ITER_CFG, train=infinite_loader(),
                          custom_hooks=[*hooks["custom_hooks"], FetchData()], default_hooks=hooks["default_hooks"])
    _, adapter, module = run_lightning(tmp_path / "lt", train_cfg=ITER_CFG, train=infinite_loader(),
                                       custom_hooks=[*hooks["custom_hooks"], FetchData()],
                                       default_hooks=hooks["default_hooks"])  # fmt: skip
    mm, lt = hook_of(runner.hooks, RecorderHook).events, hook_of(adapter.hooks, RecorderHook).events
    assert lt == mm
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    # hooks read the loader the hook assigned from then on
    assert hook_of(adapter.hooks, FetchData).samples == hook_of(runner.hooks, FetchData).samples
    assert hook_of(adapter.hooks, FetchData).sizes == hook_of(runner.hooks, FetchData).sizes == [16] * 3 + [8] * 7
