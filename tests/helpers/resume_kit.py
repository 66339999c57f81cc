"""A run of ``lightning-hooks train`` stopped at an arbitrary iteration and resumed with ``--resume``, against
``tools/train.py --resume`` (``Runner.from_cfg(cfg).train()``) resumed from the same checkpoint, for
tests/families/mmengine/test_resume_corpus.py.

The run stops from a hook: :class:`StopRunHook` raises :class:`StopRun` in ``after_train_iter`` of iteration ``k``,
after ``CheckpointHook`` (``priority="LOWEST"``) saved ``iter_k.pth`` there (the derived configs save by iteration);
or, in :func:`killed_then_resumed`, each host's process gets SIGKILL once ``iter_k.pth`` is written. Each host stops and resumes in its own work dir, from its own checkpoint: MMEngine's ``MessageHub`` skips the
adapter's loadable (tensor) layout of the log buffers, so the Runner resuming from a Lightning-written file would
start its smoothing windows empty. :func:`first_difference` compares what both wrote, the stopped checkpoint
included, and names the quantity and the first iteration where they part.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import Runner
from mmengine.visualization import Visualizer

STAMP = re.compile(r"\d{8}_\d{6}")
#: wall-clock fields of the logs and scalars
TIMING = ("time", "data_time", "eta", "memory")
_TIMING_TEXT = re.compile(r"\s+(?:eta|time|data_time|memory):\s+(?:-?\d+ days?, )?\S+")  # eta: "-1 day, 23:59:59"
#: the log lines both hosts write from the resumed training (the Runner's banner, environment and config dump, which
#: ``lightning-hooks train`` writes its own way, are not compared)
_LOG_LINE = re.compile(r"Auto resumed from|Load checkpoint from|resumed epoch|Advance dataloader|Saving checkpoint|"
                       r"\((?:train|val)\)|Exp name|Checkpoints will be saved")  # fmt: skip


#: the iteration :class:`StopRunHook` stops a subprocess's run after (the processes of a multi-process run)
STOP_ENV = "RESUME_KIT_STOP_AFTER"
#: set in a subprocess's environment: its ``Config.pretty_text`` is :func:`pretty_text_once` (this module imported
#: by the config's ``custom_imports``)
FORMAT_ONCE_ENV = "RESUME_KIT_FORMAT_CONFIG_ONCE"


#: the top-level keys that tell the runs of one config apart: the work dir (each host's), ``--resume``
_RUN_KEYS = ("work_dir", "resume", "load_from")


def pretty_text_once() -> property:
    """``Config.pretty_text`` formatted once per config content, the values of :data:`_RUN_KEYS` aside. Both hosts
    format the config at each checkpoint, log and dump (yapf: most of a small run's time); the text is a function of
    the config's content, which the memo keys on. A top-level ``key='value'`` of a string, bool or None is a statement
    of its own that yapf cannot split whatever the value's length, so it is formatted once with a placeholder and the
    value put in after: the runs of one config (stopped and resumed, in each host's work dir) share one formatting,
    and what either host writes is unchanged."""
    texts: dict[str, str] = {}
    formatted = _PRETTY_TEXT.fget
    assert formatted is not None

    def pretty_text(cfg: Config) -> str:
        items = cfg._cfg_dict
        run = {k: items[k] for k in _RUN_KEYS if isinstance(items.get(k, ()), (str, bool, type(None)))}
        key = repr([(k, f"@@{k}@@" if k in run else v) for k, v in items.items()])
        if key not in texts:
            try:
                items.update({k: f"@@{k}@@" for k in run})
                texts[key] = formatted(cfg)
            finally:
                items.update(run)
        text = texts[key]
        for k, v in run.items():
            text = text.replace(f"'@@{k}@@'", repr(v))  # as pretty_text writes a string (repr), a bool or None (str)
        return text

    return property(pretty_text)


_PRETTY_TEXT: property = Config.pretty_text  # type: ignore[assignment]
if os.environ.get(FORMAT_ONCE_ENV):
    Config.pretty_text = pretty_text_once()  # type: ignore[method-assign]


class StopRun(RuntimeError):
    """The interruption :class:`StopRunHook` raises."""


@HOOKS.register_module(force=True)
class StopRunHook(Hook):
    """Raises :class:`StopRun` after iteration ``StopRunHook.after`` (1-based; in a process of its own,
    :data:`STOP_ENV`) once every other hook ran on it (``CheckpointHook`` saved it), as a run killed there; inert
    while neither is set (the resumed runs)."""

    priority = "LOWEST"
    after: int | None = None

    def after_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        after = StopRunHook.after if StopRunHook.after is not None else int(os.environ.get(STOP_ENV) or 0) or None
        if after is not None and runner.iter + 1 == after:
            raise StopRun(f"stopped after iteration {after}")


@HOOKS.register_module(force=True)
class RankLossHook(Hook):
    """Appends each train iteration's outputs (the loss terms this rank's ``train_step`` returned) as a JSON line
    ``{"iter": N, "loss": ..., ...}`` to ``{work_dir}/losses_rank{R}.jsonl``, R this process's rank: what each
    process of a multi-process run computed, where ``scalars.json`` holds rank 0's. Where the run has an
    ``EMAHook``, the row's ``"ema"`` is a digest of this rank's EMA weights after the iteration's update (rank 0 alone
    saves them in checkpoints)."""

    priority = "LOW"  # after EMAHook's update (priority 49 in mmpose's configs, NORMAL by default)
    _ema: Any = None

    def after_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        from mmengine.dist import get_rank

        row = {"iter": runner.iter + 1, **{k: float(v) for k, v in (outputs or {}).items()}}
        ema = self._ema_hook()
        if ema is not None:
            row["ema"] = _digest(ema.ema_model.state_dict())
        with open(os.path.join(runner.work_dir, f"losses_rank{get_rank()}.jsonl"), "a") as file:
            file.write(json.dumps(row) + "\n")

    def _ema_hook(self) -> Any:
        """This process's ``EMAHook`` (one run a process; neither host's runner hands its hook list to the hooks
        alike), found once among the live objects; None without one."""
        if self._ema is None:
            from mmengine.hooks import EMAHook

            self._ema = next((o for o in gc.get_objects() if isinstance(o, EMAHook)), False)
        return self._ema or None


def _digest(state: dict[str, torch.Tensor]) -> str:
    """A digest of a state dict's names and tensor bytes: equal for bitwise equal states."""
    digest = hashlib.sha256()
    for name, tensor in state.items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


