"""Differential harness for OpenMMLab downstream hooks: one tiny image classifier, run under MMEngine's ``Runner`` and
under ``lightning.Trainer`` + ``MMEngineAdapter`` with the same seed, data and hook configs; then every observable
compared: the event stream, weights, work_dir files (checkpoints, logs, images), message hub and hook state.

``run_both(tmp_path, custom_hooks=[...], **runner_options)`` returns a :class:`Pair`; ``Pair.assert_same()`` checks
it all. ``train_cfg`` (MMEngine's) picks the Runner's loop; the adapter gets the same ``train_cfg`` and the Trainer
its ``adapter.trainer_kwargs()``, epoch-based or iteration-based.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import lightning.pytorch as pl
import numpy as np
import torch
from mmengine.evaluator import BaseMetric, Evaluator
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.optim import build_optim_wrapper
from mmengine.registry import METRICS, MODELS, DefaultScope
from mmengine.runner import Runner
from mmengine_testkit import MMEngineSteps, RecorderHook, assert_same_tensors
from openmmlab_stubs import import_openmmlab
from torch.utils.data import DataLoader, Dataset

from lightning_hooks.families.mmengine import MMEngineAdapter

import_openmmlab()

from mmdet.registry import TRANSFORMS as DET_TRANSFORMS  # noqa: E402  (after the stubs)
from mmdet.datasets import BaseVideoDataset  # noqa: E402
from mmpretrain.registry import TRANSFORMS as PRETRAIN_TRANSFORMS  # noqa: E402
from mmdet.structures import DetDataSample, TrackDataSample  # noqa: E402
from mmengine.structures import InstanceData, PixelData  # noqa: E402
from mmpretrain.models.heads import ArcFaceClsHead  # noqa: E402
from mmpretrain.models.losses import SwAVLoss  # noqa: E402
from mmpretrain.structures import DataSample  # noqa: E402
from mmseg.structures import SegDataSample  # noqa: E402

_runs = itertools.count()
CLASSES = ("cat", "dog")
PALETTE = [(220, 20, 60), (0, 0, 142)]
#: what differs between two runs of the same training: wall-clock values
TIMING = re.compile(r"(^|/)(time|data_time|eta|memory)$")
STAMP = re.compile(r"\d{8}_\d{6}")


class Images(Dataset):
    """``n`` fixed 3x4x4 "images" (0..255) with a class label; ``pipeline`` (set by hooks) transforms each sample."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (n, 3, 4, 4), generator=g).float()
        self.labels = torch.randint(0, len(CLASSES), (n,), generator=g)
        self.metainfo = dict(classes=CLASSES, palette=PALETTE)
        self.img_paths = [_image_file(image, f"images-{seed}-{n}/{i}.png") for i, image in enumerate(self.images)]
        self.CLASSES = CLASSES
        self.pipeline: Any = None
        self.skip_type_keys: tuple[str, ...] = ()

    def get_gt_labels(self) -> np.ndarray:
        """What mmpretrain's ``BaseDataset`` offers ``SetAdaptiveMarginsHook`` (class counts 10 and 6 here)."""
        return self.labels.numpy()

    def update_skip_type_keys(self, keys: tuple[str, ...]) -> None:
        """What mmdet's ``MultiImageMixDataset`` offers ``YOLOXModeSwitchHook``."""
        self.skip_type_keys = tuple(keys)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> dict[str, Any]:
        sample = {"inputs": self.images[i], "labels": self.labels[i], "img_path": self.img_paths[i]}
        return self.pipeline(sample) if self.pipeline is not None else sample


