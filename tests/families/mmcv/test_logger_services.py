"""mmcv's WandbLoggerHook and MlflowLoggerHook under MMCVAdapter against mmcv's own runner (issue #25): what each hook
sends to its service (keys, values, steps, commits, the run's start and end, the artifact's files, the logged model).

wandb and mlflow themselves are not installed in .venv-mmcv1 (with their dependencies they are some forty packages:
fastapi, uvicorn, cryptography, databricks-sdk, ...): each run gets a recording stand-in for the module, imported by
the hook as it imports the real one, and the two runs' records are compared."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import pytest
from mmcv_testkit import TIMESTAMP, mmcv_runner, run_lightning, run_mmcv

from lightning_hooks import MMCVAdapter

R = mmcv_runner


def _recorder(calls: list, name: str) -> Any:
    def record(*args: Any, **kwargs: Any) -> Any:
        calls.append((name, _plain(args), _plain(kwargs)))

    return record


def _plain(value: Any) -> Any:
    """Numbers rounded (float noise between runs is not what this test is about), paths by their file name."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, str) and os.sep in value:
        return os.path.basename(value)
    if type(value).__name__ == "Artifact":  # the stand-in's; its files are recorded as they are added
        return "Artifact"
    if hasattr(value, "state_dict"):
        return [type(value).__name__, {k: v.flatten().tolist()[:2] for k, v in value.state_dict().items()}]
    return value


def fake_wandb(calls: list) -> types.ModuleType:
    module = types.ModuleType("wandb")
    for name in ("init", "define_metric", "log", "log_artifact", "join"):
        setattr(module, name, _recorder(calls, f"wandb.{name}"))

    class Artifact:
        def __init__(self, **kwargs: Any) -> None:
            calls.append(("wandb.Artifact", [], _plain(kwargs)))

        def add_file(self, path: str) -> None:
            calls.append(("Artifact.add_file", [os.path.basename(path)], {}))

    module.Artifact = Artifact
    return module


def fake_mlflow(calls: list) -> tuple[types.ModuleType, types.ModuleType]:
    module = types.ModuleType("mlflow")
    for name in ("set_experiment", "set_tags", "log_params", "log_metrics"):
        setattr(module, name, _recorder(calls, f"mlflow.{name}"))
    pytorch = types.ModuleType("mlflow.pytorch")
    pytorch.log_model = _recorder(calls, "mlflow.pytorch.log_model")
    module.pytorch = pytorch
    return module, pytorch


def _hooks(kind: str) -> list:
    lr = R.StepLrUpdaterHook(step=[1])
    text = R.TextLoggerHook(interval=2)
    if kind == "wandb":
        service = R.WandbLoggerHook(init_kwargs=dict(project="demo"), interval=2, commit=False, with_step=True,
                                    log_artifact=True, define_metric_cfg=dict(**{"val/loss": "min"}))  # fmt: skip
    elif kind == "wandb-no-step":
        service = R.WandbLoggerHook(interval=3, with_step=False, log_artifact=False)
    else:
        service = R.MlflowLoggerHook(exp_name="demo", tags=dict(team="a"), params=dict(lr=0.1), interval=2,
                                     log_model=True)  # fmt: skip
    for hook in (text, service):
        hook.priority = "VERY_LOW"
    return [lr, R.OptimizerHook(), text, service]


def _record(kind: str, run: Any) -> list:
    calls: list = []
    if kind.startswith("wandb"):
        modules = {"wandb": fake_wandb(calls)}
    else:
        mlflow, pytorch = fake_mlflow(calls)
        modules = {"mlflow": mlflow, "mlflow.pytorch": pytorch}
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        run()
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return calls


@pytest.mark.parametrize("kind", ["wandb", "wandb-no-step", "mlflow"])
def test_service_logger_hooks_send_what_they_send_under_mmcvs_runner(kind, tmp_path):
    real = _record(kind, lambda: run_mmcv(_hooks(kind), tmp_path / "mmcv", max_epochs=2, val=True))

    def ours() -> None:
        adapter = MMCVAdapter(_hooks(kind), runner=dict(type="EpochBasedRunner", max_epochs=2),
                              work_dir=tmp_path / "lightning")  # fmt: skip
        adapter.runner.timestamp = TIMESTAMP
        run_lightning(adapter, tmp_path / "lightning", val=True)

    mine = _record(kind, ours)
    assert mine == real
    names = [name for name, *_ in real]
    assert names.count("wandb.log" if kind.startswith("wandb") else "mlflow.log_metrics") >= 4
    if kind == "wandb":
        assert ("Artifact.add_file", [f"{TIMESTAMP}.log.json"], {}) in real
    if kind == "mlflow":
        assert names[-1] == "mlflow.pytorch.log_model"
