"""VISSL's ``tools/run_distributed_engines.py`` and ``lightning-hooks train``, as the programs a user runs, for the
multi-process scenarios (vissl_train_runs.py runs them; its ``launch_vissl`` calls the ``vissl`` side's ``main`` in
its own process, whose spawned ranks import this file through the hook generator).

``python vissl_cli.py vissl|lightning config=... [overrides] [--devices N]`` (the output: ``CHECKPOINT.DIR``). Both spawn their workers themselves:
VISSL with ``torch.multiprocessing.spawn`` (whose children import this file again as ``__mp_main__``), Lightning's
DDP by running this file again with ``LOCAL_RANK`` set; so the real torchvision and VISSL are activated on import,
in every process. Each process also records, per step, what it trained or tested on (:class:`RankRecorder`, added
to VISSL's ``default_hook_generator``, which both sides call) in ``OUT/rank<R>.jsonl``; with :data:`HOLD_ENV` set,
each holds after that train iteration until it is killed (:class:`Hold`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import real_torchvision  # noqa: E402

real_torchvision.activate()

import torch  # noqa: E402
from classy_vision.hooks.classy_hook import ClassyHook  # noqa: E402

torch.set_num_threads(1)  # in every process (VISSL's spawned workers import this file, they do not run main)


def _digest(tensors: Any) -> str:
    """A hash of a tensor's bytes, or of a list's or a dict's tensors (by key: PIRL's inputs) in order."""
    sha = hashlib.sha1()
    for tensor in _tensors(tensors):
        sha.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return sha.hexdigest()


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [tensor for key in sorted(value) for tensor in _tensors(value[key])]
    return [tensor for item in value for tensor in _tensors(item)]


class RankRecorder(ClassyHook):
    """After each step: the iteration, the rank's input and target (digests), and the loss averaged over ranks (a test
    phase's steps also name their ``test_phase``); after each phase end with meters, their values on this rank
    (``phase_end``: synced over the ranks, as metrics.json has them)."""

    on_start = on_phase_start = on_forward = on_loss_and_meter = on_backward = ClassyHook._noop
    on_update = on_end = ClassyHook._noop

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder

    def on_step(self, task: Any) -> None:
        sample = task.last_batch.sample
        row = {"iteration": task.iteration, "loss": task.last_batch.loss.item(), "input": _digest(sample["input"]),
               "target": _digest(sample["target"])}  # fmt: skip
        self._write(row if task.train else {"test_phase": task.phase_idx, **row})

    def on_phase_end(self, task: Any) -> None:
        if task.meters:
            values = {meter.name: meter.value for meter in task.meters}
            self._write({"phase_end": task.phase_idx, "train": task.train, "meters": values})

    def _write(self, row: dict[str, Any]) -> None:
        with open(f"{self.folder}/rank{torch.distributed.get_rank()}.jsonl", "a") as file:
            file.write(json.dumps(row, default=lambda value: value.tolist()) + "\n")


#: the train iteration after which every process holds until killed (vissl_resume_runs.py kills the run there)
HOLD_ENV = "VISSL_CLI_HOLD_AFTER"


class Hold(ClassyHook):
    """Blocks after train iteration :data:`HOLD_ENV` (its ``on_step``, after the checkpoint hook's) until the process
    is killed: a kill sent once an earlier checkpoint is written lands before the next one."""

    on_start = on_phase_start = on_forward = on_loss_and_meter = on_backward = ClassyHook._noop
    on_update = on_phase_end = on_end = ClassyHook._noop

    def on_step(self, task: Any) -> None:
        if task.train and task.iteration == int(os.environ.get(HOLD_ENV) or 0):
            threading.Event().wait()


def _extra_hooks(config: Any) -> list[Any]:
    return [RankRecorder(config.CHECKPOINT.DIR), *([Hold()] if os.environ.get(HOLD_ENV) else [])]


def hook_generator(config: Any) -> list[Any]:
    """VISSL's ``default_hook_generator``, a :class:`RankRecorder` writing into the checkpoint folder, and
    :class:`Hold` where :data:`HOLD_ENV` is set."""
    from vissl.hooks import default_hook_generator

    return [*default_hook_generator(config), *_extra_hooks(config)]


def _record_on_both_sides() -> None:
    """Both sides' hooks come from ``vissl.hooks.default_hook_generator`` (``lightning-hooks train`` looks it up when
    it builds the adapter): it gains the recorder."""
    import vissl.hooks

    original = vissl.hooks.default_hook_generator
    if getattr(original, "_recording", False):
        return

    def generator(config: Any) -> list[Any]:
        return [*original(config), *_extra_hooks(config)]

    generator._recording = True  # type: ignore[attr-defined]
    vissl.hooks.default_hook_generator = generator


def main(argv: list[str]) -> None:
    side, arguments = argv[0], argv[1:]
    if side == "vissl":  # tools/run_distributed_engines.py
        from vissl.utils.distributed_launcher import launch_distributed
        from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict

        _, config = convert_to_attrdict(compose_hydra_configuration(arguments))
        launch_distributed(config, node_id=0, engine_name="train", hook_generator=hook_generator)
    else:
        from lightning_hooks.train import main as train

        _record_on_both_sides()
        train(arguments)


if __name__ == "__main__":
    main(sys.argv[1:])
