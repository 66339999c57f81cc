"""What the OpenMMLab 1.x train-command differentials share (tests/families/mmcv/test_train*.py, test_loggers.py):
the tiny derived config of mmcls's shipped CIFAR ResNet, the two runs of a comparison (``lightning-hooks train``, then
the library's own ``tools/train.py`` main in-process with the same timestamp and work dir), and the comparisons of
what the two leave: json log records, text log lines, checkpoints, weights, and the same for a resumed run.

Each test module keeps its library's reference (``reference(config, work_dir, timestamp, ...)``), whose logger is
:func:`reference_logger`: the one that script builds first thing in a fresh process.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mmcv_testkit import fresh_root_logger

#: the fields of a log record that are wall-clock readings
WALL_CLOCK = ("time", "data_time", "eta", "memory")


def shipped_cifar_resnet() -> Path:
    """mmcls 0.x's shipped ``resnet18_8xb16_cifar10.py``."""
    spec = importlib.util.find_spec("mmcls")
    assert spec is not None and spec.origin is not None, "mmcls 0.x lives in .venv-mmcv1"
    return Path(spec.origin).parent / ".mim" / "configs" / "resnet" / "resnet18_8xb16_cifar10.py"


def tiny_resnet_cifar(path: Path, *, samples_per_gpu: int = 4, imports: tuple[str, ...] = (), lines: str = "") -> Path:
    """Write, at ``path``, a config derived from :func:`shipped_cifar_resnet`: narrow (8 base channels), on
    ``TinyCIFAR`` (tests/helpers/mmcv_tiny_cifar.py, which the config imports, then ``imports``), 2 epochs, step LR,
    logging every iteration, evaluation each epoch; then ``lines`` (a key they assign replaces the one above)."""
    modules = ["mmcv_tiny_cifar", *imports]
    path.write_text(textwrap.dedent(f"""
        _base_ = [{str(shipped_cifar_resnet())!r}]
        custom_imports = dict(imports={modules!r})
        model = dict(backbone=dict(base_channels=8, stem_channels=8), head=dict(in_channels=64))
        data = dict(samples_per_gpu={samples_per_gpu}, workers_per_gpu=0, persistent_workers=False,
                    train=dict(type='TinyCIFAR'), val=dict(type='TinyCIFAR'), test=dict(type='TinyCIFAR'))
        runner = dict(max_epochs=2)
        log_config = dict(interval=1)
        lr_config = dict(policy='step', step=[1])
        evaluation = dict(interval=1, metric='accuracy')
    """) + textwrap.dedent(lines))
    return path


def reference_logger(library: str, log_file: Path, log_level: Any) -> Any:
    """The library's ``get_root_logger(log_file=..., log_level=...)`` for a reference run of its ``tools/train.py``
    main in this process, as that script builds it first thing in a fresh process: with its own handlers (mmcv's
    ``get_logger`` sets a logger up once per process) and the first of mmcv's initialised loggers, the one
    ``init_weights`` writes the parameters' initialisation to."""
    from mmcv.utils.logging import logger_initialized

    fresh_root_logger(library)
    get_root_logger = getattr(importlib.import_module(f"{library}.utils"), "get_root_logger")
    logger = get_root_logger(log_file=str(log_file), log_level=log_level)
    others = {name: value for name, value in logger_initialized.items() if name != library}
    logger_initialized.clear()
    logger_initialized.update({library: True, **others})
    return logger


def json_log(folder: Path) -> list[dict]:
    """The records of ``folder``'s json log without their wall-clock fields, ``folder``'s path written ``WORK``."""
    (path,) = folder.glob("*.log.json")
    records = [json.loads(line) for line in path.read_text().replace(str(folder), "WORK").splitlines()]
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in records]


def text_log(folder: Path, library: str, starts: tuple[str, ...] = ("Epoch", "Saving checkpoint", "Set random seed")) -> list[str]:
    """The lines of ``folder``'s text log that ``library``'s logger wrote and that start with one of ``starts``,
    without their time stamps and wall-clock fields."""
    (path,) = folder.glob("*.log")
    lines = [line.split(" - ", 3)[-1] for line in path.read_text().splitlines() if f" - {library} - " in line]
    return [re.sub(r"(eta|time|data_time): [^,]+, ", "", line) for line in lines if line.startswith(starts)]


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@dataclass
class Sides:
    """The two runs of a differential: their folders, the timestamp both used, the reference's trained model."""

    ours: Path
    ref: Path
    timestamp: str
    model: torch.nn.Module


