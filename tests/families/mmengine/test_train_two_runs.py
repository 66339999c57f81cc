"""Two ``lightning-hooks train`` runs of an MMEngine config in one process (a notebook, two tests in a row): each run
logs to its own ``MMLogger``, whatever an earlier run left current."""

from __future__ import annotations

from pathlib import Path

import train_kit  # registers the tiny datasets
from mmengine.logging import MMLogger

from lightning_hooks import train as dispatcher

#: the first line ``BaseModule.init_weights`` writes into the current logger's log file
INIT_INFO = "Name of parameter - Initialization information"


def config(directory: Path) -> Path:
    """mmpretrain's shipped ResNet-18 CIFAR config on tiny data, one epoch without validation."""
    path = directory / "resnet18_cifar.py"
    path.write_text(f"_base_ = [{str(train_kit.RESNET_CIFAR)!r}]\n{train_kit.resnet_cifar(n_val=None)}"
                    "train_cfg = dict(max_epochs=1)\nrandomness = dict(seed=0)\n")  # fmt: skip
    return path


def leave_current_and_closed(work_dir: Path) -> None:
    """Make the MMLogger that wrote under ``work_dir`` MMEngine's current one and close its file, as an earlier run
    can leave it."""
    for name, logger in list(MMLogger._instance_dict.items()):
        files = [h for h in logger.handlers if getattr(h, "baseFilename", "").startswith(str(work_dir))]
        if files:
            MMLogger.get_instance(name)  # current again
            for handler in files:
                handler.close()
            return
    raise AssertionError(f"no MMLogger wrote under {work_dir}")


def test_a_second_run_logs_its_weight_init_to_its_own_log(tmp_path: Path) -> None:
    """After a first run whose logger was left current with its file closed, a second run trains, and each run's log
    holds its model's initialisation lines: the run's logger exists before the weights are initialised, as the
    Runner builds its logger before its model."""
    path = config(tmp_path)
    for name in ("first", "second"):
        dispatcher.main([str(path), "--work-dir", str(tmp_path / name)])
        leave_current_and_closed(tmp_path / name)
    for name in ("first", "second"):
        (log,) = (tmp_path / name).glob("*/*.log")
        assert INIT_INFO in log.read_text(), name
