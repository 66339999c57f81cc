"""Each shipped MMEngine hook under Lightning + adapter, checked against MMEngine's own Runner on the same run."""

from __future__ import annotations

import glob
import json
import os
import re
from types import SimpleNamespace

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
from mmengine.hooks import EMAHook
from mmengine.runner import Runner

import lightning.pytorch as pl
from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks


def _log_lines(log_dir: str) -> list[str]:
    """LoggerHook's text log lines, without the timing fields that differ between any two runs."""
    (path,) = glob.glob(os.path.join(log_dir, "*", "*.log"))
    lines = [line.split(" - mmengine - INFO - ")[-1] for line in open(path) if "Epoch(" in line]
    return [re.sub(r"\s+(eta|time|data_time): \S+", "", line).strip() for line in lines]


def _json_records(log_dir: str) -> list[dict]:
    (path,) = glob.glob(os.path.join(log_dir, "*", "vis_data", "2*.json"))  # LoggerHook's {timestamp}.json
    drop = {"time", "data_time", "eta"}
    return [{k: v for k, v in json.loads(line).items() if k not in drop} for line in open(path)]


def test_mmengine_logger_runtime_info_and_timer_hooks_write_the_same_logs(tmp_path):
    hooks = dict(default_hooks=dict(logger=dict(type="LoggerHook", interval=1), checkpoint=None))
    runner = run_mmengine(tmp_path / "mm", **hooks)
    _, adapter, _ = run_lightning(tmp_path / "lt", **hooks)

    assert _log_lines(tmp_path / "lt") == _log_lines(tmp_path / "mm")  # text log: loss, lr, epoch/iter counters
    assert len(_log_lines(tmp_path / "lt")) == 3 * (4 + 2 + 1)  # every train and val iter, each val epoch
    lt_json, mm_json = _json_records(tmp_path / "lt"), _json_records(tmp_path / "mm")
    assert [r.keys() for r in lt_json] == [r.keys() for r in mm_json]
    for lt, mm in zip(lt_json, mm_json):
        assert lt == pytest.approx(mm, rel=1e-5)
    # RuntimeInfoHook and IterTimerHook fill the adapter's MessageHub like the Runner's
    lt_hub, mm_hub = adapter.runner.message_hub, runner.message_hub
    assert lt_hub.log_scalars.keys() == mm_hub.log_scalars.keys()
    assert lt_hub.get_scalar("train/loss").data[0] == pytest.approx(mm_hub.get_scalar("train/loss").data[0])
    for key in ("epoch", "iter", "max_epochs", "max_iters", "loop_stage"):
        assert lt_hub.get_info(key) == mm_hub.get_info(key), key


SCHEDULERS = [
    dict(type="LinearLR", start_factor=0.25, by_epoch=False, begin=0, end=3),
    dict(type="MultiStepLR", by_epoch=True, milestones=[1, 2], gamma=0.5),
]


def test_mmengine_param_scheduler_hook_steps_mmengine_schedulers_not_lightning(tmp_path):
    """MMEngine's default ParamSchedulerHook steps the runner's schedulers; Lightning must not step them too."""
    hooks = dict(default_hooks=dict(checkpoint=None))
    runner = run_mmengine(tmp_path / "mm", param_scheduler=SCHEDULERS, **hooks)
    trainer, adapter, module = run_lightning(tmp_path / "lt", param_schedulers=SCHEDULERS, **hooks)

    lr = "train/lr"
    assert list(adapter.runner.message_hub.get_scalar(lr).data[0]) == list(runner.message_hub.get_scalar(lr).data[0])
    assert trainer.optimizers[0].param_groups[0]["lr"] == runner.optim_wrapper.get_lr()["lr"][0] == 0.025
    assert trainer.lr_scheduler_configs == []
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