#: the iteration :class:`HoldHook` holds a subprocess's run before (the runs :func:`killed_then_resumed` kills)
HOLD_ENV = "RESUME_KIT_HOLD_BEFORE"


@HOOKS.register_module(force=True)
class HoldHook(Hook):
    """Holds the run before iteration :data:`HOLD_ENV` (1-based) until its process is killed, so that a kill sent
    once an earlier checkpoint is written lands before the next checkpoint and the run's end; inert without it."""

    def before_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None) -> None:
        hold = int(os.environ.get(HOLD_ENV) or 0)
        if hold and runner.iter + 1 == hold:
            threading.Event().wait()  # until SIGKILL


def rank_losses(work_dir: Path, rank: int) -> list[dict[str, Any]]:
    """The rows :class:`RankLossHook` wrote for ``rank`` under ``work_dir``."""
    path = work_dir / f"losses_rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def run_runner(config: Path, work_dir: Path, *options: str) -> None:
    """``tools/train.py CONFIG --work-dir DIR [--resume]`` in this process, with a visualizer of its own (mmseg's and
    mmdet's configs name theirs "visualizer"; the Runner would take an earlier run's instance of that name)."""
    from lightning_hooks.families.mmengine.train import load_config, parser

    cfg = load_config(parser().parse_args([str(config), "--work-dir", str(work_dir), *options]))
    _drop_instance(cfg.visualizer.get("name"))
    Runner.from_cfg(cfg).train()


def run_lightning(config: Path, work_dir: Path, *options: str) -> None:
    """``lightning-hooks train CONFIG --work-dir DIR [--resume]`` in this process."""
    from lightning_hooks import train as dispatcher

    _drop_instance(Config.fromfile(str(config)).visualizer.get("name"))
    dispatcher.main([str(config), "--work-dir", str(work_dir), *options])


