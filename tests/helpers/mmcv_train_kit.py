"""What the OpenMMLab 1.x train-command differentials share (tests/families/mmcv/test_train*.py, test_loggers.py):
the tiny derived config of mmcls's shipped CIFAR ResNet, the two runs of a comparison (``lightning-hooks train``, then
the library's own ``tools/train.py`` main in-process with the same timestamp and work dir), and the comparisons of
what the two leave: json log records, text log lines, checkpoints, weights, and the same for a resumed run.

Each test module keeps its library's reference (``reference(config, work_dir, timestamp, ...)``), whose logger is
:func:`reference_logger`: the one that script builds first thing in a fresh process.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mmcv_testkit import fresh_root_logger

#: the module every derived config imports first (after its dataset's): mmcv's runner waits skipped in each process
#: of both hosts (tests/helpers/mmcv_no_waits.py)
NO_WAITS = "mmcv_no_waits"
#: the fields of a log record that are wall-clock readings
WALL_CLOCK = ("time", "data_time", "eta", "memory")


def shipped_cifar_resnet() -> Path:
    """mmcls 0.x's shipped ``resnet18_8xb16_cifar10.py``."""
    spec = importlib.util.find_spec("mmcls")
    assert spec is not None and spec.origin is not None, "mmcls 0.x lives in .venv-mmcv1"
    return Path(spec.origin).parent / ".mim" / "configs" / "resnet" / "resnet18_8xb16_cifar10.py"


def tiny_resnet_cifar(path: Path, *, samples_per_gpu: int = 4, imports: tuple[str, ...] = (), lines: str = "") -> Path:
    """Write, at ``path``, a config derived from :func:`shipped_cifar_resnet`: narrow (8 base channels), on
    ``TinyCIFAR`` (tests/helpers/mmcv_tiny_cifar.py, which the config imports, then :data:`NO_WAITS` and
    ``imports``), 2 epochs, step LR, logging every iteration, evaluation each epoch; then ``lines`` (a key they assign
    replaces the one above)."""
    modules = ["mmcv_tiny_cifar", NO_WAITS, *imports]
    path.write_text(textwrap.dedent(f"""
        _base_ = [{str(shipped_cifar_resnet())!r}]
        custom_imports = dict(imports={modules!r})
        model = dict(backbone=dict(base_channels=8, stem_channels=8), head=dict(in_channels=64))
        data = dict(samples_per_gpu={samples_per_gpu}, workers_per_gpu=0, persistent_workers=False,
                    train=dict(type='TinyCIFAR'), val=dict(type='TinyCIFAR'), test=dict(type='TinyCIFAR'))
        runner = dict(max_epochs=2)
        log_config = dict(interval=1)
        lr_config = dict(policy='step', step=[1])
        evaluation = dict(interval=1, metric='accuracy')
    """) + textwrap.dedent(lines))
    return path


def reference_logger(library: str, log_file: Path, log_level: Any) -> Any:
    """The library's ``get_root_logger(log_file=..., log_level=...)`` for a reference run of its ``tools/train.py``
    main in this process, as that script builds it first thing in a fresh process: with its own handlers (mmcv's
    ``get_logger`` sets a logger up once per process), set up after mmcv's own logger, which importing the library
    set up (mmcv 1.7's ``mmcv.cnn.rfsearch``): ``init_weights`` writes the parameters' initialisation to that first
    of mmcv's initialised loggers, not into the run's log."""
    fresh_root_logger(library)
    get_root_logger = getattr(importlib.import_module(f"{library}.utils"), "get_root_logger")
    return get_root_logger(log_file=str(log_file), log_level=log_level)


def json_log(folder: Path) -> list[dict]:
    """The records of ``folder``'s json log (or of the json log ``folder``) without their wall-clock fields, the
    folder's path written ``WORK``."""
    path = folder if folder.is_file() else _single(folder, "*.log.json")
    folder = path.parent
    records = [json.loads(line) for line in path.read_text().replace(str(folder), "WORK").splitlines()]
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in records]


