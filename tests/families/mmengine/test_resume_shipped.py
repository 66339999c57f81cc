"""Shipped OpenMMLab 2.0 configs outside the resume corpus (tests/families/mmengine/test_resume_corpus.py) where
``lightning-hooks train`` once parted from the Runner: each the smallest derived config that shows the difference,
stopped at an arbitrary iteration and resumed with ``--resume`` against ``tools/train.py`` stopped and resumed the
same way (tests/helpers/resume_kit.py), compared bitwise on this CPU as in the corpus.

- ``mmdet-retinanet-90k``: mmdet's iteration-based RetinaNet (``IterBasedTrainLoop``, ``InfiniteSampler`` under
  ``AspectRatioBatchSampler``), whose ResNet keeps its batch norms in eval mode (``norm_eval=True``) through its own
  ``train()``. A resumed iteration-based fit gets no ``on_train_epoch_start`` from Lightning; the model trained in the
  modes it was built with (batch norms in train mode) where the Runner calls ``model.train()`` before each iteration:
  the loss parted at the first resumed iteration.
- ``mmseg-beit-large-upernet-accum``: mmseg's BEiT-large UPerNet, whose optimizer wrapper accumulates gradients over
  two iterations (``accumulative_counts=2``; in fp32, as the shipped ``AmpOptimWrapper`` needs a GPU under the
  Runner), stopped after iteration 3, inside a window. The Runner resumes the count at ``runner.iter`` (3) and updates
  after iteration 4; the count started at the optimizer steps times the window (2) and updated after iteration 5: the
  validation after iteration 4 parted.
- ``mmseg-fcn-r18-random-val``: an iteration-based config whose validation pipeline draws from NumPy's generator, as
  mmagic's LIIF validates (``RandomDownSampling``; found on ``liif-edsr-norm_c64b16_1xb16-1000k_div2k``): here mmseg's
  FCN on ResNet-18 validating flipped images every 2 iterations. Lightning drew each train batch one ahead (a loader
  without length), so the batch after a validation took its random flips before the validation's: the loss parted at
  the first iteration after it (iteration 3). ``mmseg-fcn-r18-random-val-2-workers``: the same on 2 persistent loader
  workers, as the shipped configs train.

:func:`test_an_epoch_based_run_resumes_as_the_runners_resume_without_lightnings_cautions`: an epoch-based run
resumed from the checkpoint ``CheckpointHook`` writes by epoch (``after_train_epoch``), the shipped configs' default;
found on mmdet's RTMDet-tiny, whose ``PipelineSwitchHook`` switches the train pipeline in ``before_train_epoch``: the
resumed epoch's first batch was drawn before ``before_train_epoch`` ran, through the old pipeline. And one resumed
from a checkpoint written inside an epoch, found on RTMPose in two processes: Lightning warned that the resume "can
cause unreliable results" though the epoch runs again whole, as under the Runner.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch.utils.data
import train_kit
from resume_kit import (
    StopRun,
    StopRunHook,
    first_difference,
    past_last_stamp,
    pretty_text_once,
    run_lightning,
    run_runner,
    stopped_then_resumed,
)

#: name: (library, its shipped config, derived lines, the iteration the run stops after)
CASES = {
    "mmdet-retinanet-90k": ("mmdet", "retinanet/retinanet_r50_fpn_90k_coco.py", """
model = dict(backbone=dict(init_cfg=None, stem_channels=8, base_channels=8),
             neck=dict(in_channels=[32, 64, 128, 256], out_channels=32),
             bbox_head=dict(num_classes=2, in_channels=32, feat_channels=32, stacked_convs=1))
""" + train_kit.TINY_DETECTION_TRAIN + train_kit.NO_VALIDATION + """train_cfg = dict(max_iters=4, val_interval=100)
param_scheduler = [dict(type="LinearLR", start_factor=0.001, by_epoch=False, begin=0, end=3),
                   dict(type="MultiStepLR", begin=0, end=4, by_epoch=False, milestones=[3], gamma=0.1)]
""", 2),
    "mmseg-beit-large-upernet-accum": ("mmseg", "beit/beit-large_upernet_8xb1-amp-160k_ade20k-640x640.py", """
