"""``lightning-hooks train CONFIG.py`` for an mmdet 2.x config (issue #25), differential against mmdet 2.28's own
``train_detector`` run in-process as its ``tools/train.py`` runs it: the shipped ``retinanet_r18_fpn_1x_coco.py`` as
``_base_`` of a small derived config (a narrow ResNet-18, 4 generated 64x64 images with two boxes each, 2 epochs with
warmup, training only: the CPU build has no NMS op, so ``--no-validate``). Same losses per iteration, json log,
checkpoint files and final weights, bitwise on CPU."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from mmcv_testkit import RunStopped, import_with_stubbed_ops, stub_collect_env  # skips outside .venv-mmcv1
from mmcv_train_kit import (assert_auto_resumes_alike, assert_final_weights, assert_resumed_alike,
                            assert_same_checkpoint, json_log, listing, ours_then_reference, reference_logger,
                            tiny_retinanet)  # fmt: skip  # names aligned under the import

mmdet = pytest.importorskip("mmdet", reason="mmdet 2.x lives in .venv-mmcv1")
import_with_stubbed_ops("mmdet.models", "mmdet.apis", "mmdet.datasets", "mmdet.utils")  # they import mmcv's compiled ops

from mmcv import Config  # noqa: E402

from lightning_hooks import train as dispatcher  # noqa: E402

@pytest.fixture
def config(tmp_path, monkeypatch):
    stub_collect_env(monkeypatch)
    path = tiny_retinanet(tmp_path, images=4)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield path
    torch.set_num_threads(threads)


def reference(path: Path, work_dir: Path, timestamp: str) -> torch.nn.Module:
    """mmdet 2.28's ``tools/train.py`` main for ``--seed 0 --no-validate`` on CPU, in-process: the real
    ``train_detector`` and runner."""
    from mmcv.utils import get_git_hash
    from mmdet import __version__
    from mmdet.apis import set_random_seed, train_detector
    from mmdet.datasets import build_dataset
    from mmdet.models import build_detector
    from mmdet.utils import collect_env

    cfg = Config.fromfile(str(path))
    cfg.work_dir = str(work_dir)
    cfg.auto_resume = False
    cfg.gpu_ids = [0]
    os.makedirs(work_dir, exist_ok=True)
    cfg.dump(str(work_dir / path.name))
    logger = reference_logger("mmdet", work_dir / f"{timestamp}.log", cfg.log_level)  # get_root_logger in a fresh process
    env_info = "\n".join(f"{k}: {v}" for k, v in collect_env().items())
    meta = dict(env_info=env_info, config=cfg.pretty_text)
    logger.info("Distributed training: False")
    cfg.device = "cpu"
    set_random_seed(0)
    cfg.seed = meta["seed"] = 0
    meta["exp_name"] = path.name
    model = build_detector(cfg.model, train_cfg=cfg.get("train_cfg"), test_cfg=cfg.get("test_cfg"))
    model.init_weights()
    datasets = [build_dataset(cfg.data.train)]
    cfg.checkpoint_config.meta = dict(mmdet_version=__version__ + get_git_hash()[:7], CLASSES=datasets[0].CLASSES)
    model.CLASSES = datasets[0].CLASSES
    train_detector(model, datasets, cfg, distributed=False, validate=False, timestamp=timestamp, meta=meta)
    return model


def ours(config: Path, *flags: str) -> Callable[[Path], None]:
    """``lightning-hooks train CONFIG --seed 0 --accelerator cpu --no-validate FLAGS --work-dir WORK_DIR`` as a
    function of the work dir."""
    return lambda work_dir: dispatcher.main([str(config), "--work-dir", str(work_dir), "--seed", "0",
                                             "--accelerator", "cpu", "--no-validate", *flags])  # fmt: skip  # arguments aligned under the call


def test_lightning_hooks_train_runs_an_mmdet_config_as_tools_train_py(config, tmp_path):
    sides = ours_then_reference(tmp_path, ours(config), lambda work_dir, timestamp: reference(config, work_dir, timestamp))
    names = listing(sides.ref)
    assert listing(sides.ours) == names
    assert {"epoch_1.pth", "epoch_2.pth", "latest.pth"} <= set(names)
    records = json_log(sides.ours)
    assert records == json_log(sides.ref)
    train = [r for r in records[1:] if r["mode"] == "train"]
    assert [(r["epoch"], r["iter"]) for r in train] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert {"loss_cls", "loss_bbox", "loss"} <= set(train[0])
    for name in ("epoch_1.pth", "epoch_2.pth"):
        assert_same_checkpoint(sides.ours / name, sides.ref / name)
    assert_final_weights(sides.ours / "epoch_2.pth", sides.model)


def test_resume_from_a_mid_epoch_checkpoint_goes_on_as_train_detector_resumed(config, tmp_path, monkeypatch):
    """One image a batch (4 iterations an epoch) and a checkpoint every 3 iterations (by_epoch=False), the run stopped
    after the 3rd (a hook raises): its epoch_1.pth was written inside epoch 1 (meta epoch 1, iter 2). A config resuming from it (``resume_from``)
    goes on alike under mmdet's own train_detector and ours: log records (warmup, step LR), ``resumed epoch 1, iter 2``,
    epoch_2.pth (weights, optimizer state, meta), final weights; and so does --auto-resume in that run's work dir."""
    monkeypatch.chdir(tmp_path)  # the recorded version's git hash is the working directory's: not this busy checkout's
    mid = tmp_path / "tiny_retinanet_mid.py"
    mid.write_text(f"_base_ = [{str(config)!r}]\ndata = dict(samples_per_gpu=1)\n"
                   "checkpoint_config = dict(interval=3, by_epoch=False)\n")  # fmt: skip  # the string under its call
    first_cfg, resumed = tmp_path / "first_epoch.py", tmp_path / "tiny_retinanet_resumed.py"
    first_cfg.write_text(f"_base_ = [{str(mid)!r}]\n"  # the run stopped after that checkpoint, as if killed
                         "custom_hooks = [dict(type='StopAfterIters', iters=3, priority='LOWEST')]\n")
    first = tmp_path / "first"
    resumed.write_text(f"_base_ = [{str(mid)!r}]\nresume_from = {str(first / 'epoch_1.pth')!r}\n")
    with pytest.raises(RunStopped):
        reference(first_cfg, first, "20260101_000000")
    assert torch.load(first / "epoch_1.pth", weights_only=False)["meta"]["iter"] == 2
    sides = ours_then_reference(tmp_path, ours(resumed),
                                lambda work_dir, timestamp: reference(resumed, work_dir, timestamp))  # fmt: skip  # arguments aligned under the call
    records = assert_resumed_alike(sides, f"{resumed.name} (a mid-epoch checkpoint)", "epoch_2.pth",
                                   "resumed epoch 1, iter 2")  # fmt: skip  # arguments aligned under the call
    assert [(r["epoch"], r["iter"]) for r in records[1:]] == [(2, i) for i in (1, 2, 3, 4)]
    # --auto-resume in a copy of the stopped run's work dir: mmdet's find_latest_checkpoint finds its latest.pth
    assert_auto_resumes_alike(first, tmp_path / "auto", ours(mid, "--auto-resume"), sides.ref / "epoch_2.pth")