def _drop_instance(name: str | None) -> None:
    stack = [Visualizer]
    while stack:
        cls = stack.pop()
        cls._instance_dict.pop(name, None)
        stack += cls.__subclasses__()


def stopped_then_resumed(config: Path, root: Path, stop_after: int) -> tuple[Path, Path]:
    """Each host trains ``config`` in its own work dir until :class:`StopRunHook` stops it after ``stop_after``
    iterations, then resumes it there (``--resume``: the work dir's last checkpoint, ``iter_{stop_after}.pth``), as a
    user resumes a killed run. Returns the Runner's and Lightning's work dirs."""
    sides = root / "runner", root / "lightning"
    for side, run in zip(sides, (run_runner, run_lightning)):
        StopRunHook.after = stop_after
        try:
            run(config, side)
        except StopRun:
            pass
        else:
            raise AssertionError(f"{config.name}: the run did not reach iteration {stop_after}")
        finally:
            StopRunHook.after = None
        assert (side / f"iter_{stop_after}.pth").is_file(), sorted(os.listdir(side))
        past_last_stamp(side)
        run(config, side, "--resume")
    return sides


def killed_then_resumed(config: Path, root: Path, checkpoint: int, hold: int) -> tuple[Path, Path]:
    """``tools/train.py CONFIG`` and ``lightning-hooks train CONFIG``, each a process of its own in its own work dir
    (both at once), killed with SIGKILL once the work dir's ``last_checkpoint`` names ``iter_{checkpoint}.pth`` (the
    hook writes it after the file): the kill lands in whatever iteration between ``checkpoint`` and ``hold`` the
    process is in (:class:`HoldHook` stops it before ``hold``); then each host resumes its work dir in this process
    (``--resume``). ``config`` imports this module (``custom_imports``). Returns the Runner's and Lightning's work
    dirs."""
    from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env

    sides = root / "runner", root / "lightning"
    commands = ([sys.executable, str(HELPERS / "runner_train.py"), str(config), str(sides[0])],
                [sys.executable, "-m", "lightning_hooks", "train", str(config), "--work-dir", str(sides[1])])
    # a launcher's variables left in this process by an earlier test would make runner_train.py a torchrun rank
    env = subprocess_env(HELPERS, drop=("LIGHTNING_HOOKS_MMENGINE_SEED", *DDP_LAUNCH_VARIABLES), OMP_NUM_THREADS="1",
                         **{HOLD_ENV: str(hold)})  # fmt: skip  # keywords aligned under the call
    root.mkdir(parents=True, exist_ok=True)
    logs = [root / f"{side.name}.stderr" for side in sides]
    procs = []
    try:
        for command, log in zip(commands, logs, strict=True):
            with log.open("w") as stderr:
                procs.append(subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=stderr))
        for side, proc, log in zip(sides, procs, logs, strict=True):
            _wait_for_checkpoint(side, f"iter_{checkpoint}.pth", proc, log)
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(60) == -signal.SIGKILL, f"{side.name}: exited with {proc.returncode} before the kill"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for side, run in zip(sides, (run_runner, run_lightning), strict=True):
        past_last_stamp(side)
        run(config, side, "--resume")
    return sides


def past_last_stamp(work_dir: Path) -> None:
    """Waits until the clock's ``{timestamp}`` is past that of the work dir's last run (no wait once its second is
    over), so that the next run's folder is its own, as a user's later run gets one."""
    last = run_dirs(work_dir)[-1].name
    while time.strftime("%Y%m%d_%H%M%S") <= last:
        time.sleep(1 - time.time() % 1)


