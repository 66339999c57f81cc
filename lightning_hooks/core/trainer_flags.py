"""The command-line side of ``lightning-hooks train``'s Lightning options, without Lightning: the flags a family's
train command adds to its legacy parser (:func:`add_arguments`, which ``add_lightning_arguments`` calls) and the
``--trainer.KEY VALUE`` items taken out of its command line before that parser sees it (:func:`split_argv`).
:mod:`lightning_hooks.core.trainer_options` reads what they give against ``lightning.Trainer``, once the command line
has parsed: a usage error or ``--help`` imports neither torch nor Lightning.

Example::

    argv, trainer_argv = split_argv(["cfg.py", "--logger", "csv", "--trainer.max_time", "00:01:00:00"])
    # argv == ["cfg.py", "--logger", "csv"], trainer_argv == ["--trainer.max_time", "00:01:00:00"]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: the ``--logger`` choices, in the order their help lists them
LOGGERS = ("tensorboard", "csv", "wandb", "mlflow")
#: the prefix of a ``Trainer`` option on the command line, as LightningCLI writes it
PREFIX = "--trainer."
#: the families' own ``Trainer`` flags (``add_lightning_arguments``), by the option each sets
FLAGS = {"devices": "--devices", "num_nodes": "--num-nodes", "strategy": "--strategy", "accelerator": "--accelerator",
         "precision": "--precision"}  # fmt: skip  # one flag per option, wrapped at 120


def add_arguments(group: Any) -> None:
    """``--logger`` (repeatable) and ``--trainer-config FILE`` in a family's "Lightning" argument group; the
    ``--trainer.KEY VALUE`` items are taken out before parsing (:func:`split_argv`)."""
    group.add_argument("--logger", action="append", choices=LOGGERS, default=None,
                       help="a Lightning logger receiving the legacy hooks' scalars, saved under the work dir "
                            "(repeat for several); wandb runs offline and mlflow writes a local file: store unless "
                            "WANDB_API_KEY / MLFLOW_TRACKING_URI name a server")  # fmt: skip  # help text aligned under its first line
    group.add_argument("--trainer-config", metavar="FILE", default=None,
                       help="a YAML file of lightning.Trainer options (as under trainer: in a LightningCLI config); "
                            "--trainer.KEY VALUE sets any Trainer option, e.g. --trainer.max_time 00:01:00:00")  # fmt: skip  # help text aligned under its first line


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(rest, trainer_argv)``: the ``--trainer.KEY VALUE`` / ``--trainer.KEY=VALUE`` /
    ``--trainer.callbacks+=CLASS`` items taken out of ``argv`` (a value is the next item unless it starts with
    ``--``)."""
    rest: list[str] = []
    trainer: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item.startswith(PREFIX):
            trainer.append(item)
            if "=" not in item and i + 1 < len(items) and not items[i + 1].startswith("--"):
                trainer.append(items[i + 1])
                i += 1
        else:
            rest.append(item)
        i += 1
    return rest, trainer
