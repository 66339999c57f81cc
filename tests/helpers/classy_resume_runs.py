"""Resuming a Classy task config from a checkpoint: ``classy_train.py --checkpoint_load_path`` and ``lightning-hooks
train --checkpoint_load_path`` (subprocess side of tests/families/classy/test_train_resume.py).

The config is Classy's ResNet-50 model-zoo config, shrunk as in classy_train_runs.py (3 epochs, a per-step LR
schedule, gradient clipping), its ResNet-50 narrow (``resnet_config``'s ``narrow``: the shipped width cost these runs
~70 s CPU more, much of it in ``classy_train.py``'s checkpoint loads, ``broadcast_object``). Run A trains it with
``--checkpoint_folder`` and is preempted right after its first train phase ended (a config hook raises when the next
phase starts, once CheckpointHook wrote ``checkpoint.torch``); run B trains the same config without that hook from A's
checkpoint: Classy runs the pending test phase of epoch 0 first, then epochs 1 and 2.
In the ``*_mid_phase`` scenarios run A is preempted inside train phase 2 (after 2 of its 4 steps; Classy checkpoints
at train phase ends only) and the same command reruns on the same folder with ``--checkpoint_load_path`` on it; their
loaders have a worker (``MID_PHASE_WORKERS``) and their train images random crops and flips (``_config``'s ``crops``),
which draw from torch's generator; torch seeds it in each worker from a base seed the loader's iterator draws when it
is made: the batches match only when both sides make their iterators with the generator in the same state (the rerun
makes test phase 1's, then train phase 2's). Classy's loaders start their workers with ``spawn`` by default; here
each task is made to fork them (:func:`fork_loader_workers`, on both sides), which changes neither the order nor the
seeds (each worker's seed is the base seed its iterator drew in this process, plus its id) and spares each worker
(one a phase) a fresh import of torch, torchvision and Classy (~3 s CPU).

Each side resumes from each side's checkpoint, as a folder and as a file. A checkpoint path that does not exist
starts the run from scratch with Classy's warning, on both sides.

What a run recorded is kept as ``classy_train_runs.digest`` s (each tensor's SHA-1, dtype and shape: equal exactly
when the tensors are bitwise equal), and its checkpoint files are deleted once read (run A's once every run B loaded
them): a full-width ResNet-50 state is ~100 MB, and full states of every phase and checkpoint of the 13 runs came to
18 GB.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from classy_train_runs import delete_states, digest

HERE = Path(__file__).resolve().parent

#: the loader workers of the ``*_mid_phase`` scenarios (the others load in the process)
MID_PHASE_WORKERS = 1

#: run B: (name, side that resumes, run A whose checkpoint it loads, path inside A's checkpoint folder)
RESUMES = (
    ("classy_from_classy", "classy", "classy", ""),
    ("lightning_from_classy", "lightning", "classy", ""),
    ("lightning_from_classy_file", "lightning", "classy", "model_phase-0_end.torch"),
    ("lightning_from_lightning", "lightning", "lightning", ""),
    ("classy_from_lightning_file", "classy", "lightning", "checkpoint.torch"),
)


class Preempted(Exception):
    """Raised by the ``preempt`` hook: the job stops as a preempted one would."""


def register_preempt() -> None:
    from classy_vision.hooks import ClassyHook, register_hook

    @register_hook("preempt")
    class Preempt(ClassyHook):
        """Stops the run when its first test phase starts: after train phase 0 ended, and CheckpointHook (which
        Classy's ``set_hooks`` moves last) saved it."""

        on_start = on_phase_end = on_step = on_end = ClassyHook._noop

        def on_phase_start(self, task: Any) -> None:
            if not task.train:
                raise Preempted(f"preempted at the start of phase {task.phase_idx}")

    @register_hook("preempt_mid_phase")
    class PreemptMidPhase(ClassyHook):
        """Stops the run inside its second train phase (phase 2), after its second step: CheckpointHook's last file
        is the one of train phase 0's end, test phase 1 ran."""

        on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

        def on_step(self, task: Any) -> None:
            if task.train and task.train_phase_idx == 1 and len(task.losses) == 2:
                raise Preempted(f"preempted inside phase {task.phase_idx}, after step 2")


def _config(out: Path, preempt: str = "", crops: bool = False) -> Path:
    """The shrunk, narrow ResNet-50 config, with the ``preempt`` hook if one is named; with ``crops``, its train images
    are cropped and flipped at random first (torchvision's ``RandomResizedCrop`` and ``RandomHorizontalFlip``: the
    shipped config has no random transform, and its synthetic images are drawn from a seed per index). Its recorder
    draws from torch's generator at each phase start (``RunRecorder``'s ``draw``), after the phase's iterator drew its
    base seed in Classy's ``advance_phase``."""
    import classy_train_runs

    path = classy_train_runs.resnet_config(out, narrow=True)
    config = json.loads(path.read_text())
    next(hook for hook in config["hooks"] if hook["name"] == "run_recorder")["draw"] = True
    if preempt:
        config["hooks"].append({"name": preempt})
    if crops:
        transforms = config["dataset"]["train"]["transforms"][0]["transforms"]
        transforms[:0] = [{"name": "RandomResizedCrop", "size": 32}, {"name": "RandomHorizontalFlip"}]
    path.write_text(json.dumps(config, indent=2))
    return path


def _run(side: str, config: Path, out: Path, flags: list[str], keep: bool = False) -> dict[str, Any]:
    """One run; what it recorded and its checkpoint files, digested; the files deleted unless ``keep``."""
    import classy_train_runs

    args = ["--checkpoint_folder", str(out / "ckpt"), "--skip_tensorboard", "--log_freq", "2", *flags]
    try:
        if side == "lightning":
            return digest(classy_train_runs.run_lightning(config, out, [*args, "--accelerator", "cpu"]))
        return digest(classy_train_runs.run_classy(config, out, args))
    finally:
        if not keep:
            delete_states(out)


def preempted_run(root: Path, side: str) -> Path:
    """Run A on ``side``: its checkpoint folder once the ``preempt`` hook stopped it."""
    out = root / f"{side}_A"
    try:
        _run(side, _config(out, preempt="preempt"), out, [], keep=True)
    except Preempted:
        return out / "ckpt"
    raise AssertionError(f"{side}: run A was not preempted")


def child_main(out: str) -> None:
    torch.set_num_threads(1)
    sys.path.insert(0, str(HERE))
    import real_torchvision

    real_torchvision.activate()
    import classy_train_runs
    import classy_vision.dataset.classy_dataset as classy_dataset

    classy_dataset.DEFAULT_NUM_WORKERS = 0
    classy_train_runs.register()
    register_preempt()
    root = Path(out)
    results: dict[str, Any] = {}
    folders: dict[str, Path] = {}
    for side in ("classy", "lightning"):
        try:
            folders[side] = preempted_run(root, side)
        except Exception:  # noqa: BLE001  (reported by the scenarios that need it)
            results[f"{side}_A"] = {"failed": traceback.format_exc()}
    for name, side, source, file in RESUMES:
        try:
            if source not in folders:
                raise RuntimeError(f"run A on {source} failed:\n{results[f'{source}_A']['failed']}")
            path = folders[source] / file if file else folders[source]
            results[name] = _run(side, _config(root / name), root / name, ["--checkpoint_load_path", str(path)])
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
    for folder in folders.values():
        delete_states(folder.parent)
    for side in ("classy", "lightning"):
        name = f"{side}_missing"
        try:
            results[name] = _run(side, _config(root / name), root / name,
                                 ["--checkpoint_load_path", str(root / "no_such_folder")])  # fmt: skip
        except Exception:  # noqa: BLE001
            results[name] = {"failed": traceback.format_exc()}
    classy_dataset.DEFAULT_NUM_WORKERS = MID_PHASE_WORKERS
    fork_loader_workers()
    for side in ("classy", "lightning"):
        try:
            results[f"{side}_mid_phase"] = mid_phase_rerun(root, side)
        except Exception:  # noqa: BLE001
            results[f"{side}_mid_phase"] = {"failed": traceback.format_exc()}
    torch.save(results, root / "results.pt")


def fork_loader_workers() -> None:
    """Every ``ClassificationTask`` made from here on starts its loader workers with ``fork``: its public
    ``set_dataloader_mp_context``, called as the task is made (``classy_train.py``'s and ``lightning-hooks train``'s
    ``build_task`` alike), as a user's script may."""
    from classy_vision.tasks import ClassificationTask

    init = ClassificationTask.__init__

    def forking(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.set_dataloader_mp_context("fork")

    ClassificationTask.__init__ = forking


def mid_phase_rerun(root: Path, side: str) -> dict[str, Any]:
    """``side`` preempted inside train phase 2, then the same command again with ``--checkpoint_load_path`` on its
    checkpoint folder (a fresh config without the preempting hook, the same output folder); what the rerun recorded,
    the files of both runs in the folder, and the files run A left."""
    out = root / f"{side}_mid_phase"
    try:
        _run(side, _config(out, preempt="preempt_mid_phase", crops=True), out, [], keep=True)
    except Preempted:
        left = sorted(p.name for p in (out / "ckpt").glob("*"))
    else:
        raise AssertionError(f"{side}: run A was not preempted")
    rerun = _run(side, _config(out, crops=True), out, ["--checkpoint_load_path", str(out / "ckpt")])
    return {**rerun, "left": left}
