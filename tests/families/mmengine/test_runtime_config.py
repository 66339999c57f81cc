"""Whole OpenMMLab runtime config files (``_base_`` default_runtime + schedule + model/data) under the real Runner
(``Runner.from_cfg``) and under ``MMEngineAdapter.from_file`` + Lightning: same hooks in the same order, same work_dir
layout, same logs, checkpoints and weights."""

from __future__ import annotations

import glob
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import lightning.pytorch as pl
import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import EMAHook
from mmengine.runner import Runner, TestLoop, ValLoop, get_priority
from mmengine_testkit import (
    LitToy,
    RecorderHook,
    assert_same_tensors,
    hook_of,
    make_model,
    run_lightning,
    run_mmengine,
    unprefixed,
)

from lightning_hooks.families.mmengine import MMEngineAdapter

CONFIGS = Path(__file__).parent / "configs"


@pytest.fixture(autouse=True)
def _no_restart_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmengine.runner.loops

    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))


def _layout(work_dir: Path) -> list[str]:
    """Every file under ``work_dir``, with the run's timestamp replaced by ``TS``."""
    paths = [os.path.relpath(p, work_dir) for p in glob.glob(str(work_dir / "**"), recursive=True) if os.path.isfile(p)]
    return sorted(re.sub(r"\d{8}_\d{6}", "TS", p) for p in paths)


def _train_log(work_dir: Path) -> list[str]:
    (path,) = glob.glob(str(work_dir / "*" / "*.log"))
    lines = [line.split(" - mmengine - INFO - ")[-1] for line in open(path) if re.search(r"(Epoch|Iter)\(", line)]
    return [re.sub(r"\s+(eta|time|data_time): \S+", "", line).strip() for line in lines]


def _scalars(work_dir: Path) -> list[dict]:
    (path,) = glob.glob(str(work_dir / "*" / "vis_data" / "2*.json"))  # LoggerHook's {timestamp}.json
    return [{k: v for k, v in json.loads(line).items() if k not in {"time", "data_time", "eta"}} for line in open(path)]


@pytest.mark.parametrize("name", ["toy_iter", "toy_epoch"])
def test_mmengine_runtime_config_file_runs_like_runner_from_cfg(tmp_path, name):
    path = CONFIGS / f"{name}.py"
    cfg = Config.fromfile(path)
    cfg.work_dir = str(tmp_path / "mm")
    cfg.visualizer.name = f"vis-mm-{name}"  # Visualizer instances are per name: one per run in this process
    runner = Runner.from_cfg(cfg)
    runner.train()

    with pytest.warns(UserWarning, match=re.escape(
        "MMEngineAdapter.from_config ignores keys that Lightning objects own: model (the LightningModule; runner.model is "
        "the MMEngine model it holds); "
        "train_dataloader (trainer.fit(module, train_dataloaders) or a LightningDataModule); ")) as caught:
        adapter = MMEngineAdapter.from_file(path, work_dir=str(tmp_path / "lt"), **{"visualizer.name": f"vis-lt-{name}"})
    note = str(caught[0].message)
    assert "env_cfg (" in note and "randomness (lightning.seed_everything" in note
    assert note.endswith("config variables not read by the Runner: vis_backends.")
    assert adapter.ckpt_path is None

    # the Runner's hooks, in the Runner's order, with the Runner's priorities
    assert [(type(h).__name__, get_priority(h.priority)) for h in adapter.hooks] == [
        (type(h).__name__, get_priority(h.priority)) for h in runner.hooks
    ]
    trainer = pl.Trainer(callbacks=[adapter], default_root_dir=tmp_path / "lt", enable_checkpointing=False,
                         logger=False, enable_progress_bar=False, enable_model_summary=False,
                         **adapter.trainer_kwargs())  # fmt: skip
    module = LitToy(make_model())
    trainer.fit(module, Runner.build_dataloader(cfg.train_dataloader), Runner.build_dataloader(cfg.val_dataloader))

    assert _layout(tmp_path / "lt") == _layout(tmp_path / "mm")
    assert f"{name}.py" in _layout(tmp_path / "lt")
    def same(text: str, side: str) -> str:  # the two runs differ in work_dir and visualizer name only
        return text.replace(str(tmp_path / side), "WORK").replace(f"vis-{side}-{name}", "VIS")

    for dumped in (f"{name}.py", *glob.glob("*/vis_data/config.py", root_dir=tmp_path / "lt")):
        assert same((tmp_path / "lt" / dumped).read_text(), "lt") == same(
            next(iter((tmp_path / "mm").glob(re.sub(r"\d{8}_\d{6}", "*", dumped)))).read_text(), "mm")
    assert _train_log(tmp_path / "lt") == _train_log(tmp_path / "mm")
    lt_scalars, mm_scalars = _scalars(tmp_path / "lt"), _scalars(tmp_path / "mm")
    assert [r.keys() for r in lt_scalars] == [r.keys() for r in mm_scalars]
    for a, b in zip(lt_scalars, mm_scalars):
        assert a == pytest.approx(b, rel=1e-5)
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    mm_ema, lt_ema = hook_of(runner.hooks, EMAHook), hook_of(adapter.hooks, EMAHook)
    assert_same_tensors(unprefixed(lt_ema.ema_model.state_dict()), mm_ema.ema_model.state_dict())
    last = "iter_10.pth" if name == "toy_iter" else "epoch_3.pth"
    mm_ckpt = torch.load(tmp_path / "mm" / last, weights_only=False)
    lt_ckpt = torch.load(tmp_path / "lt" / last, weights_only=False)
    assert same(lt_ckpt["meta"]["cfg"], "lt") == same(mm_ckpt["meta"]["cfg"], "mm")
    assert (lt_ckpt["meta"]["epoch"], lt_ckpt["meta"]["iter"]) == (mm_ckpt["meta"]["epoch"], mm_ckpt["meta"]["iter"])
    assert lt_ckpt["param_schedulers"] == mm_ckpt["param_schedulers"]