def test_mmengine_max_steps_run_reports_max_epochs_like_iter_based_runner(tmp_path):
    # Trainer(max_steps=3) ends inside the first 4-batch epoch, as IterBasedTrainLoop(max_iters=3) trains one epoch:
    # runner.max_epochs is 1, so EMAHook(begin_epoch=1) accepts it and a by_epoch scheduler ends at 1
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="EMAHook", begin_epoch=1)])
    schedulers = [dict(type="LinearLR", by_epoch=True, start_factor=0.5)]
    runner = run_mmengine(tmp_path / "mm", val=False, param_scheduler=schedulers,
                          train_cfg=dict(by_epoch=False, max_iters=3), **hooks)
    _, adapter, module = run_lightning(tmp_path / "lt", max_epochs=None, max_steps=3, val=False,
                                       param_schedulers=schedulers, **hooks)

    for key in ("max_epochs", "max_iters"):
        assert adapter.runner.message_hub.get_info(key) == runner.message_hub.get_info(key), key
    assert [s.end for s in adapter.runner.param_schedulers] == [s.end for s in runner.param_schedulers] == [1]
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    mm_ema, lt_ema = hook_of(runner.hooks, EMAHook), hook_of(adapter.hooks, EMAHook)
    assert_same_tensors(unprefixed(lt_ema.ema_model.state_dict()), mm_ema.ema_model.state_dict())


def test_mmengine_scheduler_that_cannot_be_built_names_the_config_and_the_trainer_limits(tmp_path):
    # Trainer(max_epochs=-1) trains until stopped: a by_epoch scheduler without `end` has none (MMEngine's own error)
    with pytest.raises(ValueError, match="end should be larger than begin") as info:
        run_lightning(tmp_path, max_epochs=-1, param_schedulers=[dict(type="MultiStepLR", milestones=[1])],
                      default_hooks=dict(checkpoint=None))
    assert info.value.__notes__ == [
        "[lightning-hooks] MMEngineAdapter(param_schedulers=...) could not build {'type': 'MultiStepLR', "
        "'milestones': [1]} (end=-1). A config without 'end' ends at runner.max_epochs (by_epoch) or "
        "runner.max_iters, here -1 and -4, from Trainer(max_epochs=-1, max_steps=-1): bound the Trainer with "
        "max_epochs or max_steps, or set 'begin' and 'end' in the config."
    ]


def test_mmengine_checkpoint_hook_save_best_last_and_published_keys_match_runner(tmp_path, monkeypatch):
    # published_keys makes CheckpointHook torch.load its own file: needs the weights_only workaround (see resume test)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    ckpt = dict(type="CheckpointHook", interval=1, max_keep_ckpts=1, save_best="toy/mse", rule="less",
                published_keys=["meta", "state_dict"])
    hooks = dict(default_hooks=dict(checkpoint=ckpt))
    runner = run_mmengine(tmp_path / "mm", **hooks)
    _, adapter, _ = run_lightning(tmp_path / "lt", **hooks)

    def names(d):  # published files carry a sha of their content, which differs between hosts
        return {re.sub(r"-[0-9a-f]{8}\.pth$", "-<sha>.pth", f) for f in files(d)}

    assert names(tmp_path / "lt") == names(tmp_path / "mm") == {
        "epoch_3.pth", "best_toy_mse_epoch_3.pth", "epoch_3-<sha>.pth", "best_toy_mse_epoch_3-<sha>.pth"}
    for key in ("best_score", "best_ckpt", "last_ckpt", "keep_ckpt_ids"):
        lt, mm = adapter.runner.message_hub.get_info(key), runner.message_hub.get_info(key)
        if isinstance(mm, str):
            assert os.path.basename(lt) == os.path.basename(mm), key
        else:
            assert lt == pytest.approx(mm, rel=1e-6), key
    published = torch.load(glob.glob(str(tmp_path / "lt" / "epoch_3-*.pth"))[0], weights_only=False)
    assert set(published) == {"meta", "state_dict"}


def test_mmengine_profiler_hook_writes_torch_profiler_trace(tmp_path):
    # ProfilerHook.after_train_iter(self, runner, batch_idx, data_batch, outputs) has no defaults: keyword calls
    hooks = dict(
        default_hooks=dict(checkpoint=None),
        custom_hooks=[dict(type="ProfilerHook", by_epoch=False, profile_times=2, json_trace_path="trace.json")],
    )
    os.makedirs(tmp_path / "mm")
    os.chdir(tmp_path / "mm")
    run_mmengine(tmp_path / "mm", **hooks)
    os.makedirs(tmp_path / "lt")
    os.chdir(tmp_path / "lt")
    run_lightning(tmp_path / "lt", **hooks)
    for host in ("mm", "lt"):
        trace = json.loads((tmp_path / host / "trace.json").read_text())
        assert {"aten::addmm", "Optimizer.step#SGD.step"} <= {e.get("name") for e in trace["traceEvents"]}, host


