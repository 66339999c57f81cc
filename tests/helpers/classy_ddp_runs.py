"""A Classy task config on two CPU processes (gloo): ``classy_train.py --distributed_backend ddp`` under ``torchrun``
(Classy's DistributedTrainer) and ``lightning-hooks train --devices 2`` (Lightning's DDP), the script each process runs.

``python classy_ddp_runs.py OUT classy [MODEL]``, started by ``torchrun --nproc_per_node 2``, runs ``classy_train.py``'s
``main``; ``python classy_ddp_runs.py OUT lightning`` runs ``lightning-hooks train --devices 2``, whose Lightning
launches rank 1 by running this script again; ``OUT torchrun``, started by ``torchrun``, runs ``lightning-hooks train
--distributed_backend ddp`` in each process, as classy_train.py's users launch it. The config is Classy's ResNet-50 model-zoo config shrunk as in classy_train_runs.py
(its BatchNorm buffers differ per rank until Classy's ``before_eval`` broadcast), for 2 epochs; with MODEL
``resnext``, the model zoo's ImageNet ResNeXt-50 config made small (:func:`resnext_config`). Each rank's
``run_recorder`` saves ``OUT/<side>/recorded_rank<r>.pt`` and this script its log lines in ``log_rank<r>.json``;
:func:`prepare` writes both configs first.

``OUT SIDE resnet preempted`` stops the run inside a train phase (the ``preempt_at`` hook raises :class:`Preempted`
on every rank after the same step; Classy checkpoints at train phase ends only), and ``OUT SIDE resnet rerun`` runs the
same command again with ``--checkpoint_load_path`` on its checkpoint folder: :func:`prepare_mid_phase` writes the
config of each run before its launch.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
#: classy_train.py under torchrun; lightning-hooks train --devices 2; lightning-hooks train --distributed_backend ddp
#: under torchrun, as classy_train.py is launched
SIDES = ("classy", "lightning", "torchrun")


def config(out: Path) -> Path:
    """The shrunk, narrow ResNet-50 config, 2 epochs, recording each rank (states as ``classy_train_runs.digest`` s)."""
    import classy_train_runs

    path = classy_train_runs.resnet_config(out, narrow=True)
    data = json.loads(path.read_text())
    data["num_epochs"] = 2
    data["hooks"] = [{"name": "run_recorder", "out": str(out / "recorded_rank{rank}.pt"), "digest": True}]
    path.write_text(json.dumps(data, indent=2))
    return path


def resnext_config(out: Path, images: Path) -> Path:
    """Classy's model-zoo ``imagenet/resnext50_imagenet_classy_config.json`` (ResNeXt, ``image_path`` data, a step
    LR per epoch as shipped) made small: ``images``' 8 train / 4 test images of 40 px in 2 classes (:func:`images`),
    crops of 32, batches of 2, a narrow ResNeXt (one block a stage, 8 initial planes, base width 2 and cardinality
    4), 2 epochs, top-1 accuracy, recording each rank."""
    import classy_vision

    root = Path(classy_vision.__file__).parent
    data = json.loads((root / "configs/imagenet/resnext50_imagenet_classy_config.json").read_text())
    for phase in ("train", "test"):
        data["dataset"][phase].update(batchsize_per_replica=2, image_folder=str(images / phase))
    data["dataset"]["train"]["transforms"][0]["transforms"][0]["size"] = 32  # RandomResizedCrop
    data["dataset"]["test"]["transforms"][0]["transforms"][0]["size"] = 36  # Resize
    data["dataset"]["test"]["transforms"][0]["transforms"][1]["size"] = 32  # CenterCrop
    data["model"].update(num_blocks=[1, 1, 1, 1], init_planes=8, base_width_and_cardinality=[2, 4], num_classes=2)
    data["model"]["heads"][0].update(num_classes=2, fork_block="block3-0", in_plane=256)
    data["meters"] = {"accuracy": {"topk": [1]}}
    data["num_epochs"] = 2
    data["hooks"] = [{"name": "run_recorder", "out": str(out / "recorded_rank{rank}.pt"), "digest": True}]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "resnext.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def images(folder: Path) -> None:
    """An image folder (``train/<class>/<i>.png``, ``test/...``) of generated 40 px images, 2 classes."""
    from PIL import Image

    generator = torch.Generator().manual_seed(0)
    for phase, n in (("train", 8), ("test", 4)):
        for i in range(n):
            pixels = torch.randint(0, 255, (40, 40, 3), generator=generator, dtype=torch.uint8).numpy()
            path = folder / phase / "ab"[i % 2] / f"{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels).save(path)


def prepare(out: Path, model: str = "resnet") -> None:
    """Each side's config (``model``: ``resnet`` or ``resnext``) and checkpoint folder (in the process that starts
    the ranks)."""
    if model == "resnext":
        images(out / "images")
    for side in SIDES:
        if model == "resnext":
            resnext_config(out / side, out / "images")
        else:
            config(out / side)
        (out / side / "ckpt").mkdir(parents=True, exist_ok=True)


#: where the ``preempted`` run stops: inside train phase 2 (the second epoch's), after its first of 2 steps a rank
PREEMPT_AT = {"train_phase_idx": 1, "step": 1}


class Preempted(Exception):
    """Raised by the ``preempt_at`` hook on each rank: the job stops as a preempted one would."""


def register_preempt() -> None:
    from classy_vision.hooks import ClassyHook, register_hook

    @register_hook("preempt_at")
    class PreemptAt(ClassyHook):
        """Stops the run after step ``step`` of train phase ``train_phase_idx`` (this rank's steps)."""

        on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

        def __init__(self, train_phase_idx: int, step: int) -> None:
            super().__init__()
            self.train_phase_idx, self.step = train_phase_idx, step

        def on_step(self, task: Any) -> None:
            if task.train and task.train_phase_idx == self.train_phase_idx and len(task.losses) == self.step:
                raise Preempted(f"preempted inside phase {task.phase_idx}, after step {self.step}")


def prepare_mid_phase(out: Path, side: str, preempt: bool) -> None:
    """``side``'s config for the ``preempted`` run (``preempt``: with the ``preempt_at`` hook) or its ``rerun`` (the
    same config without it), in ``out/side``, whose checkpoint folder both runs share."""
    folder = out / side
    path = config(folder)
    if preempt:
        data = json.loads(path.read_text())
        data["hooks"].append({"name": "preempt_at", **PREEMPT_AT})
        path.write_text(json.dumps(data, indent=2))
    (folder / "ckpt").mkdir(parents=True, exist_ok=True)


def main(out: Path, side: str, model: str = "resnet", stage: str = "") -> None:
    sys.path[:0] = [str(HERE)]
    torch.set_num_threads(1)
    import real_torchvision

    real_torchvision.activate()
    import classy_train_runs
    import classy_vision.dataset.classy_dataset as classy_dataset

    classy_dataset.DEFAULT_NUM_WORKERS = 0
    classy_train_runs.register()
    register_preempt()
    folder = out / side
    path = folder / f"{model}.json"  # written by prepare(), before the processes start
    flags = ["--checkpoint_folder", str(folder / "ckpt"), "--skip_tensorboard", "--log_freq", "1"]
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logging.getLogger().addHandler(Collect())
    logging.getLogger().setLevel(logging.INFO)
    if stage == "rerun":
        flags += ["--checkpoint_load_path", str(folder / "ckpt")]
    try:
        if side == "classy":
            classy_train_runs.run_classy_main(path, [*flags, "--distributed_backend", "ddp"])
        else:
            from lightning_hooks.train import main as train

            launch = ["--devices", "2"] if side == "lightning" else ["--distributed_backend", "ddp"]
            train([str(path), *flags, "--accelerator", "cpu", *launch])
    except Preempted:
        if stage != "preempted":
            raise
    else:
        assert stage != "preempted", f"{side}: the run was not preempted"
    if torch.distributed.is_initialized():
        rank = torch.distributed.get_rank()
    else:  # a preempted Lightning run tore its process group down
        rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
    name = f"log_preempted_rank{rank}.json" if stage == "preempted" else f"log_rank{rank}.json"
    (folder / name).write_text(json.dumps(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:])