def test_mmengine_default_runtime_loads_with_from_config_of_its_keys(tmp_path):
    # the spelling: MMEngineAdapter.from_config(**Config.fromfile(".../default_runtime.py"))
    with pytest.warns(UserWarning, match="ignores keys that Lightning objects own: env_cfg"):
        adapter = MMEngineAdapter.from_config(**Config.fromfile(CONFIGS / "_base_" / "default_runtime.py"),
                                              work_dir=str(tmp_path))  # fmt: skip
    assert [type(h).__name__ for h in adapter.hooks] == [
        "RuntimeInfoHook", "EMAHook", "IterTimerHook", "DistSamplerSeedHook", "LoggerHook", "ParamSchedulerHook",
        "CheckpointHook",
    ]
    assert adapter.runner.log_processor.window_size == 10 and adapter.trainer_kwargs() == {}


def test_mmengine_load_from_loads_weights_into_runner_model_after_before_run_like_runner(tmp_path):
    # a checkpoint written under Lightning (torch.load(weights_only=True) reads it, unlike the Runner's own, see
    # test_mmengine_runner_cannot_resume_its_own_checkpoint_on_torch_2_6_plus) as pretrained weights on both hosts
    hooks = dict(custom_hooks=[dict(type="RecorderHook")], default_hooks=dict(checkpoint=None))
    run_lightning(tmp_path / "src", max_epochs=1)  # MMEngine's default hooks: CheckpointHook(interval=1)
    pretrained = str(tmp_path / "src" / "epoch_1.pth")
    runner = run_mmengine(tmp_path / "mm", load_from=pretrained, **hooks)
    _, adapter, module = run_lightning(tmp_path / "lt", load_from=pretrained, **hooks)
    assert hook_of(adapter.hooks, RecorderHook).events == hook_of(runner.hooks, RecorderHook).events
    assert_same_tensors(module.model.state_dict(), runner.model.state_dict())
    for host in (runner, adapter.runner):  # Runner.load_checkpoint's log line
        log = os.path.join(host.log_dir, f"{host.timestamp}.log")
        with open(log) as file:
            assert [line.split(" - ")[-1] for line in file if "Load checkpoint" in line] == [
                f"Load checkpoint from {pretrained}\n"], log
    _, _, fresh = run_lightning(tmp_path / "fresh", **hooks)
    assert not torch.equal(fresh.model.linear.weight, module.model.linear.weight)  # the weights did load


