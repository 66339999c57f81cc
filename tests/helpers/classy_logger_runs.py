"""``lightning-hooks train TASK.json`` with and without ``--logger csv --logger tensorboard`` and ``--trainer.KEY``
on Classy's shrunk, narrow ResNet-50 config (subprocess side, with the real torchvision; classy_train_runs.py's config
and recorder; one run with TensorboardPlotHook logs every step: ``--log_freq 1``). Saves, per run, the points each logger stored, the checkpoint folder's files and final weights, the
Trainer options the fit ran with, and the errors of options the config decides. The logged run keeps
classy_train.py's TensorboardPlotHook; its event files and those of ``classy_train.py`` itself (the reference, run in
its own working directory) are read back too. VISSL's SimCLR config likewise, the logged run and VISSL's launcher with
``SSLTensorboardHook`` (and its activation statistics) on; and the errors of options the VISSL config decides."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent


def _run(root: Path, name: str, flags: list[str], tensorboard: bool = False) -> dict[str, Any]:
    """``lightning-hooks train`` in ``root/name`` (its working directory: classy_train.py's ``output_<time>/``)."""
    from classy_train_runs import resnet_config
    from tracker_stores import csv_points, tensorboard_points

    from lightning_hooks.core.lightning_api import pl
    from lightning_hooks.families.classy.train import classy_main as main

    out = root / name
    config = resnet_config(out, narrow=True)
    seen: dict[str, Any] = {}
    fit = pl.Trainer.fit

    def record(trainer: Any, *args: Any, **kwargs: Any) -> Any:
        seen.update(log_every_n_steps=trainer.log_every_n_steps,
                    callbacks=[type(cb).__name__ for cb in trainer.callbacks],
                    max_time=getattr(next((cb for cb in trainer.callbacks if type(cb).__name__ == "Timer"), None),
                                     "_duration", None))  # fmt: skip
        result = fit(trainer, *args, **kwargs)
        seen["monitored"] = sorted(trainer.callback_metrics)  # what EarlyStopping / ModelCheckpoint could monitor
        return result

    pl.Trainer.fit = record
    try:
        with _cwd(out):
            main([str(config), "--checkpoint_folder", str(out / "ckpt"), "--log_freq", "2", "--accelerator", "cpu",
                  *([] if tensorboard else ["--skip_tensorboard"]), *flags])  # fmt: skip
    finally:
        pl.Trainer.fit = fit
    ckpt = out / "ckpt"
    state = torch.load(ckpt / "checkpoint.torch", weights_only=False)["classy_state_dict"]
    return dict(
        csv=[csv_points(p) for p in sorted(ckpt.glob("lightning_logs/version_*/metrics.csv"))],
        tensorboard=[tensorboard_points(p) for p in sorted(ckpt.glob("tensorboard/version_*"))],
        files=sorted(p.name for p in ckpt.iterdir()),
        weights=state["base_model"], losses=state["losses"], trainer=seen, hook=_hook_points(out),
        hook_rest=[_hook_rest(p) for p in sorted(out.glob("output_*/tensorboard"))],
    )


def _classy_reference(root: Path) -> dict[str, Any]:
    """``classy_train.py`` itself (its ``main``, its parser) on the same config and flags, TensorboardPlotHook on:
    its event files' points."""
    from classy_train_runs import CLASSY_TRAIN, resnet_config
    from classy_vision.generic.opts import check_generic_args, get_parser

    out = root / "classy"
    config = resnet_config(out, narrow=True)
    script = shutil.copy(CLASSY_TRAIN, out / "classy_train.py")  # its output_<time>/ is next to it, as in a project
    spec = importlib.util.spec_from_file_location("classy_train", script)
    classy_train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(classy_train)
    args = check_generic_args(get_parser().parse_args(["--config_file", str(config), "--checkpoint_folder",
                                                       str(out / "ckpt"), "--log_freq", "2"]))  # fmt: skip
    classy_train.main(args, json.loads(config.read_text()))
    return {"hook": _hook_points(out), "hook_rest": [_hook_rest(p) for p in sorted(out.glob("output_*/tensorboard"))]}


def _hook_points(out: Path) -> list[Any]:
    """The points of the event files TensorboardPlotHook wrote under ``out/output_<time>/tensorboard`` (none with
    --skip_tensorboard)."""
    from tracker_stores import tensorboard_points

    return [tensorboard_points(p) for p in sorted(out.glob("output_*/tensorboard"))]


def _hook_rest(folder: Path) -> dict[str, Any]:
    """What else a hook's event files hold: each histogram as ``(step, tag, count, sum)``, and the text tags."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"histograms": 0, "tensors": 0})
    events.Reload()
    tags = events.Tags()
    histograms = sorted((e.step, tag, e.histogram_value.num, e.histogram_value.sum) for tag in tags["histograms"]
                        for e in events.Histograms(tag))  # fmt: skip
    return {"histograms": histograms, "text": sorted(tags["tensors"])}


@contextlib.contextmanager
def _cwd(folder: Path) -> Any:
    folder.mkdir(parents=True, exist_ok=True)
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def child_main(out: str) -> None:
    torch.set_num_threads(1)
    sys.path.insert(0, str(HERE))
    import real_torchvision

    real_torchvision.activate()
    import classy_vision.dataset.classy_dataset as classy_dataset
    from classy_train_runs import register

    classy_dataset.DEFAULT_NUM_WORKERS = 0
    register()
    root = Path(out)
    results: dict[str, Any] = {}
    logged = ["--logger", "csv", "--logger", "tensorboard", "--trainer.max_time", "00:01:00:00",
              "--trainer.callbacks+=LambdaCallback"]  # fmt: skip
    for name, run in (("plain", lambda: _run(root, "plain", [])),
                      ("logged", lambda: _run(root, "logged", logged, tensorboard=True)),
                      ("every_step", lambda: _run(root, "every_step", ["--log_freq", "1", *logged[:4]], tensorboard=True)),
                      ("classy", lambda: _classy_reference(root))):  # fmt: skip
        try:
            results[name] = run()
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
    errors = {}
    for flags in (["--trainer.max_epochs", "9"], ["--trainer.enable_checkpointing", "true"],
                  ["--trainer.log_every_n_steps", "5"], ["--trainer.logger", "false", "--logger", "csv"],
                  ["--trainer.gradient_clip_val", "0.5"]):  # fmt: skip
        try:
            _run(root, f"error{len(errors)}", flags)
            errors[" ".join(flags)] = None
        except Exception as err:  # noqa: BLE001
            errors[" ".join(flags)] = f"{type(err).__name__}: {err}"
    results["errors"] = errors
    results.update(_vissl(root))
    torch.save(results, root / "results.pt")


#: SSLTensorboardHook on (VISSL's default_hook_generator adds it), with its activation statistics every 2 iterations
VISSL_TENSORBOARD = ["config.HOOKS.TENSORBOARD_SETUP.USE_TENSORBOARD=true", "config.MONITORING.MONITOR_ACTIVATION_STATISTICS=2"]


def _vissl(root: Path) -> dict[str, Any]:
    """VISSL's SimCLR integration-test config (vissl_train_runs.py's small, narrow one) without and with the loggers: what
    each run wrote (stdout.json, metrics.json, checkpoints, the default CSV) and what the loggers stored; the logged
    run and VISSL's launcher (the reference) with SSLTensorboardHook on, its event files' points (``tb_logs``)."""
    from tracker_stores import csv_points, tensorboard_points
    from vissl_train_runs import run_lightning, run_vissl, track_log_hooks

    track_log_hooks()
    results: dict[str, Any] = {}
    runs = (("vissl_plain", lambda out: run_lightning("simclr", out)),
            ("vissl_logged", lambda out: run_lightning("simclr", out, ["--logger", "csv", "--logger", "tensorboard"],
                                                       VISSL_TENSORBOARD)),
            ("vissl_reference", lambda out: run_vissl("simclr", out, VISSL_TENSORBOARD)))  # fmt: skip
    for name, train in runs:
        out = root / name
        try:
            run = train(out)
            run["hook"] = [tensorboard_points(p) for p in sorted(out.glob("tb_logs"))]
            run["hook_rest"] = [_hook_rest(p) for p in sorted(out.glob("tb_logs"))]
            run["points"] = {kind: [csv_points(p) for p in sorted(out.glob("lightning_logs/version_*/metrics.csv"))]
                             if kind == "csv" else [tensorboard_points(p) for p in sorted(out.glob("tensorboard/version_*"))]
                             for kind in ("csv", "tensorboard")}  # fmt: skip
            run["all_files"] = sorted(p.name for p in out.iterdir())
            results[name] = run
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
    results["vissl_errors"] = _vissl_errors(root)
    return results


def _vissl_errors(root: Path) -> dict[str, str | None]:
    """The error of each ``--trainer.KEY`` the VISSL config decides (refused before training), by its flags."""
    from vissl_train_runs import overrides

    from lightning_hooks.families.classy.train import vissl_main

    errors: dict[str, str | None] = {}
    for flags, extra in ((["--trainer.gradient_clip_val", "0.5"], ["config.MODEL.GRAD_CLIP.USE_GRAD_CLIP=true"]),
                         (["--trainer.accelerator", "gpu"], [])):  # fmt: skip  # one (flags, overrides) pair per line
        try:
            vissl_main([*overrides("simclr", root / "vissl_error", extra), *flags])
            errors[" ".join(flags)] = None
        except Exception as err:  # noqa: BLE001
            errors[" ".join(flags)] = f"{type(err).__name__}: {err}"
    return errors