def _wait_for_checkpoint(work_dir: Path, name: str, proc: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    """Polls ``work_dir/last_checkpoint`` until it names ``name``; fails when ``proc`` ends first (with its stderr)."""
    deadline = time.monotonic() + timeout
    marker = work_dir / "last_checkpoint"
    while not (marker.is_file() and marker.read_text().endswith(os.sep + name)):
        if proc.poll() is not None:
            raise AssertionError(f"{work_dir.name}: exited with {proc.returncode} before {name}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{work_dir.name}: no {name} after {timeout} s:\n{log.read_text()[-4000:]}")
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------------ comparing
def run_dirs(work_dir: Path) -> list[Path]:
    """The ``{timestamp}`` folder of each run in ``work_dir``, oldest first: the stopped (fresh) run's, then the
    resumed run's."""
    return [work_dir / d for d in sorted(os.listdir(work_dir)) if STAMP.fullmatch(d)]


def resumed_dir(work_dir: Path) -> Path:
    """The resumed run's ``{timestamp}`` folder: the latest (the stopped run's is copied along)."""
    return run_dirs(work_dir)[-1]


def scalars(work_dir: Path, run: int = -1) -> list[dict[str, Any]]:
    """The ``vis_data/scalars.json`` rows of the work dir's ``run``-th run (:func:`run_dirs`; the resumed run by
    default) without wall-clock values."""
    path = run_dirs(work_dir)[run] / "vis_data" / "scalars.json"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def log_lines(work_dir: Path, run: int = -1) -> list[str]:
    """The log lines of training (:data:`_LOG_LINE`) of the work dir's ``run``-th run (the resumed run by default),
    without time stamps, wall-clock fields and work-dir paths."""
    stamp = run_dirs(work_dir)[run]
    text = (stamp / f"{stamp.name}.log").read_text()
    lines = [line.split(" - ", 2)[-1] for line in text.splitlines() if _LOG_LINE.search(line)]
    return [STAMP.sub("STAMP", _TIMING_TEXT.sub("", line).replace(str(work_dir), "WORK_DIR")) for line in lines]


def listing(work_dir: Path) -> list[str]:
    """Every file under ``work_dir``, time stamps replaced."""
    return sorted(STAMP.sub("STAMP", str(p.relative_to(work_dir))) for p in work_dir.rglob("*") if p.is_file())


def _iteration(rows: list[dict[str, Any]], i: int) -> str:
    """Where ``rows[i]`` was logged: a train row's iteration; a validation row (no ``iter``; its ``step`` is the epoch
    of an epoch-based run) as the validation after the last train row's iteration before it."""
    if "iter" in rows[i]:
        return f"iteration {rows[i]['iter']}"
    done = next((row["iter"] for row in reversed(rows[:i]) if "iter" in row), None)
    after = f"after iteration {done}" if done is not None else "before the run's first iteration"
    return f"the validation {after} (step {rows[i].get('step', '?')})"


def first_difference(name: str, runner: Path, lightning: Path, checkpoints: Iterable[str], every_run: bool = True) -> str | None:
    """None when both hosts' runs agree; else the first difference, as ``"<config>: <run>: <quantity> parts at
    <iteration>: Runner <value>, Lightning <value>"``. Compared: for each run in the work dirs (``every_run``: the
    stopped fresh run's first iterations and the resumed run; else the resumed run only) the scalars of every
    iteration (loss, lr, metrics) and the log lines; then the work-dir files, and for each checkpoint file named in
    ``checkpoints`` its weights, EMA weights, optimizer and scheduler state, ``meta`` counters and message hub."""
    count = len(run_dirs(runner))
    if every_run and len(run_dirs(lightning)) != count:
        return f"{name}: {count} runs under the Runner, {len(run_dirs(lightning))} under Lightning"
    for run in range(count) if every_run else [count - 1]:
        found = _run_difference(runner, lightning, run)
        if found:
            return f"{name}: {'the last run' if run == count - 1 else f'run {run + 1} of {count}'}: {found}"
    if listing(runner) != listing(lightning):
        return f"{name}: work-dir files differ: Runner {listing(runner)}, Lightning {listing(lightning)}"
    for checkpoint in checkpoints:
        found = _checkpoint_difference(runner / checkpoint, lightning / checkpoint)
        if found:
            return f"{name}: {checkpoint}: {found}"
    return None


def _run_difference(runner: Path, lightning: Path, run: int) -> str | None:
    """The first scalar or log line where the ``run``-th runs of both work dirs part."""
    theirs, ours = scalars(runner, run), scalars(lightning, run)
    for i, (a, b) in enumerate(zip(theirs, ours)):
        for key in sorted(a.keys() | b.keys()):
            if a.get(key) != b.get(key):
                return f"scalar {key!r} parts at {_iteration(theirs, i)} (row {i}): Runner {a.get(key)!r}, Lightning {b.get(key)!r}"
    if len(theirs) != len(ours):
        return f"scalars.json has {len(theirs)} rows under the Runner, {len(ours)} under Lightning"
    a_lines, b_lines = log_lines(runner, run), log_lines(lightning, run)
    for i, (a, b) in enumerate(zip(a_lines, b_lines)):
        if a != b:
            return f"log line {i} differs: Runner {a!r}, Lightning {b!r}"
    if len(a_lines) != len(b_lines):
        extra = a_lines[len(b_lines):] or b_lines[len(a_lines):]
        return f"log has {len(a_lines)} lines under the Runner, {len(b_lines)} under Lightning (extra: {extra})"
    return None


def _checkpoint_difference(expected: Path, actual: Path) -> str | None:
    theirs = torch.load(expected, map_location="cpu", weights_only=False)
    ours = torch.load(actual, map_location="cpu", weights_only=False)
    for key in ("epoch", "iter"):
        if ours["meta"].get(key) != theirs["meta"].get(key):
            return f"meta[{key!r}]: Runner {theirs['meta'].get(key)}, Lightning {ours['meta'].get(key)}"
    for entry in ("state_dict", "ema_state_dict"):
        if (entry in theirs) != (entry in ours):
            return f"{entry!r} only in {'the Runner' if entry in theirs else 'Lightning'}'s checkpoint"
        found = _tensors_difference(theirs.get(entry, {}), ours.get(entry, {}))
        if found:
            return f"{entry} {found}"
    optimizer = theirs.get("optimizer", {}), ours.get("optimizer", {})
    if optimizer[0].keys() != optimizer[1].keys():
        return f"optimizer keys: Runner {sorted(optimizer[0])}, Lightning {sorted(optimizer[1])}"
    for i, state in optimizer[0].get("state", {}).items():
        found = _tensors_difference(state, optimizer[1]["state"].get(i, {}))
        if found:
            return f"optimizer state of parameter {i}: {found}"
    for key in optimizer[0]:
        if key != "state" and _plain(optimizer[0][key]) != _plain(optimizer[1][key]):
            return f"optimizer {key!r}: Runner {optimizer[0][key]!r}, Lightning {optimizer[1][key]!r}"
    if theirs.get("param_schedulers") != ours.get("param_schedulers"):
        return f"param_schedulers: Runner {theirs.get('param_schedulers')}, Lightning {ours.get('param_schedulers')}"
    hub = _hub(theirs["message_hub"], expected.parent), _hub(ours["message_hub"], actual.parent)
    for key in sorted(hub[0].keys() | hub[1].keys()):
        if _plain(hub[0].get(key)) != _plain(hub[1].get(key)):
            return f"message_hub {key!r}: Runner {hub[0].get(key)!r}, Lightning {hub[1].get(key)!r}"
    return None


def _tensors_difference(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    if expected.keys() != actual.keys():
        return f"keys: only the Runner's {sorted(expected.keys() - actual.keys())}, only Lightning's {sorted(actual.keys() - expected.keys())}"
    for key, value in expected.items():
        if not torch.equal(torch.as_tensor(actual[key]), torch.as_tensor(value)):
            return f"{key!r} differs (max abs difference {(torch.as_tensor(actual[key]).double() - torch.as_tensor(value).double()).abs().max().item():.3g})"
    return None


def _hub(state: dict[str, Any], work_dir: Path) -> dict[str, Any]:
    """A message hub state's runtime info (``work_dir`` and time stamps replaced) and each scalar buffer's history,
    either layout (the Runner's pickled ``HistoryBuffer`` or the adapter's tensors)."""
    out = {f"runtime_info.{k}": STAMP.sub("STAMP", v.replace(str(work_dir), "WORK_DIR")) if isinstance(v, str) else v
           for k, v in state.get("runtime_info", {}).items() if k not in (*TIMING, "cfg")}
    for key, buf in state.get("log_scalars", {}).items():
        if key.split("/")[-1] in TIMING:
            continue
        history = buf["log_history"] if isinstance(buf, dict) else buf._log_history
        out[f"log_scalars.{key}"] = [float(x) for x in history]
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, (torch.Tensor, np.ndarray)):  # numpy: mmpose's dataset_meta in the message hub
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value