def test_mmengine_resume_config_gives_the_checkpoint_to_resume_from(tmp_path):
    (tmp_path / "last_checkpoint").write_text(str(tmp_path / "iter_6.pth"))
    runtime = dict(work_dir=str(tmp_path), default_hooks=dict(checkpoint=None), param_scheduler=[])
    assert MMEngineAdapter.from_config(**runtime, resume=True).ckpt_path == str(tmp_path / "iter_6.pth")
    assert MMEngineAdapter.from_config(**runtime, resume=True, load_from="a.pth").ckpt_path == "a.pth"
    # resumed only (tools/train.py --resume a.pth): not also loaded as weights in setup, which logged "Load checkpoint
    # from a.pth" twice and ran after_load_checkpoint twice (mmseg's upernet_r50 resumed from a named iter_4.pth)
    assert MMEngineAdapter.from_config(**runtime, resume=True, load_from="a.pth")._load_from is None
    assert MMEngineAdapter.from_config(**runtime, resume=False).ckpt_path is None
    assert MMEngineAdapter.from_config(**runtime, load_from="a.pth")._load_from == "a.pth"


@pytest.mark.parametrize(("keys", "message"), [
    (dict(defualt_hooks=dict()), "unknown config key 'defualt_hooks'. Did you mean 'default_hooks'?"),
    (dict(param_scheduler=[], param_schedulers=[]), "both 'param_scheduler' (MMEngine's key) and 'param_schedulers'"),
    (dict(val_cfg=dict(type="ValLoop", fp61=True)), "val_cfg has options ['fp61'] that ValLoop does not take"),
    (dict(log_processor=dict(type="LoggerHook")), "LoggerHook is not in the mmengine::log_processor registry"),
])  # fmt: skip
def test_mmengine_runtime_config_key_the_adapter_cannot_take_is_refused_by_name(keys, message):
    with pytest.raises((ValueError, KeyError), match=re.escape(message)):
        MMEngineAdapter.from_config(default_hooks=dict(checkpoint=None), **keys)


@pytest.mark.parametrize(("keys", "message"), [
    (dict(val_cfg=dict(type="MultiValLoop", _scope_="mmagic")),
     "val_cfg=dict(type='MultiValLoop'): Lightning's validation loop runs this stage over the validation dataloaders "
     "(hooks see runner.val_loop as MMEngine's ValLoop), so what MultiValLoop.run() adds to ValLoop"),
    (dict(test_cfg=dict(type="TeacherStudentValLoop", extra=1)), "test_cfg=dict(type='TeacherStudentValLoop'): "),
    (dict(val_cfg=dict(type="ValLoop", fp16=True, _scope_="mmengine")),
     "val_cfg=dict(fp16=True): validation runs at the Trainer's precision; for fp16 autocast as ValLoop(fp16=True), "
     "build the Trainer with precision='16-mixed'"),
])  # fmt: skip
def test_mmengine_custom_eval_loops_and_fp16_load_and_say_once_what_lightning_runs(keys, message):
    # mmagic's MultiValLoop / MultiTestLoop, mmdet's semi-supervised TeacherStudentValLoop: Lightning runs evaluation
    with pytest.warns(UserWarning, match=re.escape(message)) as record:
        adapter = MMEngineAdapter.from_config(default_hooks=dict(checkpoint=None), **keys)
    assert sum(str(w.message).startswith("MMEngineAdapter.from_config: ") for w in record) == 1  # said once
    assert isinstance(adapter.runner.val_loop, ValLoop) and isinstance(adapter.runner.test_loop, TestLoop)


def test_mmengine_config_variables_are_never_taken_for_misspelled_keys():
    # the variables of shipped configs closest to a runtime key (tta_pipeline, env_cfg, model, val_cfg); a real
    # misspelling still raises (test_mmengine_runtime_config_key_the_adapter_cannot_take_is_refused_by_name)
    variables = dict(train_pipeline=[], test_pipeline=[], val_pipeline=[], conv_cfg=None, models=[], val_cofw={})
    with pytest.warns(UserWarning, match="config variables not read by the Runner: train_pipeline, test_pipeline, "
                                         "val_pipeline, conv_cfg, models, val_cofw"):  # fmt: skip
        MMEngineAdapter.from_config(default_hooks=dict(checkpoint=None), **variables)
    for typo, key in (("custom_hook", "custom_hooks"), ("tran_cfg", "train_cfg"), ("param_shceduler", "param_scheduler")):
        with pytest.raises(ValueError, match=re.escape(f"unknown config key {typo!r}. Did you mean {key!r}?")):
            MMEngineAdapter.from_config(default_hooks=dict(checkpoint=None), **{typo: []})
