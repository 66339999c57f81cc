"""Classy's real ``ClassificationTask``, driven by Classy's ``LocalTrainer`` on CPU, as the reference for the adapter.

``reference(specs, folder)`` runs each spec in one subprocess (``classy_vision.tasks`` needs the real torchvision,
which only a subprocess may import: ``real_torchvision.activate``) and returns what the :class:`Recorder` hook saw.
The same spec drives the Lightning side (:func:`lightning_run`): the same ``TinyClassy`` model (a real
``ClassyModel``, held by :class:`ClassyNet`), data, hook configs (built by Classy's registry on both sides), meter
configs, optimizer param groups (Classy's: non-BatchNorm parameters, then BatchNorm ones) and LR schedule (Classy's
own param scheduler, per step or per epoch; under Lightning a ``LambdaLR`` over it).

A spec is a dict: ``epochs``, ``lr`` (``{"scheduler": <Classy param-scheduler config>, "interval": "step" | "epoch"}``),
``meters`` (Classy's
config form), ``hooks`` (Classy's hook configs), optional ``checkpoint`` (a Classy checkpoint to start from) and
``train``/``test`` data sizes.

Example::

    [ours] = reference([spec], tmp_path)   # the real ClassificationTask
    theirs = lightning_run(spec, tmp_path)  # ClassyAdapter under lightning.Trainer
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from classy_vision.hooks import ClassyHook
from classy_vision.models import ClassyModel
from classy_vision.optim.param_scheduler import build_param_scheduler
from torch import nn

from classy_data import DictData

HERE = Path(__file__).resolve().parent


class TinyClassy(ClassyModel):
    """Linear-BN-ReLU-Linear, 4 features, 3 classes; seeded, so every instance starts with the same weights."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (4,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def lr_scheduler(spec: dict[str, Any]) -> Any:
    """The spec's LR schedule, a Classy param-scheduler config (``spec["lr"]["scheduler"]``), built by Classy."""
    return build_param_scheduler(dict(spec["lr"]["scheduler"]))


def total_steps(spec: dict[str, Any]) -> int:
    train = spec.get("train", {"n": 16, "bs": 4})
    return spec["epochs"] * train["n"] // train["bs"]


class Recorder(ClassyHook):
    """Records the phase counters at ``on_start`` and ``on_end`` and, at every phase end: phase counters, losses, LR (train), meter
    values, ``num_updates``, ``where`` (train) and, for test phases, the model state the phase ran with (Classy's
    trunk)."""

    on_phase_start = on_step = ClassyHook._noop

    def __init__(self) -> None:
        super().__init__()
        self.start: tuple[int, int] | None = None
        self.end: tuple[int, int] | None = None
        self.phases: list[dict[str, Any]] = []

    def on_start(self, task: Any) -> None:
        self.start = (task.phase_idx, task.train_phase_idx)

    def on_end(self, task: Any) -> None:
        self.end = (task.phase_idx, task.train_phase_idx)

    def on_phase_end(self, task: Any) -> None:
        record = {
            "type": task.phase_type,
            "phase_idx": task.phase_idx,
            "train_phase_idx": task.train_phase_idx,
            "losses": list(task.losses),
            "meters": [meter.value for meter in task.meters],
            "num_updates": task.num_updates,
        }
        if task.train:
            record["lr"] = task.optimizer.options_view.lr
        else:
            trunk = task.get_classy_state()["base_model"]["model"]["trunk"]
            record["weights"] = {k: v.detach().clone() for k, v in trunk.items()}
        self.phases.append(record)


def _classy_task(spec: dict[str, Any], recorder: Recorder) -> Any:
    from classy_vision.dataset import ClassyDataset
    from classy_vision.hooks import build_hooks
    from classy_vision.meters import build_meters
    from classy_vision.optim import SGD
    from classy_vision.optim.param_scheduler import UpdateInterval
    from classy_vision.tasks import ClassificationTask

    train, test = spec.get("train", {"n": 16, "bs": 4}), spec.get("test", {"n": 8, "bs": 4})
    datasets = {}
    for phase, data, seed in (("train", train, 0), ("test", test, 1)):
        datasets[phase] = ClassyDataset(DictData(data["n"], seed), data["bs"], False, None, None)
        datasets[phase].set_num_workers(0)  # load in the process, as the Lightning side does
    scheduler = lr_scheduler(spec)
    scheduler.update_interval = UpdateInterval.STEP if spec["lr"]["interval"] == "step" else UpdateInterval.EPOCH
    task = (
        ClassificationTask()
        .set_model(TinyClassy())
        .set_loss(nn.CrossEntropyLoss())
        .set_optimizer(SGD(momentum=0.9))
        .set_optimizer_schedulers({"lr": scheduler})
        .set_num_epochs(spec["epochs"])
        .set_meters(build_meters(spec.get("meters", {})))
        .set_hooks([recorder, *build_hooks(spec.get("hooks", []))])
        .set_dataset(datasets["train"], "train")
        .set_dataset(datasets["test"], "test")
    )
    if spec.get("checkpoint"):
        task.set_checkpoint(spec["checkpoint"])
    return task


def _main(spec_file: str, out_file: str) -> None:
    """Subprocess entry: run every spec with the real ClassificationTask; save the records and log lines."""
    sys.path.insert(0, str(HERE))
    import real_torchvision

    real_torchvision.activate()
    from classy_vision.trainer import LocalTrainer

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logging.getLogger().addHandler(Collect())
    logging.getLogger().setLevel(logging.INFO)
    results = []
    for spec in json.loads(Path(spec_file).read_text()):
        lines.clear()
        recorder = Recorder()
        task = _classy_task(spec, recorder)
        LocalTrainer().train(task)
        results.append({"phases": recorder.phases, "start": recorder.start, "end": recorder.end, "log": list(lines),
                        "hooks": task.hooks[1:]})  # fmt: skip  # the record's keys, continued
        results[-1]["hook_state"] = {h.name(): _plain_state(h) for h in task.hooks[1:]}
        del results[-1]["hooks"]
    torch.save(results, out_file)


def _plain_state(hook: Any) -> Any:
    """What the tests compare of a hook besides its files: its ``get_classy_state`` and a few attributes."""
    extra = {k: getattr(hook, k) for k in ("num_parameters", "num_flops", "num_activations", "bar_size", "batches")
             if isinstance(getattr(hook, k, None), (int, float))}
    return {"state": hook.get_classy_state(), **extra}


def reference(specs: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """Run ``specs`` with the real ClassificationTask in one subprocess; per spec ``{"phases", "start", "end", "log",
    "hook_state"}``."""
    folder.mkdir(parents=True, exist_ok=True)
    spec_file, out_file = folder / "specs.json", folder / "reference.pt"
    spec_file.write_text(json.dumps(specs))
    subprocess.run([sys.executable, __file__, str(spec_file), str(out_file)], check=True, cwd=HERE, timeout=300)
    return torch.load(out_file, weights_only=True)


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
