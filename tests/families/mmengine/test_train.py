"""``lightning-hooks train CONFIG.py`` against OpenMMLab's ``tools/train.py`` (``Runner.from_cfg(cfg).train()``).

Each case is a real config shipped with an OpenMMLab library, as the ``_base_`` of a small derived config that swaps
in a tiny generated dataset (tests/helpers/train_kit.py), smaller layers and no pretrained weights, as a user's own
config does. Both hosts train it from the same file with ``randomness=dict(seed=0)``; the losses, learning rates and
metrics of every iteration (``scalars.json``), the work-dir files, the config dump and the final checkpoint (weights,
optimizer and scheduler state) must be bitwise the same.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch
import train_kit  # registers the tiny datasets
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmengine.registry import HOOKS, OPTIM_WRAPPERS
from mmengine.runner import Runner
from mmengine.visualization import Visualizer

from lightning_hooks import train as dispatcher
from lightning_hooks.families.mmengine.module import _names_amp
from lightning_hooks.core.config_kind import MMENGINE, OPENMMLAB_1X, ConfigFileError, config_kind
from lightning_hooks.families.mmengine.train import load_config, parser
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env

_LIBRARIES = {name: Path(__import__(name).__file__).parent / ".mim" / "configs" for name in ("mmpretrain", "mmseg", "mmdet")}
TIMING = {"time", "data_time", "eta", "memory"}
STAMP = re.compile(r"\d{8}_\d{6}")

#: (shipped config, the derived config's own lines)
CASES = {
    # epoch-based, with validation (Accuracy), MultiStepLR, RandomCrop / RandomFlip on the train images
    "mmpretrain-resnet18-cifar": ("mmpretrain", "resnet/resnet18_8xb16_cifar10.py", train_kit.resnet_cifar() + """
param_scheduler = dict(milestones=[1])
train_cfg = dict(max_epochs=2)
"""),
    # MMEngine's OptimWrapper steps: gradient clipping (grad_norm in the logs) and accumulation over 2 iterations, one
    # of them across the validation between the epochs (3 iterations each)
    "mmpretrain-resnet18-cifar-accumulate": ("mmpretrain", "resnet/resnet18_8xb16_cifar10.py", train_kit.resnet_cifar()
                                             + """
optim_wrapper = dict(accumulative_counts=2, clip_grad=dict(max_norm=1.0))
train_cfg = dict(max_epochs=2)
"""),
    # iteration-based (InfiniteSampler), validation every 2 iterations (IoUMetric), AdamW with paramwise_cfg,
    # LinearLR + PolyLR by iteration, SyncBN reverted on one process
    "mmseg-segformer-b0": ("mmseg", "segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py", """
model = dict(data_preprocessor=dict(size=(32, 32)), backbone=dict(init_cfg=None),
             decode_head=dict(channels=32, num_classes=4))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=6, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackSegInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=2, seed=2, _delete_=True, pipeline=[dict(type="PackSegInputs")]))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=4, val_interval=2)
default_hooks = dict(checkpoint=dict(interval=2))
"""),
    # epoch-based detector, training only: AspectRatioBatchSampler, LinearLR warm-up by iteration + MultiStepLR
    "mmdet-retinanet-r18": ("mmdet", "retinanet/retinanet_r18_fpn_1x_coco.py", """
model = dict(backbone=dict(init_cfg=None, stem_channels=16, base_channels=16),
             neck=dict(in_channels=[16, 32, 64, 128], out_channels=32),
             bbox_head=dict(num_classes=2, in_channels=32, feat_channels=32, stacked_convs=1))
""" + train_kit.TINY_DETECTION_TRAIN + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=2)
"""),
}
COMMON = """
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
"""


def derived_config(directory: Path, case: str) -> Path:
    """The case's config file in ``directory``: the shipped config as ``_base_``, then the case's lines."""
    library, shipped, lines = CASES[case]
    path = directory / f"{case}.py"
    path.write_text(f"_base_ = [{str(_LIBRARIES[library] / shipped)!r}]\n{lines}{COMMON}")
    return path


