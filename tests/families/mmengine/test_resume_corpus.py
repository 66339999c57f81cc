"""Resume at an arbitrary iteration, shipped OpenMMLab 2.0 configs: ``lightning-hooks train CONFIG`` stopped after
iteration k (mid-epoch for the epoch-based ones) and resumed with ``--resume``, against ``tools/train.py --resume``
(``Runner.from_cfg(cfg).train()``), the Runner's run stopped and resumed the same way (tests/helpers/resume_kit.py).

Each case is a shipped config as the ``_base_`` of a small derived config: tiny generated data (train_kit.py),
tiny widths, a few iterations, ``CheckpointHook`` by iteration (so iteration k has a checkpoint). Both resumed runs
must agree bitwise on this CPU: the loss, learning rates and metrics of every iteration, the log lines of training,
the work-dir files and each checkpoint's weights, EMA weights, optimizer, scheduler and message-hub state. A failure
names the config, the quantity and the first iteration where the two sides part.

mmagic's SRCNN config validates with mmagic's ``MultiValLoop`` and its own ``Evaluator`` (MAE, PSNR, SSIM); its
modules import without the packages this venv lacks (tests/helpers/mmagic_parts.py). Not here: mmpose, whose models
import xtcocotools, which this venv lacks.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import importlib.util

import pytest
import train_kit  # noqa: F401  registers the tiny datasets
from resume_kit import (
    first_difference,
    killed_then_resumed,
    run_lightning,
    run_runner,
    scalars,
    stopped_then_resumed,
)

_LIBRARIES = ("mmpretrain", "mmseg", "mmdet", "mmagic")
_CONFIGS = {name: Path(importlib.util.find_spec(name).origin).parent / ".mim" / "configs" for name in _LIBRARIES
            if importlib.util.find_spec(name)}  # fmt: skip

_CIFAR_DATA = """train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n=12, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5, direction="horizontal"), dict(type="PackInputs")]))
val_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n=6, seed=2, _delete_=True, pipeline=[dict(type="PackInputs")]))
test_dataloader = val_dataloader
"""
#: the swin schedule (LinearLR warm-up by iteration for 20 epochs, then CosineAnnealingLR) over 2 epochs
_SWIN_SCHEDULE = """param_scheduler = [
    dict(type="LinearLR", start_factor=1e-3, by_epoch=True, end=1, convert_to_iter_based=True),
    dict(type="CosineAnnealingLR", eta_min=1e-5, by_epoch=True, begin=1)]
train_cfg = dict(max_epochs=2)
"""

#: name: (library, shipped config, derived lines, the iteration the run stops after)
CASES = {
    # epoch-based (3 iterations an epoch), Accuracy each epoch, MultiStepLR; stopped in the second epoch
    "mmpretrain-resnet18-cifar": ("mmpretrain", "resnet/resnet18_8xb16_cifar10.py", _CIFAR_DATA + """
model = dict(backbone=dict(stem_channels=8, base_channels=8), head=dict(in_channels=64))
param_scheduler = dict(milestones=[2])
train_cfg = dict(max_epochs=3)
""", 4),
    # a transformer: DeiT (VisionTransformer) with Mixup / CutMix batch augments drawing from torch's generator,
    # AdamW with paramwise_cfg, clip_grad, LinearLR warm-up by iteration + CosineAnnealingLR
    "mmpretrain-deit-tiny": ("mmpretrain", "deit/deit-tiny_4xb256_in1k.py", _CIFAR_DATA + """
model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=32),
                           img_size=32, patch_size=8, drop_path_rate=0.1),
             head=dict(num_classes=10, in_channels=16))
data_preprocessor = dict(num_classes=10)
""" + _SWIN_SCHEDULE, 2),
    # ConvNeXt with EMAHook (ema_state_dict in the checkpoints, the EMA weights validated)
    "mmpretrain-convnext-tiny-ema": ("mmpretrain", "convnext/convnext-tiny_32xb128_in1k.py", _CIFAR_DATA + """
