"""A VISSL run interrupted inside a train phase and rerun with the same command, which auto-resumes from its
``model_iteration{N}.torch`` (``CHECKPOINT.CHECKPOINT_ITER_FREQUENCY``): VISSL's launcher and ``lightning-hooks train``
each interrupted and rerun (subprocess side of tests/families/classy/test_vissl_resume.py).

The configs are those of vissl_train_runs.py (VISSL's ``quick_*`` integration-test configs made small: 3 iterations a
phase), for 3 phases, with a checkpoint every 2 iterations. Run A carries an :class:`Interrupt` hook (added to VISSL's
``default_hook_generator``, which both sides build their hooks with) that raises after iteration 5, inside train
phase 1, once ``model_iteration4.torch`` was written: the job dies as a killed one would (its ``stdout.json`` rows so
far flushed, as a process exit flushes them). Run B is the same command on the same folder without the hook: VISSL
resumes at iteration 4, skipping the batch of phase 1 already trained (its sampler's ``start_iter``), and so must
``lightning-hooks train``. Each side reruns on its own folder.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
#: the configs resumed (vissl_train_runs.CONFIGS), the checkpoint period and the iteration after which run A dies
NAMES = ("swav", "dino", "cpu_resnet_simclr")
ITER_FREQUENCY, INTERRUPT_AFTER = 2, 5
#: VISSL resumes inside a phase only with its stateful sampler (without it, its own rerun trains the whole phase again
#: and stops at ``where=1.0``); a third phase shows the one after the resumed phase starting at its first batch.
EXTRA = [f"config.CHECKPOINT.CHECKPOINT_ITER_FREQUENCY={ITER_FREQUENCY}",
         "config.DATA.TRAIN.USE_STATEFUL_DISTRIBUTED_SAMPLER=true", "config.OPTIMIZER.num_epochs=3"]  # fmt: skip


class Interrupted(Exception):
    """Raised by :class:`Interrupt`: the job stops as a killed one would."""


@contextlib.contextmanager
def interrupted() -> Iterator[None]:
    """VISSL's ``default_hook_generator`` with an :class:`Interrupt` hook last, while the block runs."""
    import vissl.hooks
    from classy_vision.hooks.classy_hook import ClassyHook

    class Interrupt(ClassyHook):
        """Raises after train iteration ``INTERRUPT_AFTER`` (CheckpointHook, earlier in the list, ran first)."""

        on_start = on_phase_start = on_forward = on_loss_and_meter = on_backward = ClassyHook._noop
        on_update = on_phase_end = on_end = ClassyHook._noop

        def on_step(self, task: Any) -> None:
            if task.train and task.iteration == INTERRUPT_AFTER:
                raise Interrupted(f"interrupted after iteration {task.iteration}")

    original = vissl.hooks.default_hook_generator
    vissl.hooks.default_hook_generator = lambda config: [*original(config), Interrupt()]
    try:
        yield
    finally:
        vissl.hooks.default_hook_generator = original


def interrupted_then_rerun(root: Path, name: str) -> dict[str, Any]:
    """Each side: run A (interrupted), then run B on the same folder."""
    import vissl_train_runs

    runs = {}
    for side, run in (("vissl", vissl_train_runs.run_vissl), ("lightning", vissl_train_runs.run_lightning)):
        out = root / name / side
        try:
            with interrupted():
                run(name, out, extra=EXTRA)
        except Interrupted:
            pass
        else:
            raise AssertionError(f"{name} on {side}: run A was not interrupted")
        interrupted_files = sorted(p.name for p in out.glob("*.torch"))
        vissl_train_runs.collect(out)  # flushes run A's stdout.json, as its process's exit would
        runs[side] = {**run(name, out, extra=EXTRA), "interrupted_files": interrupted_files}
    return runs


def child_main(out: str) -> None:
    torch.set_num_threads(1)
    sys.path.insert(0, str(HERE))
    import real_torchvision

    real_torchvision.activate()
    import vissl_train_runs

    vissl_train_runs.track_log_hooks()
    root = Path(out)
    results: dict[str, Any] = {}
    for name in NAMES:
        try:
            results[name] = interrupted_then_rerun(root, name)
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
    torch.save(results, root / "results.pt")
