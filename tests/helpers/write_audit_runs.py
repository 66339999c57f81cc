"""The two-process runs of tests/integration/ddp/test_write_audit.py whose launch the families' own kits fix without
Lightning's loggers: each rank's script, for Classy and VISSL.

    torchrun --nproc_per_node 2 write_audit_runs.py classy OUT classy      classy_train.py --distributed_backend ddp
    python write_audit_runs.py classy OUT lightning                         lightning-hooks train --devices 2 --logger ...

(``OUT/<side>/resnet.json``: classy_ddp_runs.config's task, one epoch; Lightning runs rank 1 by running this script
again.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
#: every Lightning logger, each with its store under the work dir
LOGGERS = ("--logger", "csv", "--logger", "tensorboard", "--logger", "mlflow", "--logger", "wandb")


def prepare_classy(out: Path) -> None:
    """Each side's task config (classy_ddp_runs.config's shrunk ResNet-50 at 8 initial planes, one epoch) and
    checkpoint folder."""
    import classy_ddp_runs

    for side in ("classy", "lightning"):
        path = classy_ddp_runs.config(out / side)
        data = json.loads(path.read_text())
        data["num_epochs"] = 1
        # who writes what does not depend on the width: ResNet-50 at an eighth of it, a 64th of the checkpoint bytes
        data["model"]["init_planes"] = 8
        data["model"]["heads"][0]["in_plane"] = 256
        path.write_text(json.dumps(data, indent=2))
        (out / side / "ckpt").mkdir(parents=True, exist_ok=True)


def classy(out: Path, side: str) -> None:
    """``classy_train.py``'s ``main`` (under torchrun) or ``lightning-hooks train --devices 2`` with every logger,
    on ``OUT/<side>/resnet.json``, checkpoints in ``OUT/<side>/ckpt``."""
    torch.set_num_threads(1)
    import real_torchvision

    real_torchvision.activate()
    import classy_train_runs
    import classy_vision.dataset.classy_dataset as classy_dataset

    classy_dataset.DEFAULT_NUM_WORKERS = 0
    classy_train_runs.register()
    path = out / side / "resnet.json"
    flags = ["--checkpoint_folder", str(out / side / "ckpt"), "--skip_tensorboard", "--log_freq", "1"]
    if side == "classy":
        classy_train_runs.run_classy_main(path, [*flags, "--distributed_backend", "ddp"])
    else:
        from lightning_hooks.train import main as train

        train([str(path), *flags, "--accelerator", "cpu", "--devices", "2", *LOGGERS])


if __name__ == "__main__":
    sys.path[:0] = [str(HERE)]
    {"classy": classy}[sys.argv[1]](Path(sys.argv[2]), sys.argv[3])