class Videos(BaseVideoDataset):
    """``n`` 3-frame videos of :class:`Images` frames, in test mode: what mmdet's ``TrackImgSampler`` samples
    ``(video, frame)`` indices from."""

    def __init__(self, n: int, seed: int) -> None:
        self.frames = Images(3 * n, seed)
        super().__init__(ann_file="", test_mode=True, serialize_data=False, metainfo=self.frames.metainfo)

    def load_data_list(self) -> list[dict]:
        return [dict(video_id=v, images=[dict(frame_id=f) for f in range(3)]) for v in range(len(self.frames) // 3)]

    def __getitem__(self, index: tuple[int, int]) -> dict[str, Any]:
        video, frame = index
        return self.frames[3 * video + frame]


def _image_file(image: torch.Tensor, path: str) -> str:
    """``image`` (3x4x4) scaled up to 16x16 and written as a PNG under the working directory (hooks read it back)."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pixels = image.repeat_interleave(4, 1).repeat_interleave(4, 2).permute(1, 2, 0).to(torch.uint8).numpy()
        cv2.imwrite(path, pixels)
    return os.path.abspath(path)


@DET_TRANSFORMS.register_module(force=True)
class HalveInputs:
    """A transform only mmdet's registry knows: building it needs the ``mmdet`` default scope."""

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        return {**sample, "inputs": sample["inputs"] / 2}


@PRETRAIN_TRANSFORMS.register_module(force=True)
class ShiftInputs:
    """A transform only mmpretrain's registry knows."""

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        return {**sample, "inputs": sample["inputs"] + 16}


class Head(torch.nn.Module):
    """The settings downstream hooks switch: ``num_classes`` (checked), ``scale`` (warmed up), ``use_l1`` (YOLOX)."""

    def __init__(self) -> None:
        super().__init__()
        self.num_classes = len(CLASSES)
        self.scale = 1.0
        self.use_l1 = False


@MODELS.register_module(force=True)
class TinyClassifier(BaseModel):
    """Flatten, BatchNorm, linear: a classifier with what downstream hooks touch (``set_epoch``, ``loss_lambda``,
    ``teacher``/``student``, ``head``/``bbox_head``, a BN layer, ``data_preprocessor``); ``predict`` returns the
    data samples of ``task``: mmpretrain's (cls), mmdet's detection (det), tracking (track: a 3-frame video per
    image) or grounding (grounding) samples, mmseg's (seg)."""

    def __init__(self, task: str = "cls") -> None:
        super().__init__()
        self.task = task  # what predict returns: mmpretrain, mmdet or mmseg data samples
        self.student = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.BatchNorm1d(48), torch.nn.Linear(48, 2))
        self.teacher = copy.deepcopy(self.student).requires_grad_(False)
        self.head = self.bbox_head = Head()
        self.loss_lambda = 0.5
        self.epoch_info = -1

    def set_epoch(self, epoch: int) -> None:
        self.epoch_info = epoch

    def logits(self, inputs: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """Class scores of ``inputs``; ``labels`` are given in training (for margin heads)."""
        return self.student(inputs / 255) * self.head.scale

    def losses(self, inputs: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """Cross-entropy, ``loss_lambda`` x the logits' square and, when the head's ``use_l1`` is on, their L1."""
        losses = {
            "loss_cls": torch.nn.functional.cross_entropy(logits, labels),
            "loss_reg": self.loss_lambda * logits.pow(2).mean(),
        }
        if getattr(self.head, "use_l1", False):
            losses["loss_l1"] = 0.1 * logits.abs().mean()
        return losses

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor, img_path: Any = None, mode: str = "tensor") -> Any:
        logits = self.logits(inputs, labels if mode == "loss" else None)
        if mode == "loss":
            return self.losses(inputs, logits, labels)
        if mode == "predict":
            scores = logits.softmax(-1)
            make = {"cls": _cls_sample, "det": _det_sample, "seg": _seg_sample, "track": _track_sample,
                    "grounding": _grounding_sample}[self.task]
            return [make(s, t, p) for s, t, p in zip(scores, labels, img_path)]
        return logits


@MODELS.register_module(force=True)
class TinySwAV(TinyClassifier):
    """:class:`TinyClassifier` plus mmpretrain's real ``SwAVLoss`` as ``head.loss_module`` (what ``SwAVHook`` reads):
    the swapped assignment of the images' and their mirror images' normalized logits (2 crops, 3 prototypes), which
    draws on and fills the queue the hook builds, saves and loads."""

    def __init__(self, task: str = "cls") -> None:
        super().__init__(task)
        self.head.loss_module = SwAVLoss(feat_dim=len(CLASSES), num_prototypes=3, epsilon=0.5)

    def losses(self, inputs: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        crops = torch.cat([logits, self.logits(inputs.flip(-1))])
        return {**super().losses(inputs, logits, labels), "loss_swav": self.head.loss_module(torch.nn.functional.normalize(crops))}


@MODELS.register_module(force=True)
class TinyArcFace(TinyClassifier):
    """:class:`TinyClassifier` whose head is mmpretrain's real ``ArcFaceClsHead`` (on the 2 features of the
    student), as ``SetAdaptiveMarginsHook`` requires: training logits carry the per-class margins the hook sets."""

    def __init__(self, task: str = "cls") -> None:
        super().__init__(task)
        with DefaultScope.overwrite_default_scope("mmpretrain"):  # it builds its loss through mmpretrain's MODELS
            self.head = ArcFaceClsHead(num_classes=len(CLASSES), in_channels=len(CLASSES), scale=4.0, margins=0.1)

    def logits(self, inputs: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        return self.head((self.student(inputs / 255),), labels)


def _cls_sample(score: torch.Tensor, label: torch.Tensor, img_path: str) -> DataSample:
    return DataSample().set_gt_label(label).set_pred_score(score)


def _det_sample(score: torch.Tensor, label: torch.Tensor, img_path: str) -> DetDataSample:
    """One box per class, placed and scored from the class scores."""
    sample = DetDataSample(metainfo=dict(img_path=img_path, img_shape=(16, 16), ori_shape=(16, 16)))
    corners = (score * 8).detach()
    boxes = torch.stack([torch.stack([c, c, c + 6, c + 8]) for c in corners])
    sample.pred_instances = InstanceData(bboxes=boxes, scores=score.detach(), labels=torch.arange(len(score)))
    sample.gt_label = label
    sample.pred_score = score
    return sample


def _track_sample(score: torch.Tensor, label: torch.Tensor, img_path: str) -> TrackDataSample:
    """A 3-frame "video" of the image: in frame ``f`` the boxes of :func:`_det_sample` move ``2f`` pixels right; the
    track ids are the classes (2 and 3), so the colours TrackLocalVisualizer derives from them are fixed."""
    frames = []
    for f in range(3):
        det = _det_sample(score, label, img_path)
        det.set_metainfo(dict(frame_id=f))
        boxes = det.pred_instances.bboxes + torch.tensor([2.0 * f, 0, 2.0 * f, 0])
        ids = torch.arange(len(score)) + 2
        det.gt_instances = InstanceData(bboxes=boxes[:1] + 1, labels=label.view(1), instances_id=ids[:1])
        det.pred_track_instances = InstanceData(bboxes=boxes, scores=score.detach(), labels=torch.arange(len(score)),
                                                instances_id=ids)
        frames.append(det)
    sample = TrackDataSample()
    sample.video_data_samples = frames
    sample.gt_label = label
    sample.pred_score = score
    return sample


def _grounding_sample(score: torch.Tensor, label: torch.Tensor, img_path: str) -> DetDataSample:
    """:func:`_det_sample` with a caption: a phrase-grounding sample (``text`` a string whose ``tokens_positive``
    spans name the classes) when the label is 0, else an open-detection one (``text`` the class names)."""
    sample = _det_sample(score, label, img_path)
    sample.gt_instances = InstanceData(bboxes=sample.pred_instances.bboxes + 1, labels=torch.arange(len(score)))
    if int(label) == 0:
        sample.text = "a cat next to a dog"
        sample.tokens_positive = [[[2, 5]], [[16, 19]]]
    else:
        sample.text = CLASSES
    return sample


def _seg_sample(score: torch.Tensor, label: torch.Tensor, img_path: str) -> SegDataSample:
    """A 16x16 map: left half the predicted class, right half the other."""
    sample = SegDataSample(metainfo=dict(img_path=img_path, img_shape=(16, 16), ori_shape=(16, 16)))
    cls = int(score.argmax())
    seg = torch.full((1, 16, 16), cls)
    seg[:, :, 8:] = 1 - cls
    sample.pred_sem_seg = PixelData(data=seg)
    sample.gt_label = label
    sample.pred_score = score
    return sample


@METRICS.register_module(force=True)
class TinyAccuracy(BaseMetric):
    default_prefix = "tiny"

    def process(self, data_batch: Any, data_samples: list[dict]) -> None:  # the Evaluator hands samples as dicts
        self.results += [float(s["pred_score"].argmax() == s["gt_label"].item()) for s in data_samples]

    def compute_metrics(self, results: list[float]) -> dict[str, float]:
        return {"accuracy": 100 * sum(results) / len(results)}


class LitWrapper(MMEngineSteps):
    """A LightningModule around an OpenMMLab model, as a port keeps it: steps as MMEngine's loops run them. Hooks get
    the model itself as ``runner.model``."""

    def __init__(self, model: BaseModel, optim_wrapper: dict) -> None:
        super().__init__()
        self.model = model
        self.optim_wrapper_cfg = optim_wrapper
        self.evaluator = Evaluator([TinyAccuracy()])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """The Runner's optimizer: param groups from the same ``optim_wrapper`` config (``paramwise_cfg``)."""
        return build_optim_wrapper(self.model, copy.deepcopy(self.optim_wrapper_cfg)).optimizer


def make_model(seed: int = 0, task: str = "cls", model: type[TinyClassifier] = TinyClassifier) -> TinyClassifier:
    torch.manual_seed(seed)
    return model(task)


def loaders(
    n_train: int = 16, n_val: int = 8, batch_size: int = 4, val_batch_size: int | None = None
) -> tuple[DataLoader, DataLoader]:
    val_batch = val_batch_size or batch_size
    return (DataLoader(Images(n_train, 1), batch_size=batch_size), DataLoader(Images(n_val, 2), batch_size=val_batch))


@dataclass
class Pair:
    """One configuration run under both hosts."""

    runner: Runner
    trainer: pl.Trainer
    adapter: MMEngineAdapter
    module: LitWrapper
    mm_dir: Path
    lt_dir: Path
    notes: dict[str, Any] = field(default_factory=dict)

    def hook(self, cls: type) -> tuple[Hook, Hook]:
        """The ``cls`` hook of the Runner and of the adapter."""
        return next(h for h in self.runner.hooks if type(h) is cls), next(h for h in self.adapter.hooks if type(h) is cls)

    def assert_same(self, *hook_classes: type, log_lines: tuple[str, ...] = ()) -> None:
        """Everything observable is the same: events, weights, work_dir files, message hub, ``hook_classes``' state,
        and the log lines containing any of ``log_lines``."""
        mm_rec, lt_rec = self.hook(RecorderHook)
        assert lt_rec.events == mm_rec.events
        assert_same_tensors(_unprefixed(self.module.state_dict()), self.runner.model.state_dict())
        assert model_settings(self.module.model) == model_settings(self.runner.model)
        assert_same_files(self.mm_dir, self.lt_dir)
        assert_same_hub(self.runner.message_hub, self.adapter.runner.message_hub)
        for cls in hook_classes:
            mm_hook, lt_hook = self.hook(cls)
            mm_state, lt_state = hook_state(mm_hook, self.mm_dir), hook_state(lt_hook, self.lt_dir)
            assert_same_state(mm_state, lt_state, type(mm_hook).__name__)
        if log_lines:
            assert log_of(self.lt_dir, log_lines) == log_of(self.mm_dir, log_lines)


def run_both(
    tmp_path: Path,
    custom_hooks: list[dict] | None = None,
    default_hooks: dict | None = None,
    train_cfg: dict | None = None,
    train: DataLoader | None = None,
    val: DataLoader | None = None,
    task: str = "cls",
    paramwise_cfg: dict | None = None,
    test: DataLoader | None = None,
    seed: int = 0,
    model: type[TinyClassifier] = TinyClassifier,
    **options: Any,
) -> Pair:
    """Train ``model`` (:class:`TinyClassifier` or a subclass) under the Runner (``tmp_path/mm``) and under Lightning
    (``tmp_path/lt``) with the same hooks (plus a :class:`RecorderHook`), optimizer (``paramwise_cfg``) and global
    seed (Python, numpy, torch: the Runner's ``randomness``, Lightning's ``seed_everything``); then test on ``test``
    if given (``runner.test()``, ``trainer.test``). ``options`` go to both (``default_scope``, ``visualizer``)."""
    train_cfg = train_cfg or dict(by_epoch=True, max_epochs=2, val_interval=1)
    hooks = [dict(type="RecorderHook"), *(custom_hooks or [])]
    default_train, default_val = loaders()
    train, val = train or default_train, val or default_val
    mm_dir, lt_dir = tmp_path / "mm", tmp_path / "lt"
    optim_wrapper = dict(optimizer=dict(type="SGD", lr=0.1), **({"paramwise_cfg": paramwise_cfg} if paramwise_cfg else {}))
    name = f"downstream-{next(_runs)}"
    runner = Runner(
        model=make_model(task=task, model=model),
        work_dir=os.fspath(mm_dir),
        train_dataloader=copy.deepcopy(train),
        val_dataloader=copy.deepcopy(val),
        val_cfg=dict(),
        val_evaluator=dict(type="TinyAccuracy"),
        **(dict(test_dataloader=copy.deepcopy(test), test_cfg=dict(), test_evaluator=dict(type="TinyAccuracy"))
           if test is not None else {}),
        train_cfg=train_cfg,
        randomness=dict(seed=seed),
        optim_wrapper=copy.deepcopy(optim_wrapper),
        default_hooks=copy.deepcopy(default_hooks),
        custom_hooks=copy.deepcopy(hooks),
        experiment_name=f"mm-{name}",
        **copy.deepcopy(options),
    )
    runner.train()
    if test is not None:
        runner.test()
    adapter = MMEngineAdapter.from_config(
        default_hooks=copy.deepcopy(default_hooks), custom_hooks=copy.deepcopy(hooks), work_dir=lt_dir,
        experiment_name=f"lt-{name}", train_cfg=train_cfg, **copy.deepcopy(options),
    )  # fmt: skip
    # another scope is current now, as after a Runner built later in the process: the fit must set the adapter's
    DefaultScope.get_instance(f"after-{name}", scope_name="mmengine")
    module = LitWrapper(make_model(task=task, model=model), optim_wrapper)
    trainer = pl.Trainer(
        callbacks=[adapter], default_root_dir=lt_dir, enable_checkpointing=False, logger=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, **adapter.trainer_kwargs(),
    )  # fmt: skip
    _seed_everything(seed)
    trainer.fit(module, copy.deepcopy(train), copy.deepcopy(val))
    if test is not None:
        trainer.test(module, copy.deepcopy(test), verbose=False)
    return Pair(runner, trainer, adapter, module, mm_dir, lt_dir)


def _seed_everything(seed: int) -> None:
    """What ``lightning.seed_everything`` seeds, without the ``PL_GLOBAL_SEED`` it leaves to later tests."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _unprefixed(state: dict[str, Any]) -> dict[str, Any]:
    """Lightning-side keys as the Runner's: ``LitWrapper`` holds the model as ``model`` (also inside an EMA copy)."""
    return {re.sub(r"^(module\.)?model\.", r"\1", k): v for k, v in state.items()}


# ------------------------------------------------------------------------------------------------ comparisons
def tree(root: Path) -> dict[str, Path]:
    """Files under ``root`` keyed by their path with run timestamps replaced by ``{ts}``."""
    return {STAMP.sub("{ts}", os.fspath(p.relative_to(root))): p for p in sorted(root.rglob("*")) if p.is_file()}


def assert_same_files(mm_dir: Path, lt_dir: Path) -> None:
    """Same files; images byte for byte, checkpoints by weights and meta, scalar logs without timings."""
    mm, lt = tree(mm_dir), tree(lt_dir)
    assert sorted(lt) == sorted(mm), f"Lightning's work_dir {sorted(lt)}, the Runner's {sorted(mm)}"
    for name, mm_path in mm.items():
        lt_path = lt[name]
        if name.endswith((".png", ".jpg")):
            assert lt_path.read_bytes() == mm_path.read_bytes(), name
        elif name.endswith(".pth"):
            mm_ckpt = torch.load(mm_path, weights_only=False)
            lt_ckpt = torch.load(lt_path, weights_only=False)
            if "state_dict" not in mm_ckpt:  # a hook's own file (SwAVHook's queue.pth)
                assert_same_state(mm_ckpt, lt_ckpt, name)
                continue
            assert_same_tensors(_unprefixed(lt_ckpt["state_dict"]), mm_ckpt["state_dict"])
            assert {k: lt_ckpt["meta"][k] for k in ("epoch", "iter")} == {k: mm_ckpt["meta"][k] for k in ("epoch", "iter")}
        elif name.endswith("scalars.json") or (name.endswith(".json") and "{ts}" in name):
            assert _scalars(lt_path) == _scalars(mm_path), name
        elif name.endswith("last_checkpoint"):
            assert STAMP.sub("", lt_path.read_text()).endswith(os.path.basename(mm_path.read_text()))


def _scalars(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: _rounded(v) for k, v in row.items() if not TIMING.search(k)} for row in rows]


def _rounded(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def assert_same_hub(mm_hub: Any, lt_hub: Any) -> None:
    """Same scalar keys with the same histories (timings excepted), same runtime info keys."""
    mm_scalars = {k: v for k, v in mm_hub.log_scalars.items() if not TIMING.search(k)}
    lt_scalars = {k: v for k, v in lt_hub.log_scalars.items() if not TIMING.search(k)}
    assert sorted(lt_scalars) == sorted(mm_scalars)
    for key, buf in mm_scalars.items():
        mm_values, _ = buf.data
        lt_values, _ = lt_scalars[key].data
        np.testing.assert_allclose(lt_values, mm_values, rtol=1e-5, atol=1e-6, err_msg=key)
    skip = {"cfg", "seed", "experiment_name", "mmengine_version", "max_epochs"}  # cfg text and names differ by design
    for key in set(mm_hub.runtime_info) - skip:
        assert key in lt_hub.runtime_info, key


def model_settings(model: TinyClassifier) -> dict[str, Any]:
    """The model attributes downstream hooks set (head settings the model's head has)."""
    head = model.head
    settings = dict(epoch_info=model.epoch_info, loss_lambda=model.loss_lambda, scale=head.scale)
    settings["use_l1"] = getattr(head, "use_l1", None)
    settings["margins"] = head.margins.tolist() if isinstance(head, ArcFaceClsHead) else None
    return settings


def hook_state(hook: Hook, work_dir: Path) -> dict[str, Any]:
    """A hook's instance attributes that a run changes (not its visualizer, which each host owns); paths under
    ``work_dir`` as ``{work_dir}/...`` (SwAVHook's ``queue_path``) with run timestamps as ``{ts}``."""
    state = {k: v for k, v in vars(hook).items() if k not in {"_visualizer"}}
    return {k: STAMP.sub("{ts}", v.replace(os.fspath(work_dir), "{work_dir}")) if isinstance(v, str) else v
            for k, v in state.items()}  # fmt: skip


def assert_same_state(mm: Any, lt: Any, where: str) -> None:
    if isinstance(mm, torch.nn.Module):
        assert_same_tensors(_unprefixed(lt.state_dict()), _unprefixed(mm.state_dict()))
    elif isinstance(mm, torch.Tensor):
        torch.testing.assert_close(lt, mm, msg=where)
    elif isinstance(mm, dict):
        assert sorted(lt) == sorted(mm), where
        for k in mm:
            assert_same_state(mm[k], lt[k], f"{where}.{k}")
    elif isinstance(mm, (list, tuple)):
        assert len(lt) == len(mm), where
        for i, (a, b) in enumerate(zip(mm, lt)):
            assert_same_state(a, b, f"{where}[{i}]")
    elif isinstance(mm, float) and math.isfinite(mm):
        assert lt == mm or abs(lt - mm) <= 1e-6 * max(1.0, abs(mm)), where
    elif isinstance(mm, (int, str, bool, type(None))):
        assert lt == mm, where


def log_of(work_dir: Path, needles: tuple[str, ...]) -> list[str]:
    """The run log's lines containing any of ``needles``, without the time and logger name prefix."""
    (log,) = [p for p in work_dir.rglob("*.log")]
    lines = log.read_text().splitlines()
    return [line.split(" - ", 2)[-1] for line in lines if any(n in line for n in needles)]