def test_mmengine_empty_cache_hook_empties_as_often_as_under_runner(tmp_path, monkeypatch):
    import mmengine.hooks.empty_cache_hook as ech

    calls = []  # count the hook's own calls on a CPU machine (Lightning empties the cache itself at teardown)
    monkeypatch.setattr(ech, "is_cuda_available", lambda: True)
    monkeypatch.setattr(ech, "torch", SimpleNamespace(cuda=SimpleNamespace(empty_cache=lambda: calls.append(1))))
    hooks = dict(default_hooks=dict(checkpoint=None),
                 custom_hooks=[dict(type="EmptyCacheHook", before_epoch=True, after_iter=True)])
    run_mmengine(tmp_path / "mm", **hooks)
    mm_calls, calls[:] = len(calls), []
    run_lightning(tmp_path / "lt", **hooks)
    assert len(calls) == mm_calls == 3 * (1 + 4 + 1) + 3 * (1 + 2 + 1)  # train and val epochs: before, iters, after


def test_mmengine_sync_buffers_hook_reduces_the_model_buffers(tmp_path, monkeypatch):
    import mmengine.hooks.sync_buffer_hook as sync

    reduced = []
    monkeypatch.setattr(sync, "is_distributed", lambda: True)  # no process group on a CPU test machine
    monkeypatch.setattr(sync, "all_reduce_params", lambda params, op: reduced.append([p.clone() for p in params]))
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="SyncBuffersHook")])
    run_mmengine(tmp_path / "mm", **hooks)
    mm_reduced, reduced[:] = list(reduced), []
    run_lightning(tmp_path / "lt", **hooks)
    assert len(reduced) == len(mm_reduced) == 3  # after_train_epoch; before_val_epoch skips when train just synced
    assert [[float(b) for b in r] for r in reduced] == [[float(b) for b in r] for r in mm_reduced]  # `seen` buffer


def test_mmengine_dist_sampler_seed_hook_sets_the_sampler_epoch(tmp_path):
    """MMEngine's default hooks include DistSamplerSeedHook, which calls set_epoch on the train sampler."""
    class Sampler(torch.utils.data.SequentialSampler):
        epochs: list[int] = []

        def set_epoch(self, epoch: int) -> None:
            self.epochs.append(epoch)

    train, val = loaders()
    train = torch.utils.data.DataLoader(train.dataset, batch_size=4, sampler=Sampler(train.dataset))
    adapter = MMEngineAdapter(build_hooks(default_hooks=dict(checkpoint=None, logger=None)), work_dir=tmp_path)
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=3, default_root_dir=tmp_path, enable_checkpointing=False,
                         logger=False, enable_progress_bar=False, enable_model_summary=False)
    Sampler.epochs = []
    trainer.fit(LitToy(make_model()), train, val)
    assert sorted(set(Sampler.epochs)) == [0, 1, 2]
    assert Sampler.epochs.count(2) >= 1 and adapter.mount_counts(adapter.hooks[2]) == {"before_train_epoch": 3}


def test_mmengine_validate_and_test_fire_val_and_test_mount_points_like_runner(tmp_path):
    train, val = loaders()
    runner = Runner(
        model=make_model(), work_dir=str(tmp_path / "mm"), val_dataloader=val, val_cfg=dict(),
        val_evaluator=dict(type="ToyMSE"), test_dataloader=val, test_cfg=dict(), test_evaluator=dict(type="ToyMSE"),
        default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook"), dict(type="EMAHook")],
        experiment_name="mm-validate-test",
    )
    mm_val, mm_test = runner.val(), runner.test()
    adapter = MMEngineAdapter(
        build_hooks(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook"), dict(type="EMAHook")]),
        work_dir=tmp_path / "lt",
    )
    trainer = pl.Trainer(callbacks=[adapter], default_root_dir=tmp_path / "lt", logger=False,
                         enable_progress_bar=False, enable_model_summary=False)
    module = LitToy(make_model())
    (lt_val,), (lt_test,) = trainer.validate(module, val), trainer.test(module, val)

    assert hook_of(adapter.hooks, RecorderHook).events == hook_of(runner.hooks, RecorderHook).events
    assert hook_of(adapter.hooks, RecorderHook).metrics == [pytest.approx(mm_val, rel=1e-6),
                                                            pytest.approx(mm_test, rel=1e-6)]
    assert lt_val == pytest.approx(mm_val, rel=1e-6) and lt_test == pytest.approx(mm_test, rel=1e-6)
