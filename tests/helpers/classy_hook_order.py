"""What Classy's real ``ClassificationTask`` + ``LocalTrainer`` show its hooks, mount point by mount point: the reference
of ``tests/families/classy/test_loop.py``. Run in a subprocess (``classy_vision.tasks`` needs the real torchvision):
``reference(epochs, train_batches, test_batches, batch_size)`` returns, per hook call, ``(mount point, phase_type,
phase_idx, train_phase_idx, num_updates)``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _main(epochs: int, train_batches: int, test_batches: int, batch_size: int) -> None:
    sys.path.insert(0, str(HERE))
    import real_torchvision

    real_torchvision.activate()
    from classy_data import DictData
    from classy_real import TinyClassy
    from classy_vision.dataset import ClassyDataset
    from classy_vision.hooks import ClassyHook
    from classy_vision.optim import SGD
    from classy_vision.optim.param_scheduler import ConstantParamScheduler
    from classy_vision.tasks import ClassificationTask
    from classy_vision.trainer import LocalTrainer
    from torch import nn

    calls: list[list[Any]] = []

    def record(mount: str, task: Any) -> None:
        calls.append([mount, task.phase_type, task.phase_idx, task.train_phase_idx, task.num_updates])

    class Order(ClassyHook):
        on_forward = on_loss_and_meter = on_backward = on_update = ClassyHook._noop

        def on_start(self, task: Any) -> None:
            record("on_start", task)

        def on_phase_start(self, task: Any) -> None:
            record("on_phase_start", task)

        def on_step(self, task: Any) -> None:
            record("on_step", task)

        def on_phase_end(self, task: Any) -> None:
            record("on_phase_end", task)

        def on_end(self, task: Any) -> None:
            record("on_end", task)

    data = {phase: ClassyDataset(DictData(n * batch_size, seed), batch_size, False, None, None)
            for phase, n, seed in (("train", train_batches, 0), ("test", test_batches, 1))}  # fmt: skip
    for dataset in data.values():
        dataset.set_num_workers(0)
    task = (
        ClassificationTask().set_model(TinyClassy()).set_loss(nn.CrossEntropyLoss()).set_optimizer(SGD())
        .set_optimizer_schedulers({"lr": ConstantParamScheduler(0.1)}).set_num_epochs(epochs)
        .set_hooks([Order()]).set_dataset(data["train"], "train").set_dataset(data["test"], "test")
    )  # fmt: skip
    LocalTrainer().train(task)
    print(json.dumps(calls))


def reference(epochs: int, train_batches: int, test_batches: int, batch_size: int) -> list[tuple[Any, ...]]:
    """The hook calls of the real task's run, in order (see the module docstring)."""
    args = [str(v) for v in (epochs, train_batches, test_batches, batch_size)]
    out = subprocess.run([sys.executable, __file__, *args], check=True, cwd=HERE, timeout=300, capture_output=True, text=True)
    return [tuple(call) for call in json.loads(out.stdout.strip().splitlines()[-1])]


if __name__ == "__main__":
    _main(*(int(v) for v in sys.argv[1:5]))
