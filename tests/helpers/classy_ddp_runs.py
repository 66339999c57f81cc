"""A Classy task config on two CPU processes (gloo): ``classy_train.py --distributed_backend ddp`` under ``torchrun``
(Classy's DistributedTrainer) and ``lightning-hooks train --devices 2`` (Lightning's DDP), the script each process runs.

``python classy_ddp_runs.py OUT classy``, started by ``torchrun --nproc_per_node 2``, runs ``classy_train.py``'s
``main``; ``python classy_ddp_runs.py OUT lightning`` runs ``lightning-hooks train --devices 2``, whose Lightning
launches rank 1 by running this script again; ``OUT torchrun``, started by ``torchrun``, runs ``lightning-hooks train
--distributed_backend ddp`` in each process, as classy_train.py's users launch it. The config is Classy's ResNet-50 model-zoo config shrunk as in classy_train_runs.py
(its BatchNorm buffers differ per rank until Classy's ``before_eval`` broadcast), for 2 epochs. Each rank's
``run_recorder`` saves ``OUT/<side>/recorded_rank<r>.pt`` and this script its log lines in ``log_rank<r>.json``;
:func:`prepare` writes both configs first.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
#: classy_train.py under torchrun; lightning-hooks train --devices 2; lightning-hooks train --distributed_backend ddp
#: under torchrun, as classy_train.py is launched
SIDES = ("classy", "lightning", "torchrun")


def config(out: Path) -> Path:
    """The shrunk ResNet-50 config, 2 epochs, recording each rank (states as ``classy_train_runs.digest`` s)."""
    import classy_train_runs

    path = classy_train_runs.resnet_config(out)
    data = json.loads(path.read_text())
    data["num_epochs"] = 2
    data["hooks"] = [{"name": "run_recorder", "out": str(out / "recorded_rank{rank}.pt"), "digest": True}]
    path.write_text(json.dumps(data, indent=2))
    return path


def prepare(out: Path) -> None:
    """Each side's config and checkpoint folder (in the process that starts the ranks)."""
    for side in SIDES:
        config(out / side)
        (out / side / "ckpt").mkdir(parents=True, exist_ok=True)


def main(out: Path, side: str) -> None:
    sys.path[:0] = [str(HERE)]
    torch.set_num_threads(1)
    import real_torchvision

    real_torchvision.activate()
    import classy_train_runs
    import classy_vision.dataset.classy_dataset as classy_dataset

    classy_dataset.DEFAULT_NUM_WORKERS = 0
    classy_train_runs.register()
    folder = out / side
    path = folder / "resnet.json"  # written by prepare(), before the processes start
    flags = ["--checkpoint_folder", str(folder / "ckpt"), "--skip_tensorboard", "--log_freq", "1"]
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logging.getLogger().addHandler(Collect())
    logging.getLogger().setLevel(logging.INFO)
    if side == "classy":
        classy_train_runs.run_classy_main(path, [*flags, "--distributed_backend", "ddp"])
    else:
        from lightning_hooks.train import main as train

        launch = ["--devices", "2"] if side == "lightning" else ["--distributed_backend", "ddp"]
        train([str(path), *flags, "--accelerator", "cpu", *launch])
    rank = torch.distributed.get_rank()
    (folder / f"log_rank{rank}.json").write_text(json.dumps(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