def ours_then_reference(tmp_path: Path, ours: Callable[[Path], Any], reference: Callable[[Path, str], torch.nn.Module]) -> Sides:
    """``ours(work_dir)`` (the command), then ``reference(work_dir, timestamp)`` (the library's script) with the
    timestamp ours logged under, both in ``tmp_path/work`` (the config each logs and saves names it), each moved to
    ``tmp_path/ours`` / ``tmp_path/ref`` once done."""
    work_dir = tmp_path / "work"
    ours(work_dir)
    work_dir.rename(tmp_path / "ours")
    (log_json,) = (tmp_path / "ours").glob("*.log.json")
    timestamp = log_json.name[: -len(".log.json")]
    model = reference(work_dir, timestamp)
    work_dir.rename(tmp_path / "ref")
    return Sides(tmp_path / "ours", tmp_path / "ref", timestamp, model)


def checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint with its ``meta`` made comparable across work dirs: no save time, the config without its
    ``work_dir`` line, ``hook_msgs['last_ckpt']`` as a file name."""
    loaded = torch.load(path, map_location="cpu", weights_only=False)
    meta = loaded["meta"]
    meta["time"] = None
    if "config" in meta:
        meta["config"] = re.sub(r"(?m)^work_dir = .*$", "", meta["config"])
    if "last_ckpt" in meta.get("hook_msgs", {}):
        meta["hook_msgs"]["last_ckpt"] = os.path.basename(meta["hook_msgs"]["last_ckpt"])
    return loaded


def assert_same_weights(mine: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor], what: str) -> None:
    assert mine.keys() == theirs.keys(), what
    for key, value in theirs.items():
        assert torch.equal(mine[key], value), (what, key)


def assert_same_checkpoint(mine: Path, theirs: Path, *, meta: bool = True) -> None:
    """The same keys, ``meta`` (:func:`checkpoint`; with ``meta=False`` only its epoch and iteration), weights
    (bitwise) and optimizer state."""
    ours, ref = checkpoint(mine), checkpoint(theirs)
    assert sorted(ours) == sorted(ref), mine.name
    if meta:
        assert ours["meta"] == ref["meta"], mine.name
    else:
        assert (ours["meta"]["epoch"], ours["meta"]["iter"]) == (ref["meta"]["epoch"], ref["meta"]["iter"]), mine.name
    assert_same_weights(ours["state_dict"], ref["state_dict"], mine.name)
    assert str(ours["optimizer"]) == str(ref["optimizer"]), mine.name


def assert_final_weights(path: Path, model: torch.nn.Module) -> None:
    """The checkpoint's weights are ``model``'s (the reference's trained model), bitwise."""
    assert_same_weights(torch.load(path, map_location="cpu", weights_only=False)["state_dict"], model.state_dict(),
                        path.name)  # fmt: skip  # arguments aligned under the call


def resumed_lines(folder: Path, timestamp: str) -> list[str]:
    """The text log's lines that say where the run resumed, without their time stamps."""
    log = (folder / f"{timestamp}.log").read_text().splitlines()
    return [line.split(" - ")[-1] for line in log if "resumed" in line]


def assert_resumed_alike(sides: Sides, what: str, last: str, resumed: str, library: str | None = None) -> list[dict]:
    """A resumed run's two sides: the same files, json log records (each named in a failure), ``resumed`` as the
    only resume line of both, the last checkpoint ``last`` (:func:`assert_same_checkpoint`), whose weights are the
    reference's trained model; with ``library``, the same text log lines (:func:`text_log`). Returns our records."""
    assert listing(sides.ours) == listing(sides.ref)
    mine, theirs = json_log(sides.ours), json_log(sides.ref)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        assert a == b, f"{what}: json log record {i}: {a} != {b}"
    assert len(mine) == len(theirs), what
    assert resumed_lines(sides.ours, sides.timestamp) == resumed_lines(sides.ref, sides.timestamp) == [resumed]
    if library is not None:
        assert text_log(sides.ours, library) == text_log(sides.ref, library)
    assert_same_checkpoint(sides.ours / last, sides.ref / last)
    assert_final_weights(sides.ours / last, sides.model)
    return mine


def assert_auto_resumes_alike(stopped: Path, folder: Path, run: Callable[[Path], Any], expected: Path, *,
                              meta: bool = False) -> None:  # fmt: skip  # arguments aligned under the call
    """``run(folder)`` (the command with ``--auto-resume``) in a copy of the ``stopped`` run's work dir writes the
    checkpoint ``expected`` (the reference's, of the same name) again: :func:`assert_same_checkpoint`, the whole
    ``meta`` only with ``meta`` (the config records ``auto_resume``)."""
    shutil.copytree(stopped, folder, symlinks=True)
    run(folder)
    assert_same_checkpoint(folder / expected.name, expected, meta=meta)