model = dict(pretrained=None, data_preprocessor=dict(size=(32, 32)),
             backbone=dict(img_size=(32, 32), patch_size=8, embed_dims=16, num_layers=4, num_heads=2, out_indices=[0, 1, 2, 3]),
             neck=dict(embed_dim=16), decode_head=dict(in_channels=[16, 16, 16, 16], channels=16, num_classes=4),
             auxiliary_head=dict(in_channels=16, channels=8, num_classes=4), test_cfg=dict(_delete_=True, mode="whole"))
optim_wrapper = dict(type="OptimWrapper", paramwise_cfg=dict(num_layers=4))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=4, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackSegInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=2, seed=2, _delete_=True, pipeline=[dict(type="PackSegInputs")]))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=5, val_interval=4)
param_scheduler = [dict(type="LinearLR", start_factor=1e-6, by_epoch=False, begin=0, end=3),
                   dict(type="PolyLR", power=1.0, begin=3, end=5, eta_min=0.0, by_epoch=False)]
""", 3),
    "mmseg-fcn-r18-random-val": ("mmseg", "fcn/fcn_r18-d8_4xb2-80k_cityscapes-512x1024.py", """
model = dict(pretrained=None, data_preprocessor=dict(size=(32, 32)),
             backbone=dict(stem_channels=16, base_channels=8), decode_head=dict(in_channels=64, channels=16, num_classes=4),
             auxiliary_head=dict(in_channels=32, channels=8, num_classes=4))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=4, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackSegInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=2, seed=2, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackSegInputs")]))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=5, val_interval=2)