model = dict(backbone=dict(arch=dict(_delete_=True, depths=[1, 1, 1, 1], channels=[8, 8, 16, 16]), drop_path_rate=0.1),
             head=dict(num_classes=10, in_channels=16), train_cfg=None)
data_preprocessor = dict(num_classes=10)
""" + _SWIN_SCHEDULE, 4),
    # one-stage detector, epoch-based (2 iterations an epoch), AspectRatioBatchSampler, LinearLR + MultiStepLR
    "mmdet-retinanet-r18": ("mmdet", "retinanet/retinanet_r18_fpn_1x_coco.py", """
model = dict(backbone=dict(init_cfg=None, stem_channels=16, base_channels=16),
             neck=dict(in_channels=[16, 32, 64, 128], out_channels=32),
             bbox_head=dict(num_classes=2, in_channels=32, feat_channels=32, stacked_convs=1))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyDetection", n=4, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackDetInputs")]))
""" + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=3)
""", 3),
    # DETR-style detector: a transformer encoder / decoder with dropout, Hungarian matching, AdamW with clip_grad and
    # paramwise_cfg, MultiStepLR; epoch-based (2 iterations an epoch), stopped in the second epoch
    "mmdet-detr-r18": ("mmdet", "detr/detr_r18_8xb2-500e_coco.py", """
_layer = dict(self_attn_cfg=dict(embed_dims=16, num_heads=2), ffn_cfg=dict(embed_dims=16, feedforward_channels=32))
model = dict(num_queries=10,
             backbone=dict(init_cfg=None, stem_channels=8, base_channels=8), neck=dict(in_channels=[64], out_channels=16),
             encoder=dict(num_layers=1, layer_cfg=_layer),
             decoder=dict(num_layers=1, layer_cfg=dict(_layer, cross_attn_cfg=dict(embed_dims=16, num_heads=2))),
             positional_encoding=dict(num_feats=8), bbox_head=dict(num_classes=2, embed_dims=16))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyDetection", n=4, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackDetInputs")]))
""" + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=3)
""", 3),
    # iteration-based segmentor (InfiniteSampler), IoUMetric every 3 iterations, drop path in the MiT backbone,
    # AdamW + LinearLR + PolyLR by iteration; stopped where it validates next (the checkpoint precedes that
    # validation, which neither host runs on resuming)
    "mmseg-segformer-b0": ("mmseg", "segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py", """
model = dict(data_preprocessor=dict(size=(32, 32)), backbone=dict(init_cfg=None),
             decode_head=dict(channels=32, num_classes=4))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=6, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackSegInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=2, seed=2, _delete_=True, pipeline=[dict(type="PackSegInputs")]))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=9, val_interval=3)
""", 6),
    # super-resolution: mmagic's MultiValLoop with mmagic's Evaluator (MAE, PSNR, SSIM), BaseEditModel / SRCNN,
    # CosineRestartLR, iteration-based (InfiniteSampler); the config's MultiTestLoop evaluators are never built
    "mmagic-srcnn": ("mmagic", "srcnn/srcnn_x4k915_1xb16-1000k_div2k.py", """
