"""VISSL's linear-evaluation integration-test config (``quick_eval_in1k_linear``, vissl_train_runs.py's small
``meters`` one: a frozen ResNet-50 trunk, two linear heads, one ``accuracy_list_meter``) trained by VISSL's launcher
and by ``lightning-hooks train config=... --logger csv --logger tensorboard`` without SSLTensorboardHook (subprocess
side). Saved per run: stdout.json and metrics.json rows, the checkpoint files (as digests) and what each Lightning
logger stored, as ``(step, name, value)`` points."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent

#: the Lightning loggers the user asks for (no VISSL TensorBoard hook: the config leaves it off)
LOGGERS = ["--logger", "csv", "--logger", "tensorboard"]

#: the scenarios: extra overrides on the ``meters`` config (train phases only); LogLossLrEtaHook every 4 iterations
#: (and at 1 and every 5 up to 100)
SCENARIOS: dict[str, list[str]] = {"train_only": ["config.LOG_FREQUENCY=4"]}


def run(root: Path, name: str) -> dict[str, Any]:
    """Both sides on scenario ``name``; the Lightning run's logger points too."""
    from tracker_stores import csv_points, tensorboard_points
    from vissl_train_runs import run_lightning, run_vissl

    out = root / name
    vissl = run_vissl("meters", out / "vissl", SCENARIOS[name])
    lightning = run_lightning("meters", out / "lightning", LOGGERS, SCENARIOS[name])
    folder = out / "lightning"
    lightning["points"] = {
        "csv": [csv_points(p) for p in sorted(folder.glob("lightning_logs/version_*/metrics.csv"))],
        "tensorboard": [tensorboard_points(p) for p in sorted(folder.glob("tensorboard/version_*"))],
    }
    return {"vissl": vissl, "lightning": lightning}


def child_main(out: str) -> None:
    torch.set_num_threads(1)
    sys.path.insert(0, str(HERE))
    import real_torchvision
    from vissl_train_runs import drop_checkpoints, track_log_hooks

    real_torchvision.activate()
    track_log_hooks()
    root = Path(out)
    results: dict[str, Any] = {}
    for name in SCENARIOS:
        try:
            results[name] = run(root, name)
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
        drop_checkpoints(root / name)
    torch.save(results, root / "results.pt")
