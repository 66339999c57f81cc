"""Configs in mmcv's own form: ``MMCVAdapter.from_config`` / ``from_file`` register what mmcv's runners'
``register_training_hooks`` register, in their order, and train as they do, on small configs derived from the
schedules and runtimes that mmdet 2.28, mmseg 0.30 and mmcls 0.25 ship."""

from __future__ import annotations

import copy
import json
import logging
import os
import warnings
from pathlib import Path

import pytest
import torch
from mmcv_testkit import TIMESTAMP, Recorder, ToyModel, assert_same_weights, mmcv_runner, run_lightning, run_mmcv, weights

from lightning_hooks import MMCVAdapter, build_callbacks
from lightning_hooks.core.errors import ConfigError

R = mmcv_runner
SITE = Path(R.__file__).parents[2]


def derived(tmp_path: Path, library: str, bases: list[str], body: str) -> Path:
    """A config file whose ``_base_`` are files the library ships (``<library>/.mim/configs/_base_/...``)."""
    paths = [str(SITE / library / ".mim" / "configs" / "_base_" / b) for b in bases]
    for path in paths:
        assert os.path.exists(path), path
    config = tmp_path / f"{library}_derived.py"
    config.write_text(f"_base_ = {paths!r}\n{body}")
    return config


DETECTION = dict(
    library="mmdet",
    bases=["schedules/schedule_1x.py", "default_runtime.py"],
    body="lr_config = dict(warmup_iters=3, step=[1])\nrunner = dict(max_epochs=2)\ncustom_hooks = []\n"
    "log_config = dict(interval=2, hooks=[dict(type='TextLoggerHook'), dict(type='TensorboardLoggerHook')])\n"
    "checkpoint_config = dict(interval=1, max_keep_ckpts=1)\n",
)
SEGMENTATION = dict(
    library="mmseg",
    bases=["schedules/schedule_20k.py", "default_runtime.py"],
    body="runner = dict(max_iters=8)\ncheckpoint_config = dict(interval=4)\nlog_config = dict(interval=2)\n",
)
CLASSIFICATION = dict(
    library="mmcls",
    bases=["schedules/imagenet_bs256_200e_coslr_warmup.py", "default_runtime.py"],
    body="lr_config = dict(warmup_iters=4)\nrunner = dict(max_epochs=2)\nlog_config = dict(interval=2)\n"
    "momentum_config = dict(policy='CosineAnnealing', min_momentum_ratio=0.5, by_epoch=False)\n",
)


def load(tmp_path, case):
    from mmcv import Config

    return Config.fromfile(str(derived(tmp_path, **case)))


def reference_registration(cfg, hooks):
    """What OpenMMLab 1.x's train scripts register on the runner."""

    def register(runner):
        runner.register_training_hooks(cfg.lr_config, cfg.optimizer_config, cfg.checkpoint_config, cfg.log_config,
                                       cfg.get("momentum_config", None), custom_hooks_config=hooks)  # fmt: skip

    return register


def optimizer_of(cfg):
    options = {k: v for k, v in cfg.optimizer.items() if k != "type"}
    return lambda params: getattr(torch.optim, cfg.optimizer.type)(params, **options)


def describe(hooks):
    return [(type(h).__name__, h.priority, getattr(h, "by_epoch", None), getattr(h, "interval", None)) for h in hooks]


@pytest.mark.parametrize("case", [DETECTION, SEGMENTATION, CLASSIFICATION], ids=lambda c: c["library"])
def test_from_file_trains_as_the_runner_with_register_training_hooks(case, tmp_path):
    cfg = load(tmp_path, case)
    runner = cfg.runner.type
    limits = dict(max_epochs=cfg.runner.max_epochs) if runner == "EpochBasedRunner" else dict(max_epochs=None, max_iters=cfg.runner.max_iters)  # fmt: skip
    ref_recorder, our_recorder = Recorder(), Recorder()
    real = run_mmcv(reference_registration(load(tmp_path, case), [ref_recorder]), tmp_path / "mmcv", runner=runner,
                    optimizer=optimizer_of(cfg), meta=dict(exp_name="cfg"), **limits)  # fmt: skip
    with pytest.warns(UserWarning, match="ignores keys .*optimizer"):
        adapter = MMCVAdapter.from_file(derived(tmp_path, **case), custom_hooks=[our_recorder],
                                        work_dir=str(tmp_path / "lightning"), meta=dict(exp_name="cfg"))  # fmt: skip
    assert describe(adapter.hooks) == describe(real.hooks)
    trainer = run_lightning(adapter, tmp_path / "lightning", optimizer=optimizer_of(cfg))
    assert our_recorder.seen == ref_recorder.seen
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))
    assert sorted(os.listdir(tmp_path / "lightning")) == sorted(os.listdir(tmp_path / "mmcv"))
    name = f"{TIMESTAMP}.log.json"
    assert _log(tmp_path / "lightning" / name) == _log(tmp_path / "mmcv" / name)