model = dict(generator=dict(channels=(3, 8, 4, 3)))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySR", n=4, seed=1, _delete_=True, pipeline=[dict(type="PackInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySR", n=2, seed=2, _delete_=True, pipeline=[dict(type="PackInputs")]))
train_cfg = dict(max_iters=5, val_interval=2)
""", 3),
}


def derived_config(directory: Path, case: str) -> Path:
    """The case's config: the shipped config as ``_base_``, the case's lines, then a log line every iteration,
    ``seed=0``, a checkpoint every ``stop`` iterations (and at the end) in the work dir (mmagic's configs name a
    shared ``out_dir``) and the hook that stops the first run."""
    library, shipped, lines, stop = CASES[case]
    path = directory / f"{case}.py"
    path.write_text(f"_base_ = [{str(_CONFIGS[library] / shipped)!r}]\n{lines}"
                    f"default_hooks = dict(logger=dict(interval=1), checkpoint=dict(by_epoch=False, interval={stop}, out_dir=None))\n"
                    "randomness = dict(seed=0)\n"
                    "custom_hooks = [*_base_.get('custom_hooks', []), dict(type='StopRunHook')]\n")  # fmt: skip
    return path


@pytest.fixture(autouse=True)
def _resume_loads_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmengine.runner.loops

    # MMEngine's own resume loads the message hub's pickled buffers with torch.load's default
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    # MMEngine's _InfiniteDataloaderIterator sleeps 2 s whenever it restarts a finite loader
    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))


@pytest.fixture
def library(case: str) -> str:
    """The case's library, imported as its configs need (mmagic: its SR parts); skipped where not installed."""
    name = CASES[case][0]
    if name not in _CONFIGS:
        pytest.skip(f"{name} is not installed")
    if name == "mmagic":
        import mmagic_parts

        mmagic_parts.import_sr_parts()
    return name


@pytest.mark.parametrize("case", sorted(CASES))
def test_resume_at_an_arbitrary_iteration_continues_as_the_runners_resume(tmp_path: Path, case: str, library: str) -> None:
    stop = CASES[case][3]
    runner, lightning = stopped_then_resumed(derived_config(tmp_path, case), tmp_path, stop)
    checkpoints = sorted(path.name for path in runner.glob("*.pth"))
    assert f"iter_{stop}.pth" in checkpoints and len(checkpoints) > 1, checkpoints
    assert first_difference(case, runner, lightning, checkpoints) is None


@pytest.mark.parametrize("case", ["mmagic-srcnn"])
def test_mmagic_multi_val_loop_config_trains_and_validates_as_the_runner(tmp_path: Path, case: str, library: str) -> None:
    """A fresh run of mmagic's SRCNN config (``MultiValLoop``, mmagic's ``Evaluator`` given each metric group with
    every batch, a list of ``MultiTestLoop`` evaluators the train run never builds) against the Runner's."""
    config = derived_config(tmp_path, case)
    runner, lightning = tmp_path / "runner", tmp_path / "lightning"
    run_runner(config, runner)
    run_lightning(config, lightning)
    assert any("PSNR" in row for row in __import__("resume_kit").scalars(runner))
    assert first_difference(case, runner, lightning, sorted(path.name for path in runner.glob("*.pth"))) is None


#: the killed runs: the case, the checkpoint the kill follows, the iteration the process is held before
KILLED = ("mmpretrain-resnet18-cifar", 4, 6)


def test_resume_after_a_sigkill_continues_as_the_runners_resume(tmp_path: Path) -> None:
    """``lightning-hooks train`` and ``tools/train.py`` of a shipped config, each in a process of its own, killed with
    SIGKILL once ``iter_4.pth`` is written (mid-epoch; the kill lands in iteration 5 or before, its work lost), then
    resumed with ``--resume`` (``resume=True``): the resumed runs agree as in the corpus (losses, lr, metrics, log
    lines, files, every checkpoint's weights and optimizer state)."""
    case, checkpoint, hold = KILLED
    config = derived_config(tmp_path, case)
    config.write_text(config.read_text() + "custom_hooks = [*custom_hooks, dict(type='HoldHook')]\n"
                      "custom_imports = dict(imports=['train_kit', 'resume_kit'], allow_failed_imports=False)\n")  # fmt: skip
    runner, lightning = killed_then_resumed(config, tmp_path, checkpoint, hold)
    checkpoints = sorted(path.name for path in runner.glob("*.pth"))
    assert checkpoints == ["iter_4.pth", "iter_8.pth", "iter_9.pth"], checkpoints
    assert scalars(runner)[0]["step"] == checkpoint + 1  # the resumed run starts after the checkpoint
    assert first_difference(case, runner, lightning, checkpoints) is None