""", 3),
}
#: mmseg's FCN case with the shipped configs' loader workers (2 here, persistent): the Runner's resume advances the
#: loader's iterator past the iterations done with next() ("Advance dataloader 3 steps"), so the workers' random
#: streams (their flips) go on from there; the resumed fit's skip draws them from its iterator alike
_ZERO_WORKERS = "num_workers=0, persistent_workers=False"


def _train_workers(lines: str, persistent: bool) -> str:
    """``lines`` whose train loader (the first loader they define) has 2 workers."""
    return lines.replace(_ZERO_WORKERS, f"num_workers=2, persistent_workers={persistent}", 1)


CASES["mmseg-fcn-r18-random-val-2-workers"] = (*CASES["mmseg-fcn-r18-random-val"][:2],
                                               _train_workers(CASES["mmseg-fcn-r18-random-val"][2], True), 3)  # fmt: skip


def derived_config(directory: Path, case: str) -> Path:
    """The case's config: the shipped config as ``_base_``, the case's lines, a log line every iteration, ``seed=0``,
    a checkpoint every ``stop`` iterations and the hook that stops the first run (resume_kit.StopRunHook)."""
    library, shipped, lines, stop = CASES[case]
    configs = Path(importlib.util.find_spec(library).origin).parent / ".mim" / "configs"  # type: ignore[arg-type]
    path = directory / f"{case}.py"
    path.write_text(f"_base_ = [{str(configs / shipped)!r}]\n{lines}"
                    f"default_hooks = dict(logger=dict(interval=1), checkpoint=dict(by_epoch=False, interval={stop}))\n"
                    "randomness = dict(seed=0)\n"
                    "custom_hooks = [*_base_.get('custom_hooks', []), dict(type='StopRunHook')]\n")  # fmt: skip
    return path


@pytest.fixture(autouse=True)
def _runner_resume(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmengine.runner.loops
    from mmengine.config import Config

    # MMEngine's own resume loads the message hub's pickled buffers with torch.load's default
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    # MMEngine's _InfiniteDataloaderIterator sleeps 2 s whenever it restarts a finite loader
    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))
    monkeypatch.setattr(Config, "pretty_text", pretty_text_once())
    # a loader iterator with workers let go unexhausted (an iteration-based run's) waits this long for each worker
    # to see it is done, at the garbage collection (5 s)
    monkeypatch.setattr(torch.utils.data._utils, "MP_STATUS_CHECK_INTERVAL", 0.2)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_resumed_run_continues_as_the_runners_resume(tmp_path: Path, case: str) -> None:
    stop = CASES[case][3]
    runner, lightning = stopped_then_resumed(derived_config(tmp_path, case), tmp_path, stop)
    checkpoints = sorted(path.name for path in runner.glob("*.pth"))
    assert f"iter_{stop}.pth" in checkpoints and len(checkpoints) > 1, checkpoints
    assert first_difference(case, runner, lightning, checkpoints) is None


_SWITCH = ("dict(type='mmdet.PipelineSwitchHook', switch_epoch=1, switch_pipeline=["
           "dict(type='RandomFlip', prob=1.0, direction='horizontal'), dict(type='PackInputs')]), ")  # fmt: skip
#: name: (the checkpoint hook's options, hooks before StopRunHook, the checkpoint resumed, every checkpoint compared)
_RESNET18_RESUMES = {
    "epoch-checkpoints": ("by_epoch=True, interval=1", _SWITCH, "epoch_1.pth", ["epoch_1.pth", "epoch_2.pth", "epoch_3.pth"]),
    "inside-an-epoch": ("by_epoch=False, interval=4", "", "iter_4.pth", ["iter_4.pth", "iter_8.pth"]),
}
#: the same with the shipped config's loader workers (2 here): name -> (case, persistent_workers)
_WORKERS = {"epoch-checkpoints-2-workers": ("epoch-checkpoints", False),
            "inside-an-epoch-2-persistent-workers": ("inside-an-epoch", True)}  # fmt: skip


@pytest.mark.parametrize("case", sorted(_RESNET18_RESUMES) + sorted(_WORKERS))
def test_an_epoch_based_run_resumes_as_the_runners_resume_without_lightnings_cautions(tmp_path: Path, case: str) -> None:
    """mmpretrain's ResNet-18 CIFAR config (3 iterations an epoch), stopped after iteration 5 and resumed with
    ``--resume`` against the Runner stopped and resumed alike:

    - ``epoch-checkpoints``: a checkpoint every epoch and mmdet's ``PipelineSwitchHook`` switching to always-flipped
      images at epoch 1, resumed from ``epoch_1.pth``: both start epoch 1 with the switched pipeline;
    - ``inside-an-epoch``: a checkpoint every 4 iterations, resumed from ``iter_4.pth`` (inside epoch 1): both run
      epoch 1 again from its first batch.

    Neither shows Lightning's warning that a resume inside an epoch "can cause unreliable results" (the epoch runs
    again whole: ``lightning_api.MID_EPOCH_RESUME_WARNING``) nor that metrics are logged "but no logger" is configured
    (the run has none).

    The ``-workers`` cases train on 2 loader workers: the Runner makes each epoch's loader iterator after
    ``before_train_epoch``, where the sampler has its epoch and the pipeline is switched, and so does the resumed fit
    (``MMEngineAdapter.train_iterator_at``); Lightning made the first one at its data setup, before them (the loss
    parted at the first resumed iteration)."""
    base, persistent = _WORKERS.get(case, (case, None))
    checkpoint, hooks, resumed, compared = _RESNET18_RESUMES[base]
    data = train_kit.resnet_cifar() if persistent is None else _train_workers(train_kit.resnet_cifar(), persistent)
    configs = Path(importlib.util.find_spec("mmpretrain").origin).parent / ".mim" / "configs"  # type: ignore[arg-type]
    config = tmp_path / f"resnet18-{case}.py"
    config.write_text(f"_base_ = [{str(configs / 'resnet/resnet18_8xb16_cifar10.py')!r}]\n{data}"
                      "param_scheduler = dict(milestones=[2])\ntrain_cfg = dict(max_epochs=3)\nrandomness = dict(seed=0)\n"
                      f"default_hooks = dict(logger=dict(interval=1), checkpoint=dict({checkpoint}))\n"
                      f"custom_hooks = [{hooks}dict(type='StopRunHook')]\n")  # fmt: skip
    sides = tmp_path / "runner", tmp_path / "lightning"
    cautions = ("resuming from a checkpoint that ended before the epoch ended", "but have no logger configured")
    for side, run in zip(sides, (run_runner, run_lightning), strict=True):
        StopRunHook.after = 5
        with pytest.raises(StopRun):
            run(config, side)
        StopRunHook.after = None
        assert (side / "last_checkpoint").read_text().endswith(resumed)
        past_last_stamp(side)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(config, side, "--resume")
        assert not [w for w in caught if any(caution in str(w.message) for caution in cautions)], side.name
    assert first_difference(f"resnet18-{case}", *sides, compared) is None
