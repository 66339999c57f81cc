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

In two processes (:func:`killed_then_rerun_two_processes`), each side's run A runs as the command a user runs
(vissl_cli.py: VISSL's launcher with ``NUM_PROC_PER_NODE=2``, ``lightning-hooks train --devices 2``), and its process
group gets SIGKILL once ``checkpoint.torch`` links ``model_iteration4.torch`` (every process holds after iteration 5
until then); run B is the same command again (VISSL's launcher called in this process, which spawns both ranks:
vissl_train_runs.launch_vissl).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: the configs resumed (vissl_train_runs.CONFIGS), the checkpoint period and the iteration after which run A dies
NAMES = ("swav", "dino", "cpu_resnet_simclr", "cpu_regnet_moco")
ITER_FREQUENCY, INTERRUPT_AFTER = 2, 5
#: VISSL resumes inside a phase only with its stateful sampler (without it, its own rerun trains the whole phase again
#: and stops at ``where=1.0``); a third phase shows the one after the resumed phase starting at its first batch.
EXTRA = [f"config.CHECKPOINT.CHECKPOINT_ITER_FREQUENCY={ITER_FREQUENCY}",
         "config.DATA.TRAIN.USE_STATEFUL_DISTRIBUTED_SAMPLER=true", "config.OPTIMIZER.num_epochs=3"]  # fmt: skip
#: DINO loads its data with a loader worker on both sides, as VISSL's shipped configs do (NUM_DATALOADER_WORKERS > 0,
#: VISSL's forkserver): each train phase's worker takes its indices when the phase's iterator is made, so the rerun's
#: iterator must come after the stateful sampler's skip and seed the worker from torch's generator as VISSL's does
WORKERS = {"dino": ["config.DATA.NUM_DATALOADER_WORKERS=1"]}


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

    runs, extra = {}, [*EXTRA, *WORKERS.get(name, [])]
    for side, run in (("vissl", vissl_train_runs.run_vissl), ("lightning", vissl_train_runs.run_lightning)):
        out = root / name / side
        try:
            with interrupted():
                run(name, out, extra=extra)
        except Interrupted:
            pass
        else:
            raise AssertionError(f"{name} on {side}: run A was not interrupted")
        interrupted_files = sorted(p.name for p in out.glob("*.torch"))
        vissl_train_runs.collect(out)  # flushes run A's stdout.json, as its process's exit would
        runs[side] = {**run(name, out, extra=extra), "interrupted_files": interrupted_files}
        vissl_train_runs.drop_checkpoints(out)  # read (digests) by run B's collect
    return runs


#: the config run in two processes, 8 samples an iteration (3 iterations a phase, as in one process); SwAV's
#: prototypes frozen for 6 iterations, so that the rerun (from iteration 4) starts frozen and unfreezes them
TWO_PROCESSES_NAME = "swav"
TWO_PROCESSES = ["config.DATA.TRAIN.DATA_LIMIT=24",
                 "config.MODEL.TEMP_FROZEN_PARAMS_ITER_MAP=[[module.heads.0.prototypes0.weight, 6]]"]  # fmt: skip


def killed_then_rerun_two_processes(root: Path, name: str = TWO_PROCESSES_NAME) -> dict[str, Any]:
    """Each side in two processes, killed (SIGKILL to its process group) once ``model_iteration4.torch`` is written
    and linked, before iteration 6; then the same command on the same folder. Per side: what :func:`collect` reads,
    each rank's rows (vissl_cli.RankRecorder) and the files the killed run left."""
    import vissl_cli
    import vissl_train_runs

    runs = {}
    for side, world in (("vissl", ["config.DISTRIBUTED.NUM_PROC_PER_NODE=2"]), ("lightning", ["--devices", "2"])):
        out = root / f"{name}_two_processes" / side
        out.mkdir(parents=True)
        command = [sys.executable, str(HERE / "vissl_cli.py"), side,
                   *vissl_train_runs.overrides(name, out, [*EXTRA, *TWO_PROCESSES]), *world]  # fmt: skip
        env = {**vissl_train_runs.fresh_shell(), "OMP_NUM_THREADS": "1"}
        log = out.parent / f"{side}_killed.stderr"
        with log.open("w") as stderr:
            proc = subprocess.Popen(command, env={**env, vissl_cli.HOLD_ENV: str(INTERRUPT_AFTER)}, stderr=stderr,
                                    stdout=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            _wait_for_link(out / "checkpoint.torch", f"model_iteration{2 * ITER_FREQUENCY}.torch", proc, log)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        killed_files = sorted(p.name for p in out.glob("*.torch"))
        if side == "vissl":  # VISSL's launcher spawning both ranks, from this process (vissl_train_runs.launch_vissl)
            vissl_train_runs.launch_vissl(command[3:])
        else:
            rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
            if rerun.returncode:
                raise RuntimeError(f"{side}: the rerun exited with {rerun.returncode}:\n{rerun.stderr[-6000:]}")
        ranks = {r: [json.loads(line) for line in (out / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}
        runs[side] = {**vissl_train_runs.collect(out), "ranks": ranks, "interrupted_files": killed_files}
        vissl_train_runs.drop_checkpoints(out)
    return runs


def _wait_for_link(link: Path, target: str, proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    """Polls until ``link`` points to ``target``; fails when ``proc`` ends first (with its stderr)."""
    deadline = time.monotonic() + timeout
    while not (link.is_symlink() and os.readlink(link).endswith(target)):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{link.parent}: no {target} (exit code {proc.poll()}):\n{log.read_text()[-6000:]}")
        time.sleep(0.1)


def child_main(out: str) -> None:
    sys.path.insert(0, str(HERE))
    from vissl_train_runs import prepare_child, run_scenarios, start_forkserver

    prepare_child()
    start_forkserver()  # DINO's loader workers (WORKERS)
    root = Path(out)
    scenarios = {name: (lambda name=name: interrupted_then_rerun(root, name)) for name in NAMES}
    run_scenarios(root, {**scenarios, "two_processes": lambda: killed_then_rerun_two_processes(root)})