def run_runner(path: Path, work_dir: Path) -> None:
    """``tools/train.py CONFIG --work-dir DIR``: the config's work dir, then ``Runner.from_cfg(cfg).train()``, as in a
    process of its own: mmseg's and mmdet's configs name their visualizer "visualizer", and the Runner would take an
    instance of that name an earlier test built (with its save_dir) instead of building its own."""
    cfg = Config.fromfile(str(path))
    cfg.work_dir = str(work_dir)
    for cls in _subclasses(Visualizer):
        cls._instance_dict.pop(cfg.visualizer.get("name"), None)
    Runner.from_cfg(cfg).train()


def _subclasses(cls: type) -> list[type]:
    return [cls] + [sub for child in cls.__subclasses__() for sub in _subclasses(child)]


def scalars(work_dir: Path) -> list[dict[str, Any]]:
    """``{timestamp}/vis_data/scalars.json`` without wall-clock values."""
    (stamp,) = [d for d in os.listdir(work_dir) if STAMP.fullmatch(d)]
    lines = (work_dir / stamp / "vis_data" / "scalars.json").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def listing(work_dir: Path) -> list[str]:
    """Every file under ``work_dir``, timestamps replaced."""
    return sorted(STAMP.sub("STAMP", str(p.relative_to(work_dir))) for p in work_dir.rglob("*") if p.is_file())


def assert_same_run(expected: Path, actual: Path, last: str) -> None:
    assert listing(actual) == listing(expected)
    assert scalars(actual) == scalars(expected)
    for side in (expected, actual):
        assert Path((side / "last_checkpoint").read_text()) == side / last
    (name,) = [f for f in os.listdir(expected) if f.endswith(".py")]
    dump = {side: (side / name).read_text().replace(str(side), "WORK_DIR") for side in (expected, actual)}
    assert dump[actual] == dump[expected]
    ours = torch.load(actual / last, map_location="cpu", weights_only=False)
    theirs = torch.load(expected / last, map_location="cpu", weights_only=False)
    assert ours["state_dict"].keys() == theirs["state_dict"].keys()
    for key, value in theirs["state_dict"].items():
        assert torch.equal(ours["state_dict"][key], value), key
    for key in ("epoch", "iter"):
        assert ours["meta"][key] == theirs["meta"][key]
    for i, state in theirs["optimizer"]["state"].items():
        for key, value in state.items():
            assert torch.equal(torch.as_tensor(ours["optimizer"]["state"][i][key]), torch.as_tensor(value)), (i, key)
    assert ours["optimizer"]["param_groups"] == theirs["optimizer"]["param_groups"]
    # what the OptimWrapper adds to its optimizer's state (base_param_settings with several parameter groups)
    assert ours["optimizer"].keys() == theirs["optimizer"].keys()
    assert _wrapper_extras(ours["optimizer"]) == _wrapper_extras(theirs["optimizer"])
    assert ours["param_schedulers"] == theirs["param_schedulers"]


