"""``lightning-hooks train`` on an iteration-based OpenMMLab 1.x config (issue #25): mmseg 0.30's shipped
``fcn_r18-d8_512x1024_80k_cityscapes.py`` (IterBasedRunner, poly LR, SyncBN reverted to BN as its ``tools/train.py``
does) as ``_base_`` of a derived config with generated 32x32 images and masks (``mmcv_train_kit.tiny_fcn``), 4
iterations, EvalHook at each and a checkpoint every 2; differential against ``mmseg.apis.train_segmentor`` run in-process as that script runs it."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from mmcv_testkit import import_with_stubbed_ops, stub_collect_env  # skips outside .venv-mmcv1
from mmcv_train_kit import (assert_auto_resumes_alike, assert_final_weights, assert_resumed_alike,
                            assert_same_checkpoint, json_log, listing, ours_then_reference, reference_logger,
                            tiny_fcn)  # fmt: skip  # names aligned under the import

mmseg = pytest.importorskip("mmseg", reason="mmseg 0.x lives in .venv-mmcv1")
import_with_stubbed_ops("mmseg.models", "mmseg.apis", "mmseg.datasets", "mmseg.utils")  # they import mmcv's compiled ops

from mmcv import Config  # noqa: E402

from lightning_hooks import train as dispatcher  # noqa: E402


@pytest.fixture
def config(tmp_path, monkeypatch):
    """:func:`mmcv_train_kit.tiny_fcn` with the shipped SyncBN (reverted by both sides) and evaluation each iteration."""
    stub_collect_env(monkeypatch)
    path = tiny_fcn(tmp_path, sync_bn=True, lines="evaluation = dict(interval=1)\n")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield path
    torch.set_num_threads(threads)


def reference(path: Path, work_dir: Path, timestamp: str, max_iters: int | None = None,
              resume_from: Path | None = None) -> torch.nn.Module:  # fmt: skip  # arguments aligned under the call
    """mmseg 0.30's ``tools/train.py`` main for ``--seed 0`` on CPU, in-process: the real ``train_segmentor``
    (``--cfg-options runner.max_iters=...``, ``--resume-from ...``)."""
    from mmcv.cnn.utils import revert_sync_batchnorm
    from mmcv.utils import get_git_hash
    from mmseg import __version__
    from mmseg.apis import set_random_seed, train_segmentor
    from mmseg.datasets import build_dataset
    from mmseg.models import build_segmentor
    from mmseg.utils import collect_env

    cfg = Config.fromfile(str(path))
    if max_iters is not None:
        cfg.merge_from_dict({"runner.max_iters": max_iters})
    cfg.work_dir = str(work_dir)
    if resume_from is not None:
        cfg.resume_from = str(resume_from)
    cfg.gpu_ids = [0]
    cfg.auto_resume = False  # its tools/train.py sets the flag's value, after gpu_ids
    os.makedirs(work_dir, exist_ok=True)
    cfg.dump(str(work_dir / path.name))
    logger = reference_logger("mmseg", work_dir / f"{timestamp}.log", cfg.log_level)  # get_root_logger in a fresh process
    env_info = "\n".join(f"{k}: {v}" for k, v in collect_env().items())
    meta = dict(env_info=env_info)
    cfg.device = "cpu"
    set_random_seed(0)
    cfg.seed = meta["seed"] = 0
    meta["exp_name"] = path.name
    model = build_segmentor(cfg.model, train_cfg=cfg.get("train_cfg"), test_cfg=cfg.get("test_cfg"))
    model.init_weights()
    model = revert_sync_batchnorm(model)
    logger.info(model)
    datasets = [build_dataset(cfg.data.train)]
    cfg.checkpoint_config.meta = dict(mmseg_version=f"{__version__}+{get_git_hash()[:7]}", config=cfg.pretty_text,
                                      CLASSES=datasets[0].CLASSES, PALETTE=datasets[0].PALETTE)  # fmt: skip
    model.CLASSES = datasets[0].CLASSES
    meta.update(cfg.checkpoint_config.meta)
    train_segmentor(model, datasets, cfg, validate=True, timestamp=timestamp, meta=meta)
    return model


def ours(config: Path, *flags: str) -> Callable[[Path], None]:
    """``lightning-hooks train CONFIG --seed 0 --accelerator cpu FLAGS --work-dir WORK_DIR`` as a function of the
    work dir."""
    return lambda work_dir: dispatcher.main([str(config), "--work-dir", str(work_dir), "--seed", "0",
                                             "--accelerator", "cpu", *flags])  # fmt: skip  # arguments aligned under the call


def test_lightning_hooks_train_runs_an_iteration_based_mmseg_config_as_tools_train_py(config, tmp_path):
    sides = ours_then_reference(tmp_path, ours(config), lambda work_dir, timestamp: reference(config, work_dir, timestamp))
    names = listing(sides.ref)
    assert listing(sides.ours) == names
    assert {"iter_2.pth", "iter_4.pth", "latest.pth"} <= set(names)
    records = json_log(sides.ours)
    assert records == json_log(sides.ref)
    assert [r["mode"] for r in records[1:]] == ["train", "val"] * 4
    logs = [[re.sub(r"^\d{4}-\d\d-\d\d [\d:,]+ - ", "", line).strip()
             for line in (d / f"{sides.timestamp}.log").read_text().splitlines()] for d in (sides.ours, sides.ref)]  # fmt: skip  # the loop under its value
    norms = [[line for line in log if "BatchNorm" in line] for log in logs]  # the model as logged
    assert norms[0] == norms[1] and norms[0] and not any("SyncBatchNorm" in line for line in norms[0])
    # init_weights writes to mmcv's logger (set up first, at import), not into the run's log: as tools/train.py
    initialised = [[line for line in log if line.startswith(("mmseg - INFO - initialize ", "Name of parameter"))]
                   for log in logs]  # fmt: skip  # the loop under its value
    assert initialised[0] == initialised[1] == []
    assert [r["iter"] for r in records[1:] if r["mode"] == "train"] == [1, 2, 3, 4]
    for name in ("iter_2.pth", "iter_4.pth"):
        assert_same_checkpoint(sides.ours / name, sides.ref / name)
    assert_final_weights(sides.ours / "iter_4.pth", sides.model)


def test_resume_from_goes_on_as_train_segmentor_resumed(config, tmp_path, monkeypatch):
    """mmcv's IterBasedRunner trains 2 iterations; mmseg's own train_segmentor resumed from iter_2.pth and ours go on
    alike (iterations 2 to 4, the loader starting a new pass as mmcv's IterLoader does), with the new run's meta.
    (mmcv 1.7's ``IterBasedRunner.resume`` asks for the current CUDA device unless given a ``map_location``: the
    reference resumes with ``map_location="cpu"``, as on a machine without a GPU one has to.) With DataLoader workers
    (``workers_per_gpu=2``, persistent, mmseg's default) and hooks that draw the decode head's classifier anew in
    ``before_run`` and the auxiliary head's in ``before_epoch`` from torch's generator
    (``mmcv_user_hooks.ReinitDecodeHead``, ``ReinitAuxiliaryHead``): the loader's iterator (its workers' base seed,
    the shuffling sampler's seed) draws between the two, as ``IterBasedRunner.run`` makes its ``IterLoader`` after
    ``before_run`` and before ``before_epoch``."""
    from mmcv.runner import IterBasedRunner

    monkeypatch.setattr(IterBasedRunner, "resume", functools.partialmethod(IterBasedRunner.resume, map_location="cpu"))
    config = config.with_name("tiny_fcn_workers.py")
    config.write_text("_base_ = ['tiny_fcn.py']\ncustom_imports = dict(imports=['mmcv_user_hooks'])\n"
                      "data = dict(workers_per_gpu=2, persistent_workers=True)\n"
                      "custom_hooks = [dict(type='ReinitDecodeHead'), dict(type='ReinitAuxiliaryHead')]\n")  # fmt: skip  # the string under its call
    first = tmp_path / "first"
    reference(config, first, "20260101_000000", max_iters=2)
    sides = ours_then_reference(tmp_path, ours(config, "--resume-from", str(first / "iter_2.pth")),
                                lambda work_dir, timestamp: reference(config, work_dir, timestamp,
                                                                      resume_from=first / "iter_2.pth"))  # fmt: skip  # arguments aligned under the call
    assert listing(sides.ours) == listing(sides.ref)
    records = json_log(sides.ours)
    assert records == json_log(sides.ref)
    # mmcv's IterBasedRunner records meta['iter'] before counting the iteration it saves after (iter_2.pth holds 1):
    # its resume runs that iteration again, and so does ours
    assert torch.load(first / "iter_2.pth", weights_only=False)["meta"]["iter"] == 1
    assert [r["iter"] for r in records[1:] if r["mode"] == "train"] == [2, 3, 4]
    assert_same_checkpoint(sides.ours / "iter_4.pth", sides.ref / "iter_4.pth")
    assert torch.load(sides.ours / "iter_4.pth", weights_only=False)["meta"]["iter"] == 3  # (as above)
    assert_final_weights(sides.ours / "iter_4.pth", sides.model)


def test_resume_from_a_mid_pass_checkpoint_goes_on_as_train_segmentor_resumed(config, tmp_path, monkeypatch):
    """A checkpoint written inside a pass over the train set (every 3 iterations, 2 per pass: iter_3.pth, meta iter 2):
    mmseg's own train_segmentor resumed from it and ours go on alike (``resumed from epoch: 1, iter 2``, then
    iterations 3 and 4 from a new pass, as mmcv's IterLoader starts one): log records and lines, iter_4.pth
    (weights, optimizer state, meta), final weights; and so does --auto-resume in that run's work dir."""
    from mmcv.runner import IterBasedRunner

    monkeypatch.setattr(IterBasedRunner, "resume", functools.partialmethod(IterBasedRunner.resume, map_location="cpu"))
    monkeypatch.chdir(tmp_path)  # the recorded version's git hash is the working directory's: not this busy checkout's
    mid = tmp_path / "tiny_fcn_mid.py"
    mid.write_text(f"_base_ = [{str(config)!r}]\ncheckpoint_config = dict(interval=3)\n")
    first = tmp_path / "first"
    reference(mid, first, "20260101_000000", max_iters=3)
    assert torch.load(first / "iter_3.pth", weights_only=False)["meta"]["iter"] == 2
    sides = ours_then_reference(tmp_path, ours(mid, "--resume-from", str(first / "iter_3.pth")),
                                lambda work_dir, timestamp: reference(mid, work_dir, timestamp,
                                                                      resume_from=first / "iter_3.pth"))  # fmt: skip  # arguments aligned under the call
    # the pass it read before drawing the batch that ended it
    records = assert_resumed_alike(sides, f"{mid.name} resumed from a mid-pass checkpoint", "iter_4.pth",
                                   "resumed from epoch: 1, iter 2")  # fmt: skip  # arguments aligned under the call
    assert [r["iter"] for r in records[1:] if r["mode"] == "train"] == [3, 4]
    # --auto-resume in a copy of the stopped run's work dir: mmseg's find_latest_checkpoint finds its latest.pth
    assert_auto_resumes_alike(first, tmp_path / "auto", ours(mid, "--auto-resume"), sides.ref / "iter_4.pth")
