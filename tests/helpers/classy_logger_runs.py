"""``lightning-hooks train TASK.json`` with and without ``--logger csv --logger tensorboard`` and ``--trainer.KEY``
on Classy's shrunk ResNet-50 config (subprocess side, with the real torchvision; classy_train_runs.py's config and
recorder). Saves, per run, the points each logger stored, the checkpoint folder's files and final weights, the
Trainer options the fit ran with, and the errors of options the config decides."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent


def _run(root: Path, name: str, flags: list[str]) -> dict[str, Any]:
    from classy_train_runs import resnet_config
    from tracker_stores import csv_points, tensorboard_points

    from lightning_hooks.core.lightning_api import pl
    from lightning_hooks.families.classy.train import classy_main as main

    out = root / name
    config = resnet_config(out)
    seen: dict[str, Any] = {}
    fit = pl.Trainer.fit

    def record(trainer: Any, *args: Any, **kwargs: Any) -> Any:
        seen.update(log_every_n_steps=trainer.log_every_n_steps,
                    callbacks=[type(cb).__name__ for cb in trainer.callbacks],
                    max_time=getattr(next((cb for cb in trainer.callbacks if type(cb).__name__ == "Timer"), None),
                                     "_duration", None))  # fmt: skip
        return fit(trainer, *args, **kwargs)

    pl.Trainer.fit = record
    try:
        main([str(config), "--checkpoint_folder", str(out / "ckpt"), "--skip_tensorboard", "--log_freq", "2",
              "--accelerator", "cpu", *flags])  # fmt: skip
    finally:
        pl.Trainer.fit = fit
    ckpt = out / "ckpt"
    state = torch.load(ckpt / "checkpoint.torch", weights_only=False)["classy_state_dict"]
    return dict(
        csv=[csv_points(p) for p in sorted(ckpt.glob("lightning_logs/version_*/metrics.csv"))],
        tensorboard=[tensorboard_points(p) for p in sorted(ckpt.glob("tensorboard/version_*"))],
        files=sorted(p.name for p in ckpt.iterdir()),
        weights=state["base_model"], losses=state["losses"], trainer=seen,
    )


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
    for name, flags in (("plain", []), ("logged", ["--logger", "csv", "--logger", "tensorboard",
                                                   "--trainer.max_time", "00:01:00:00", "--trainer.callbacks+=LambdaCallback"])):  # fmt: skip
        try:
            results[name] = _run(root, name, flags)
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


def _vissl(root: Path) -> dict[str, Any]:
    """VISSL's SimCLR integration-test config (vissl_train_runs.py's small one) without and with the loggers: what
    each run wrote (stdout.json, metrics.json, checkpoints, the default CSV) and what the loggers stored."""
    from tracker_stores import csv_points, tensorboard_points
    from vissl_train_runs import run_lightning, track_log_hooks

    track_log_hooks()
    results: dict[str, Any] = {}
    for name, flags in (("vissl_plain", []), ("vissl_logged", ["--logger", "csv", "--logger", "tensorboard"])):
        out = root / name
        try:
            run = run_lightning("simclr", out, flags)
            run["points"] = {kind: [csv_points(p) for p in sorted(out.glob("lightning_logs/version_*/metrics.csv"))]
                             if kind == "csv" else [tensorboard_points(p) for p in sorted(out.glob("tensorboard/version_*"))]
                             for kind in ("csv", "tensorboard")}  # fmt: skip
            run["all_files"] = sorted(p.name for p in out.iterdir())
            results[name] = run
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
    return results