def _wrapper_extras(entry: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``optimizer`` entry beside the torch optimizer's own keys, tensors as lists."""
    return {key: {k: v.tolist() if isinstance(v, torch.Tensor) else v for k, v in value.items()}
            if isinstance(value, dict) else value
            for key, value in entry.items() if key not in ("state", "param_groups")}  # fmt: skip


@pytest.mark.parametrize(("case", "last"), [
    ("mmpretrain-resnet18-cifar", "epoch_2.pth"), ("mmpretrain-resnet18-cifar-accumulate", "epoch_2.pth"),
    ("mmseg-segformer-b0", "iter_4.pth"), ("mmdet-retinanet-r18", "epoch_2.pth"),
])  # fmt: skip
def test_train_matches_tools_train(tmp_path: Path, case: str, last: str) -> None:
    path = derived_config(tmp_path, case)
    run_runner(path, tmp_path / "runner")
    assert config_kind(str(path)) == MMENGINE
    dispatcher.main([str(path), "--work-dir", str(tmp_path / "lightning")])
    assert_same_run(tmp_path / "runner", tmp_path / "lightning", last)


def test_lightning_logger_vis_backend_sends_the_runs_scalars_to_a_csv_logger(tmp_path: Path) -> None:
    """``LoggerHook``'s scalars (loss, lr, time every iteration; accuracy after each validation) reach the Trainer's
    ``CSVLogger`` through ``dict(type="LightningLoggerVisBackend", prefix="mm/")``, at the steps ``scalars.json`` has
    them (beside what the LightningModule logs itself: the metrics at Lightning's step, and ``epoch``)."""
    from lightning.pytorch.loggers import CSVLogger

    from lightning_hooks.families.mmengine.train import build

    cfg = Config.fromfile(str(derived_config(tmp_path, "mmpretrain-resnet18-cifar")))
    cfg.work_dir = str(tmp_path / "work")
    cfg.visualizer.vis_backends.append(dict(type="LightningLoggerVisBackend", prefix="mm/"))
    trainer, module, data, adapter = build(cfg, logger=CSVLogger(str(tmp_path / "csv"), name="", version=""))
    trainer.fit(module, datamodule=data)
    with open(tmp_path / "csv" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    logged = [(int(r["step"]), name[3:], float(v)) for r in rows for name, v in r.items() if v and name.startswith("mm/")]
    expected = [(line["step"], name, float(value)) for line in scalars(Path(cfg.work_dir)) for name, value in line.items()
                if name != "step"]  # fmt: skip
    assert sorted(x for x in logged if x[1] not in TIMING) == sorted(expected)
    assert {"loss", "lr", "accuracy/top1", "time", "data_time"} <= {name for _, name, _ in logged}


def test_claims_mmengine_configs_and_leaves_mmcv_1x_configs(tmp_path: Path) -> None:
    """``lightning-hooks train`` takes a config with MMEngine's keys, in the file or its ``_base_``, and leaves an
    OpenMMLab 1.x config (``runner=``, ``checkpoint_config``) to another entry point."""
    assert config_kind(str(derived_config(tmp_path, "mmdet-retinanet-r18"))) == MMENGINE
    derived = tmp_path / "only_base.py"
    derived.write_text(f"_base_ = [{str(_LIBRARIES['mmseg'] / 'segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py')!r}]\n")
    assert config_kind(str(derived)) == MMENGINE
    old = tmp_path / "mmcv1x.py"
    old.write_text("runner = dict(type='EpochBasedRunner', max_epochs=12)\ncheckpoint_config = dict(interval=1)\n"
                   "optimizer = dict(type='SGD', lr=0.02)\n")  # fmt: skip
    assert config_kind(str(old)) == OPENMMLAB_1X
    with pytest.raises(ConfigFileError, match="missing.py does not exist"):
        config_kind(str(tmp_path / "missing.py"))
    assert config_kind("config.yaml") is None


def test_flags_change_the_config_as_tools_train_does(tmp_path: Path) -> None:
    """``--work-dir`` (default ``work_dirs/<config name>``), ``--cfg-options``, ``--amp``, ``--resume``,
    ``--auto-scale-lr``, as mmdet's ``tools/train.py`` merges them."""

    path = str(derived_config(tmp_path, "mmpretrain-resnet18-cifar"))
    cfg = load_config(parser().parse_args([path]))
    assert cfg.work_dir == os.path.join("./work_dirs", "mmpretrain-resnet18-cifar") and not cfg.get("resume")
    cfg = load_config(parser().parse_args([path, "--work-dir", "w", "--amp", "--resume", "--auto-scale-lr",
                                           "--cfg-options", "train_cfg.max_epochs=3", "load_from=x.pth"]))  # fmt: skip
    assert cfg.work_dir == "w" and cfg.train_cfg.max_epochs == 3
    assert cfg.optim_wrapper.type == "AmpOptimWrapper" and cfg.optim_wrapper.loss_scale == "dynamic"
    assert cfg.resume is True and cfg.load_from is None  # --resume without a file: the work dir's latest
    assert cfg.auto_scale_lr.enable is True
    cfg = load_config(parser().parse_args([path, "--resume", "ckpt.pth"]))
    assert cfg.resume is True and cfg.load_from == "ckpt.pth"
    bare = tmp_path / "no_scale.py"
    bare.write_text(f"_base_ = [{path!r}]\nauto_scale_lr = None\n")
    with pytest.raises(RuntimeError, match="auto_scale_lr"):
        load_config(parser().parse_args([str(bare), "--auto-scale-lr"]))


#: ``--amp``: MMEngine's AmpOptimWrapper with loss_scale='dynamic', as tools/train.py sets it; it runs only on a GPU
#: (or NPU, MLU, MUSA): on CPU the command says so before training, on a CUDA machine both hosts train with it
AMP_CASE = "mmpretrain-resnet18-cifar"


def _amp_config(tmp_path: Path, work_dir: Path) -> Config:
    path = str(derived_config(tmp_path, AMP_CASE))
    return load_config(parser().parse_args([path, "--amp", "--work-dir", str(work_dir)]))


def test_amp_flag_maps_to_the_amp_optim_wrapper_as_tools_train(tmp_path: Path) -> None:
    cfg = _amp_config(tmp_path, tmp_path / "w")
    assert cfg.optim_wrapper.type == "AmpOptimWrapper" and cfg.optim_wrapper.loss_scale == "dynamic"
    assert cfg.optim_wrapper.optimizer.type == "SGD"  # the rest of the config's optim_wrapper is kept


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU refusal: this machine has CUDA")
def test_amp_on_cpu_is_refused_before_training_with_what_to_do(tmp_path: Path) -> None:
    # the Runner refuses it too (AmpOptimWrapper asserts a GPU), with a bare AssertionError
    cfg = _amp_config(tmp_path, tmp_path / "runner")
    with pytest.raises(AssertionError, match="only available training on gpu"):
        Runner.from_cfg(cfg).train()
    path = str(derived_config(tmp_path, AMP_CASE))
    with pytest.raises(RuntimeError, match=r"AmpOptimWrapper \(`lightning-hooks train --amp` selects it.*CUDA, NPU, "
                                           r"MLU or MUSA device.*without --amp"):  # fmt: skip
        dispatcher.main([path, "--amp", "--work-dir", str(tmp_path / "lightning")])
    assert not list((tmp_path / "lightning").glob("*.pth"))
    # the same check for a wrapper of a multi-optimizer config (mmagic's GANs), and for the class itself
    assert _names_amp(dict(constructor="MultiOptimWrapperConstructor", generator=dict(type="AmpOptimWrapper")))
    assert _names_amp(dict(type=AmpOptimWrapper)) and not _names_amp(dict(type="OptimWrapper", optimizer=dict()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="MMEngine's AmpOptimWrapper needs a CUDA device")
def test_amp_train_matches_tools_train_amp_on_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = derived_config(tmp_path, AMP_CASE)
    cfg = _amp_config(tmp_path, tmp_path / "runner")
    runner = Runner.from_cfg(cfg)
    runner.train()
    type(runner.visualizer)._instance_dict.pop(runner.visualizer.instance_name)
    dispatcher.main([str(path), "--amp", "--work-dir", str(tmp_path / "lightning")])
    expected, actual = tmp_path / "runner", tmp_path / "lightning"
    assert listing(actual) == listing(expected)
    ours, theirs = scalars(actual), scalars(expected)
    assert [r.keys() for r in ours] == [r.keys() for r in theirs]
    for a, b in zip(ours, theirs):  # float16 kernels: close, not bitwise
        assert a == pytest.approx(b, rel=1e-3, abs=1e-4)
    last = "epoch_2.pth"
    mine = torch.load(actual / last, map_location="cpu", weights_only=False)
    theirs_ckpt = torch.load(expected / last, map_location="cpu", weights_only=False)
    for key, value in theirs_ckpt["state_dict"].items():
        torch.testing.assert_close(mine["state_dict"][key], value, rtol=1e-3, atol=1e-4, msg=key)
    assert mine["optimizer"]["loss_scaler"] == theirs_ckpt["optimizer"]["loss_scaler"]
    # then --resume for a third epoch: both go on from the saved loss scale
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # MMEngine's resume loads its pickled MessageHub
    more = ["--resume", "--cfg-options", "train_cfg.max_epochs=3"]
    Runner.from_cfg(load_config(parser().parse_args([str(path), "--amp", "--work-dir", str(expected), *more]))).train()
    dispatcher.main([str(path), "--amp", "--work-dir", str(actual), *more])
    mine, theirs_ckpt = (torch.load(side / "epoch_3.pth", map_location="cpu", weights_only=False)["optimizer"]
                         for side in (actual, expected))  # fmt: skip
    assert mine.keys() == theirs_ckpt.keys() and mine["loss_scaler"] == theirs_ckpt["loss_scaler"]


@pytest.fixture
def amp_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """MMEngine's AmpOptimWrapper built on this CPU machine: its device check passes (the wrapper's and
    MMEngineModule's) and its loss scaler is torch's CPU ``GradScaler`` (the CUDA one disables itself here and keeps
    no state). Both hosts get the same wrapper."""
    import mmengine.device
    from mmengine.optim.optimizer import amp_optimizer_wrapper

    monkeypatch.setattr(amp_optimizer_wrapper, "is_cuda_available", lambda: True)
    monkeypatch.setattr(mmengine.device, "is_cuda_available", lambda: True)
    monkeypatch.setattr(amp_optimizer_wrapper, "GradScaler", functools.partial(torch.amp.GradScaler, "cpu"))


def test_amp_loss_scale_is_saved_and_resumed_as_tools_train(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            amp_on_cpu: None) -> None:  # fmt: skip
    """``--amp`` for one epoch, then ``--resume`` to the second, under both hosts: each checkpoint's ``optimizer`` is
    the Runner's ``AmpOptimWrapper.state_dict()`` (its ``loss_scaler`` included), and the resumed run goes on from the
    saved loss scale and growth count (a fresh scaler would count from 0 again)."""
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    path = str(derived_config(tmp_path, AMP_CASE))
    runs = (["--cfg-options", "train_cfg.max_epochs=1"], ["--resume"])
    for args in runs:
        cfg = load_config(parser().parse_args([path, "--amp", "--work-dir", str(tmp_path / "runner"), *args]))
        runner = Runner.from_cfg(cfg)
        runner.train()
        type(runner.visualizer)._instance_dict.pop(runner.visualizer.instance_name)
    for args in runs:
        dispatcher.main([path, "--amp", "--work-dir", str(tmp_path / "lightning"), *args])
    for name in ("epoch_1.pth", "epoch_2.pth"):
        ours, theirs = (torch.load(tmp_path / side / name, map_location="cpu", weights_only=False)["optimizer"]
                        for side in ("lightning", "runner"))  # fmt: skip
        assert ours.keys() == theirs.keys() == {"state", "param_groups", "loss_scaler"}, name
        assert ours["loss_scaler"] == theirs["loss_scaler"], name
        assert ours["param_groups"] == theirs["param_groups"], name
    # 3 iterations an epoch, no overflow: the growth count goes on across the resume
    assert theirs["loss_scaler"]["_growth_tracker"] == 6


@OPTIM_WRAPPERS.register_module(force=True)
class CountingOptimWrapper(OptimWrapper):
    """An ``OptimWrapper`` with state of its own in its ``state_dict``: the updates it made."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.updates = 0

    def step(self, **kwargs: Any) -> None:
        super().step(**kwargs)
        self.updates += 1

    def state_dict(self) -> dict:
        return {**super().state_dict(), "updates": self.updates}

    def load_state_dict(self, state_dict: dict) -> None:
        self.updates = state_dict.pop("updates")
        super().load_state_dict(state_dict)


@HOOKS.register_module(force=True)
class RecordUpdatesHook(Hook):
    """Records ``runner.optim_wrapper``'s ``updates`` and the step count its schedulers keep, after each iteration."""

    seen: list[tuple[int, int]] = []

    def after_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        RecordUpdatesHook.seen.append((runner.optim_wrapper.updates, runner.optim_wrapper._global_step))


def test_optim_wrapper_subclass_state_is_the_hooks_saved_and_resumed_as_tools_train(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config's own ``OptimWrapper`` subclass: hooks see it as ``runner.optim_wrapper``, the checkpoints hold its
    ``state_dict()`` and a ``--resume`` restores it, under both hosts alike."""
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    path = tmp_path / "counting.py"
    path.write_text(f"_base_ = [{str(derived_config(tmp_path, 'mmpretrain-resnet18-cifar'))!r}]\n"
                    "optim_wrapper = dict(type='CountingOptimWrapper')\n"
                    "custom_hooks = [dict(type='RecordUpdatesHook')]\n")
    path = str(path)
    runs = (["--cfg-options", "train_cfg.max_epochs=1"], ["--resume"])
    seen = {}
    for side in ("runner", "lightning"):
        RecordUpdatesHook.seen = []
        for args in runs:
            if side == "runner":
                cfg = load_config(parser().parse_args([path, "--work-dir", str(tmp_path / side), *args]))
                runner = Runner.from_cfg(cfg)
                runner.train()
                type(runner.visualizer)._instance_dict.pop(runner.visualizer.instance_name)
            else:
                dispatcher.main([path, "--work-dir", str(tmp_path / side), *args])
        seen[side] = RecordUpdatesHook.seen
    assert seen["lightning"] == seen["runner"]
    assert [updates for updates, _ in seen["runner"]] == [1, 2, 3, 4, 5, 6]
    for name, updates in (("epoch_1.pth", 3), ("epoch_2.pth", 6)):
        ours, theirs = (torch.load(tmp_path / side / name, map_location="cpu", weights_only=False)["optimizer"]
                        for side in ("lightning", "runner"))  # fmt: skip
        assert ours.keys() == theirs.keys() and ours["updates"] == theirs["updates"] == updates, name


@pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                    reason="needs torch.distributed with the gloo backend")  # fmt: skip
def test_ddp_two_processes_match_the_runner_launched_with_two(tmp_path: Path) -> None:
    """``lightning-hooks train CONFIG --devices 2 --strategy ddp`` (CPU, gloo) against the Runner under torchrun with
    two processes: ``DefaultSampler`` shards the data by rank, gradients are averaged, rank 0 logs and saves; the
    scalars of every iteration and the final weights and optimizer state are the same."""
    import subprocess
    import sys

    path = derived_config(tmp_path, "mmpretrain-resnet18-cifar")
    path.write_text(path.read_text() + "custom_imports = dict(imports=['train_kit'], allow_failed_imports=False)\n")
    here = HELPERS  # runner_train.py
    env = subprocess_env(drop=(*DDP_LAUNCH_VARIABLES, "LIGHTNING_HOOKS_MMENGINE_SEED"))
    commands = {
        "runner": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29533",
                   str(here / "runner_train.py"), str(path), str(tmp_path / "runner")],
        "lightning": [sys.executable, "-m", "lightning_hooks", "train", str(path), "--work-dir", str(tmp_path / "lightning"),
                      "--devices", "2", "--strategy", "ddp", "--accelerator", "cpu"],
    }  # fmt: skip
    for name, command in commands.items():
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
        assert proc.returncode == 0, f"{name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    expected, actual = tmp_path / "runner", tmp_path / "lightning"
    assert scalars(actual) == scalars(expected)
    ours = torch.load(actual / "epoch_2.pth", map_location="cpu", weights_only=False)
    theirs = torch.load(expected / "epoch_2.pth", map_location="cpu", weights_only=False)
    for key, value in theirs["state_dict"].items():
        assert torch.equal(ours["state_dict"][key], value), key
    for i, state in theirs["optimizer"]["state"].items():
        for key, value in state.items():
            assert torch.equal(torch.as_tensor(ours["optimizer"]["state"][i][key]), torch.as_tensor(value)), (i, key)


def test_resume_continues_as_tools_train_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One epoch, then ``--resume`` (the work dir's ``last_checkpoint``) to the second, under both hosts: the same
    files and the same final weights and optimizer state."""
    # MMEngine's own resume loads its checkpoint (which pickles MessageHub buffers) with torch.load's default
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    path = derived_config(tmp_path, "mmpretrain-resnet18-cifar")
    for extra in ({"train_cfg.max_epochs": 1}, {"resume": True}):
        cfg = Config.fromfile(str(path))
        cfg.work_dir = str(tmp_path / "runner")
        cfg.merge_from_dict(extra)
        runner = Runner.from_cfg(cfg)
        runner.train()
        type(runner.visualizer)._instance_dict.pop(runner.visualizer.instance_name)
    dispatcher.main([str(path), "--work-dir", str(tmp_path / "lightning"), "--cfg-options", "train_cfg.max_epochs=1"])
    dispatcher.main([str(path), "--work-dir", str(tmp_path / "lightning"), "--resume"])
    expected, actual = tmp_path / "runner", tmp_path / "lightning"
    # the work dir's own files (two runs may share a second, and so one {timestamp} folder)
    own = {side: {f for f in os.listdir(side) if not STAMP.fullmatch(f)} for side in (expected, actual)}
    assert own[actual] == own[expected] == {"epoch_1.pth", "epoch_2.pth", "last_checkpoint", path.name}
    ours = torch.load(actual / "epoch_2.pth", map_location="cpu", weights_only=False)
    theirs = torch.load(expected / "epoch_2.pth", map_location="cpu", weights_only=False)
    for key, value in theirs["state_dict"].items():
        assert torch.equal(ours["state_dict"][key], value), key
    for i, state in theirs["optimizer"]["state"].items():
        for key, value in state.items():
            assert torch.equal(torch.as_tensor(ours["optimizer"]["state"][i][key]), torch.as_tensor(value)), (i, key)