def text_log(folder: Path, library: str, starts: tuple[str, ...] = ("Epoch", "Saving checkpoint", "Set random seed")) -> list[str]:
    """The lines of ``folder``'s text log (or of the text log ``folder``) that ``library``'s logger wrote and that
    start with one of ``starts``, without their time stamps and wall-clock fields."""
    path = folder if folder.is_file() else _single(folder, "*.log")
    lines = [line.split(" - ", 3)[-1] for line in path.read_text().splitlines() if f" - {library} - " in line]
    return [re.sub(r"(eta|time|data_time): [^,]+, ", "", line) for line in lines if line.startswith(starts)]


def _single(folder: Path, pattern: str) -> Path:
    (path,) = folder.glob(pattern)
    return path


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@dataclass
class Sides:
    """The two runs of a differential: their folders, the timestamp both used, the reference's trained model."""

    ours: Path
    ref: Path
    timestamp: str
    model: torch.nn.Module


def ours_then_reference(tmp_path: Path, ours: Callable[[Path], Any], reference: Callable[[Path, str], torch.nn.Module]) -> Sides:
    """``ours(work_dir)`` (the command), then ``reference(work_dir, timestamp)`` (the library's script) with the
    timestamp ours logged under, both in ``tmp_path/work`` (the config each logs and saves names it), each moved to
    ``tmp_path/ours`` / ``tmp_path/ref`` once done."""
    work_dir = tmp_path / "work"
    ours(work_dir)
    work_dir.rename(tmp_path / "ours")
    (log_json,) = (tmp_path / "ours").glob("*.log.json")
    timestamp = log_json.name[: -len(".log.json")]
    model = reference(work_dir, timestamp)
    work_dir.rename(tmp_path / "ref")
    return Sides(tmp_path / "ours", tmp_path / "ref", timestamp, model)


def checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint with its ``meta`` made comparable across work dirs: no save time, the config without its
    ``work_dir`` line, ``hook_msgs['last_ckpt']`` as a file name."""
    loaded = torch.load(path, map_location="cpu", weights_only=False)
    meta = loaded["meta"]
    meta["time"] = None
    if "config" in meta:
        meta["config"] = re.sub(r"(?m)^work_dir = .*$", "", meta["config"])
    if "last_ckpt" in meta.get("hook_msgs", {}):
        meta["hook_msgs"]["last_ckpt"] = os.path.basename(meta["hook_msgs"]["last_ckpt"])
    return loaded


def assert_same_weights(mine: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor], what: str) -> None:
    assert mine.keys() == theirs.keys(), what
    for key, value in theirs.items():
        assert torch.equal(mine[key], value), (what, key)


def assert_same_checkpoint(mine: Path, theirs: Path, *, meta: bool = True) -> None:
    """The same keys, ``meta`` (:func:`checkpoint`; with ``meta=False`` only its epoch and iteration), weights
    (bitwise) and optimizer state."""
    ours, ref = checkpoint(mine), checkpoint(theirs)
    assert sorted(ours) == sorted(ref), mine.name
    if meta:
        assert ours["meta"] == ref["meta"], mine.name
    else:
        assert (ours["meta"]["epoch"], ours["meta"]["iter"]) == (ref["meta"]["epoch"], ref["meta"]["iter"]), mine.name
    assert_same_weights(ours["state_dict"], ref["state_dict"], mine.name)
    assert str(ours["optimizer"]) == str(ref["optimizer"]), mine.name


def assert_final_weights(path: Path, model: torch.nn.Module) -> None:
    """The checkpoint's weights are ``model``'s (the reference's trained model), bitwise."""
    assert_same_weights(torch.load(path, map_location="cpu", weights_only=False)["state_dict"], model.state_dict(),
                        path.name)  # fmt: skip  # arguments aligned under the call


def resumed_lines(folder: Path, timestamp: str) -> list[str]:
    """The text log's lines that say where the run resumed, without their time stamps."""
    log = (folder / f"{timestamp}.log").read_text().splitlines()
    return [line.split(" - ")[-1] for line in log if "resumed" in line]


def assert_resumed_alike(sides: Sides, what: str, last: str, resumed: str, library: str | None = None) -> list[dict]:
    """A resumed run's two sides: the same files, json log records (each named in a failure), ``resumed`` as the
    only resume line of both, the last checkpoint ``last`` (:func:`assert_same_checkpoint`), whose weights are the
    reference's trained model; with ``library``, the same text log lines (:func:`text_log`). Returns our records."""
    assert listing(sides.ours) == listing(sides.ref)
    mine, theirs = json_log(sides.ours), json_log(sides.ref)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        assert a == b, f"{what}: json log record {i}: {a} != {b}"
    assert len(mine) == len(theirs), what
    assert resumed_lines(sides.ours, sides.timestamp) == resumed_lines(sides.ref, sides.timestamp) == [resumed]
    if library is not None:
        assert text_log(sides.ours, library) == text_log(sides.ref, library)
    assert_same_checkpoint(sides.ours / last, sides.ref / last)
    assert_final_weights(sides.ours / last, sides.model)
    return mine


def assert_auto_resumes_alike(stopped: Path, folder: Path, run: Callable[[Path], Any], expected: Path, *,
                              meta: bool = False) -> None:  # fmt: skip  # arguments aligned under the call
    """``run(folder)`` (the command with ``--auto-resume``) in a copy of the ``stopped`` run's work dir writes the
    checkpoint ``expected`` (the reference's, of the same name) again: :func:`assert_same_checkpoint`, the whole
    ``meta`` only with ``meta`` (the config records ``auto_resume``)."""
    shutil.copytree(stopped, folder, symlinks=True)
    run(folder)
    assert_same_checkpoint(folder / expected.name, expected, meta=meta)


NORM = "dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)"


def _shipped(package: str, config: str) -> Path:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None, f"{package} lives in .venv-mmcv1"
    return Path(spec.origin).parent / ".mim" / "configs" / config


def tiny_fcn(folder: Path, *, train_images: int = 4, imports: tuple[str, ...] = (), lines: str = "",
             sync_bn: bool = False) -> Path:
    """Write, in ``folder``, ``train_images`` train and 2 val generated 32x32 images with 2-class masks and ``tiny_fcn.py``, a
    config derived from mmseg 0.30's shipped ``fcn_r18-d8_512x1024_80k_cityscapes.py`` (IterBasedRunner, poly LR):
    a narrow ResNetV1c-18 (8 base channels) and heads, plain BN instead of the shipped SyncBN (on CPU; mmseg's
    ``tools/train.py`` keeps SyncBN under its launcher), 2 images a batch, 4 iterations, evaluation every 2
    (``mIoU``), a checkpoint every 2, logging every iteration; then ``lines``. ``sync_bn`` keeps the shipped SyncBN
    (which mmseg's ``tools/train.py`` reverts to BN in a single process)."""
    import mmcv
    import numpy as np

    rng = np.random.RandomState(0)
    for split, n in (("train", train_images), ("val", 2)):
        for i in range(n):
            mmcv.imwrite(rng.randint(0, 255, (32, 32, 3)).astype(np.uint8), str(folder / "img" / split / f"{i}.png"))
            mmcv.imwrite(rng.randint(0, 2, (32, 32)).astype(np.uint8), str(folder / "ann" / split / f"{i}.png"))
    path = folder / "tiny_fcn.py"
    path.write_text(textwrap.dedent(f"""
        _base_ = [{str(_shipped("mmseg", "fcn/fcn_r18-d8_512x1024_80k_cityscapes.py"))!r}]
        custom_imports = dict(imports={[NO_WAITS, *imports]!r})
        bn = dict(type={'SyncBN' if sync_bn else 'BN'!r}, requires_grad=True)
        model = dict(pretrained=None, backbone=dict(base_channels=8, stem_channels=8, norm_cfg=bn),
                     decode_head=dict(in_channels=64, channels=16, num_classes=2, norm_cfg=bn),
                     auxiliary_head=dict(in_channels=32, channels=16, num_classes=2, norm_cfg=bn))
        train_pipeline = [
            dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'),
            dict(type='Resize', img_scale=(32, 32), ratio_range=(0.5, 2.0)),
            dict(type='RandomCrop', crop_size=(32, 32), cat_max_ratio=0.75),
            dict(type='RandomFlip', prob=0.5), dict(type='PhotoMetricDistortion'),
            dict(type='Normalize', **{NORM}), dict(type='Pad', size=(32, 32), pad_val=0, seg_pad_val=255),
            dict(type='DefaultFormatBundle'), dict(type='Collect', keys=['img', 'gt_semantic_seg'])]
        test_pipeline = [
            dict(type='LoadImageFromFile'),
            dict(type='MultiScaleFlipAug', img_scale=(32, 32), flip=False, transforms=[
                dict(type='Resize', keep_ratio=True), dict(type='RandomFlip'), dict(type='Normalize', **{NORM}),
                dict(type='ImageToTensor', keys=['img']), dict(type='Collect', keys=['img'])])]
        common = dict(type='CustomDataset', data_root={str(folder)!r}, img_suffix='.png', seg_map_suffix='.png',
                      classes=('a', 'b'), palette=[[0, 0, 0], [255, 255, 255]])
        data = dict(samples_per_gpu=2, workers_per_gpu=0, persistent_workers=False,
                    train=dict(**common, img_dir='img/train', ann_dir='ann/train', pipeline=train_pipeline),
                    val=dict(**common, img_dir='img/val', ann_dir='ann/val', pipeline=test_pipeline),
                    test=dict(**common, img_dir='img/val', ann_dir='ann/val', pipeline=test_pipeline))
        runner = dict(max_iters=4)
        checkpoint_config = dict(interval=2)
        evaluation = dict(interval=2)
        log_config = dict(interval=1)
        cudnn_benchmark = False
    """) + textwrap.dedent(lines))
    return path


def tiny_retinanet(folder: Path, *, images: int = 8, val: int = 0, imports: tuple[str, ...] = (), lines: str = "") -> Path:
    """Write, in ``folder``, ``images`` generated 64x64 images with two boxes each (mmdet's middle format, ``train.pkl``) and
    ``tiny_retinanet.py``, a config derived from mmdet 2.28's shipped ``retinanet_r18_fpn_1x_coco.py``: a narrow
    ResNet-18 (8 base channels, no pretrained weights), FPN and head, 2 images a batch, 2 epochs, linear warmup and a
    step, logging every iteration; then ``lines``. Without ``val`` it trains only (``--no-validate``). With ``val``,
    the first ``val`` images and their boxes are also a COCO val / test set (``val.json``, ``CocoDataset`` with the
    shipped test pipeline at 64x64) that the shipped ``evaluation = dict(interval=1, metric='bbox')`` scores, every
    score kept before NMS (``score_thr=0``: the barely trained head's scores are under the shipped 0.05); the NMS op
    this mmcv build lacks is tests/helpers/torch_ops.py's stand-in (openmmlab_stubs)."""
    import pickle

    import mmcv
    import numpy as np

    rng = np.random.RandomState(0)
    infos = []
    for i in range(images):
        mmcv.imwrite(rng.randint(0, 255, (64, 64, 3)).astype(np.uint8), str(folder / "img" / f"{i}.png"))
        corner = rng.randint(0, 24, (2, 2)).astype(np.float32)
        boxes = np.concatenate([corner, corner + rng.randint(16, 40, (2, 2))], axis=1).clip(0, 63).astype(np.float32)
        infos.append(dict(filename=f"{i}.png", width=64, height=64,
                          ann=dict(bboxes=boxes, labels=np.array([0, 1], dtype=np.int64))))  # fmt: skip
    with open(folder / "train.pkl", "wb") as f:
        pickle.dump(infos, f)
    if val:
        _coco_json(infos[:val], folder / "val.json")
    test_cfg = ", test_cfg=dict(score_thr=0.0)" if val else ""
    path = folder / "tiny_retinanet.py"
    path.write_text(textwrap.dedent(f"""
        _base_ = [{str(_shipped("mmdet", "retinanet/retinanet_r18_fpn_1x_coco.py"))!r}]
        custom_imports = dict(imports={[NO_WAITS, *imports]!r})
        model = dict(
            backbone=dict(base_channels=8, init_cfg=None),
            neck=dict(in_channels=[8, 16, 32, 64], out_channels=16),
            bbox_head=dict(num_classes=2, in_channels=16, feat_channels=16, stacked_convs=1){test_cfg})
        train_pipeline = [
            dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
            dict(type='Resize', img_scale=(64, 64), keep_ratio=True), dict(type='RandomFlip', flip_ratio=0.5),
            dict(type='Normalize', **{NORM}), dict(type='Pad', size_divisor=32),
            dict(type='DefaultFormatBundle'), dict(type='Collect', keys=['img', 'gt_bboxes', 'gt_labels'])]
        data = dict(samples_per_gpu=2, workers_per_gpu=0, persistent_workers=False,
                    train=dict(type='CustomDataset', classes=('a', 'b'), ann_file={str(folder / "train.pkl")!r},
                               img_prefix={str(folder / "img")!r}, pipeline=train_pipeline))
        runner = dict(max_epochs=2)
        lr_config = dict(policy='step', warmup='linear', warmup_iters=2, warmup_ratio=0.1, step=[1])
        log_config = dict(interval=1)
    """) + (textwrap.dedent(f"""
        test_pipeline = [
            dict(type='LoadImageFromFile'),
            dict(type='MultiScaleFlipAug', img_scale=(64, 64), flip=False, transforms=[
                dict(type='Resize', keep_ratio=True), dict(type='RandomFlip'), dict(type='Normalize', **{NORM}),
                dict(type='Pad', size_divisor=32), dict(type='ImageToTensor', keys=['img']),
                dict(type='Collect', keys=['img'])])]
        coco = dict(type='CocoDataset', classes=('a', 'b'), ann_file={str(folder / "val.json")!r},
                    img_prefix={str(folder / "img")!r}, pipeline=test_pipeline)
        data.update(val=coco, test=coco)
    """) if val else "") + textwrap.dedent(lines))
    return path


def _coco_json(infos: list[dict[str, Any]], path: Path) -> None:
    """mmdet middle-format ``infos`` as a COCO annotation file (categories ``a`` and ``b``)."""
    images, annotations = [], []
    for i, info in enumerate(infos):
        images.append(dict(id=i, file_name=info["filename"], width=info["width"], height=info["height"]))
        for box, label in zip(info["ann"]["bboxes"].tolist(), info["ann"]["labels"].tolist(), strict=True):
            w, h = box[2] - box[0], box[3] - box[1]
            annotations.append(dict(id=len(annotations) + 1, image_id=i, category_id=label + 1, bbox=[*box[:2], w, h],
                                    area=w * h, iscrowd=0))  # fmt: skip  # the dict's keys under its first
    categories = [dict(id=1, name="a"), dict(id=2, name="b")]
    path.write_text(json.dumps(dict(images=images, annotations=annotations, categories=categories)))


def run_opening(folder: Path) -> str:
    """What ``runner.run`` logs before ``before_run`` in ``folder``'s text log (the newest one): the host and work dir
    (written ``WORK``), the hooks of each stage, the workflow and the run's length."""
    log = max(folder.glob("*.log"), key=lambda p: p.name).read_text().replace(str(folder), "WORK")
    opening = re.search(r"Start running, .*?\n.*? - INFO - workflow: [^\n]*", log, re.S)
    assert opening is not None, f"{folder}: no 'Start running' ... 'workflow' lines in its log"
    return re.sub(r"(?m)^[\d-]+ [\d:,]+ - ", "", opening.group(0))