def _log(path):
    skip = ("time", "data_time", "eta", "memory")
    return [{k: v for k, v in json.loads(line).items() if k not in skip} for line in path.read_text().splitlines()]


def test_from_config_registers_as_iter_based_runner_with_fp16_and_custom_priorities(tmp_path):
    configs = dict(
        lr_config=dict(policy="step", step=[1]), momentum_config=dict(policy="cyclic"),
        optimizer_config=dict(grad_clip=dict(max_norm=1)), checkpoint_config=dict(interval=1),
        log_config=dict(interval=1, hooks=[dict(type="TextLoggerHook")]),
        custom_hooks=[dict(type="EMAHook", priority="NORMAL"), dict(type="EmptyCacheHook", priority=5)],
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adapter = MMCVAdapter.from_config(**copy.deepcopy(configs), runner=dict(type="IterBasedRunner", max_iters=4),
                                          fp16=dict(loss_scale=512.0))  # fmt: skip
        model = ToyModel()
        real = R.IterBasedRunner(model, work_dir=str(tmp_path), logger=logging.getLogger("mmcv"), max_iters=4)
        # OpenMMLab 1.x's train scripts: optimizer_config plus fp16 make an Fp16OptimizerHook
        fp16 = R.Fp16OptimizerHook(**configs.pop("optimizer_config"), loss_scale=512.0)
        real.register_training_hooks(optimizer_config=fp16, custom_hooks_config=configs.pop("custom_hooks"), **configs)
    assert describe(adapter.hooks) == describe(real.hooks)
    assert [type(h).__name__ for h in adapter.hooks][:2] == ["EmptyCacheHook", "StepLrUpdaterHook"]
    assert adapter.trainer_kwargs() == dict(max_steps=4, max_epochs=-1)


def test_misspelled_hook_type_and_config_key_are_named():
    with pytest.raises(ConfigError, match=r"custom_hooks\[0\]: unknown hook type 'EMAHok'.*Did you mean: EMAHook"):
        MMCVAdapter.from_config(custom_hooks=[dict(type="EMAHok")])
    with pytest.raises(ConfigError, match=r"lr_confg.*Did you mean: lr_config"):
        MMCVAdapter.from_config(custom_hooks=[dict(type="EMAHook")], lr_confg=dict(policy="step", step=[1]))


def test_build_callbacks_section(tmp_path):
    [adapter] = build_callbacks({"mmcv": {
        "lr_config": {"policy": "step", "step": [1]}, "optimizer_config": {"grad_clip": None},
        "checkpoint_config": {"interval": 1}, "runner": {"type": "EpochBasedRunner", "max_epochs": 1},
        "work_dir": str(tmp_path),
    }})  # fmt: skip
    assert isinstance(adapter, MMCVAdapter)
    assert [type(h).__name__ for h in adapter.hooks] == ["StepLrUpdaterHook", "OptimizerHook", "CheckpointHook",
                                                         "IterTimerHook"]  # fmt: skip
    with pytest.raises(ConfigError, match=r"mmcv\.wrk_dir.*Did you mean: work_dir"):
        build_callbacks({"mmcv": {"checkpoint_config": {"interval": 1}, "wrk_dir": "x"}})


def test_a_trainer_other_than_the_runner_config_is_refused(tmp_path):
    adapter = MMCVAdapter([R.OptimizerHook()], runner=dict(type="EpochBasedRunner", max_epochs=2))
    with pytest.raises(ValueError, match=r"Trainer\(max_epochs=2\), but this Trainer has max_epochs=3"):
        run_lightning(adapter, tmp_path, max_epochs=3)


def test_hook_objects_are_ordered_as_register_hook_orders_them(tmp_path):
    def hooks():
        made = [R.TextLoggerHook(), R.EMAHook(), R.StepLrUpdaterHook(step=[1]), R.IterTimerHook(), R.OptimizerHook(),
                R.CheckpointHook()]  # fmt: skip
        for hook, priority in zip(made, ("VERY_LOW", None, "VERY_HIGH", "LOW", 40, None)):
            if priority is not None:
                hook.priority = priority
        return made

    real = R.EpochBasedRunner(ToyModel(), work_dir=str(tmp_path), logger=logging.getLogger("mmcv"), max_epochs=1)
    for hook in hooks():
        real.register_hook(hook, priority=vars(hook).pop("priority", "NORMAL"))
    ours = hooks()
    given = [vars(h).get("priority") for h in ours]
    adapter = MMCVAdapter(ours)
    assert [type(h).__name__ for h in adapter.hooks] == [type(h).__name__ for h in real.hooks]
    assert [vars(h).get("priority") for h in ours] == given  # as given; a run sets register_hook's (test_teardown.py)
    assert [type(h).__name__ for h in adapter.hooks] == ["StepLrUpdaterHook", "OptimizerHook", "EMAHook",
                                                         "CheckpointHook", "IterTimerHook", "TextLoggerHook"]  # fmt: skip
