"""mmcv's WandbLoggerHook and MlflowLoggerHook under MMCVAdapter against mmcv's own runner (issue #25), with the real
libraries on local stores: wandb in offline mode (its run file, ``run-<id>.wandb``, read back record by record) and
MLflow on a ``file:`` tracking URI (read back with ``MlflowClient``). Each host writes its own store; the test compares
what the stores hold: the history (keys, values, steps), metric definitions, the artifact's files and digests, the
run's params and tags, the metric histories and the logged model's files and weights."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from mmcv_testkit import TIMESTAMP, assert_same_weights, mmcv_runner, run_lightning, run_mmcv, weights

from lightning_hooks import MMCVAdapter

R = mmcv_runner
#: wandb's history entries that differ between any two runs (wall-clock times)
VOLATILE = ("_timestamp", "_runtime")


@pytest.fixture(autouse=True)
def local_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """wandb offline and silent, every directory it writes under ``tmp_path``; MLflow's file store allowed."""
    for name in ("DATA", "CACHE", "CONFIG", "ARTIFACT"):
        monkeypatch.setenv(f"WANDB_{name}_DIR", str(tmp_path / f"wandb-{name.lower()}"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")  # what each host prints is not the hook's: no output.log
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-default"))
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses file: stores without it


def _hooks(kind: str, store: Path) -> list:
    lr = R.StepLrUpdaterHook(step=[1])
    text = R.TextLoggerHook(interval=2)
    if kind == "wandb":
        service = R.WandbLoggerHook(init_kwargs=dict(project="demo", dir=str(store), config=dict(lr=0.1)),
                                    interval=2, commit=False, with_step=True, log_artifact=True,
                                    define_metric_cfg={"val/loss": "min"})  # fmt: skip
    elif kind == "wandb-no-step":
        service = R.WandbLoggerHook(init_kwargs=dict(project="demo", dir=str(store)), interval=3, with_step=False,
                                    log_artifact=False)  # fmt: skip
    else:
        service = R.MlflowLoggerHook(exp_name="demo", tags=dict(team="a"), params=dict(lr=0.1), interval=2,
                                     log_model=True)  # fmt: skip
    for hook in (text, service):
        hook.priority = "VERY_LOW"
    return [lr, R.OptimizerHook(), text, service]


def _run(kind: str, host: str, tmp_path: Path) -> tuple[Path, Any]:
    """One host's run of the hooks; returns the service's store (outside the work dir, whose ``*.log`` files
    WandbLoggerHook uploads) and the trained model. MLflow's tracking URI is given back afterwards: MLflow exports it as
    ``MLFLOW_TRACKING_URI``, which a later test's subprocesses would inherit (test_write_audit_mmcv.py's MLflow store,
    written into this test's removed folder, failed it when both ran in one process)."""
    store = tmp_path / f"{host}-store"
    store.mkdir(parents=True)
    if kind == "mlflow":
        import mlflow

        before = os.environ.get("MLFLOW_TRACKING_URI")
        mlflow.set_tracking_uri(store.as_uri())
    try:
        if host == "mmcv":
            model = run_mmcv(_hooks(kind, store), tmp_path / host, max_epochs=2, val=True).model
        else:
            adapter = MMCVAdapter(_hooks(kind, store), runner=dict(type="EpochBasedRunner", max_epochs=2),
                                  work_dir=tmp_path / host)  # fmt: skip
            model = run_lightning(adapter, tmp_path / host, val=True).lightning_module.model
    finally:
        if kind == "mlflow":
            mlflow.end_run()  # mmcv's hook leaves its run open (MLflow ends it at exit): one run per host here
            mlflow.set_tracking_uri(before)  # None unsets the URI and the variable
    return store, model


# -- wandb: the offline run file -------------------------------------------------------------------------------


def wandb_records(path: Path) -> list[Any]:
    """The protobuf records of an offline run file: a 7-byte header, then LevelDB-style log blocks of 32 KiB whose
    chunks (crc32c, length, type: 1 full, 2 first, 3 middle, 4 last) carry ``wandb_internal_pb2.Record`` bytes."""
    from wandb.proto import wandb_internal_pb2

    data, block, records, pending = path.read_bytes(), 32768, [], b""
    assert data[:4] == b":W&B", f"{path} is not a wandb run file"
    pos = 7
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if pos + 7 + length > len(data):  # a chunk still being written
            break
        if kind == 0:  # zero padding up to the block's end
            pos += left
            continue
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def _finished(run_file: Path, timeout: float = 60.0) -> list[Any]:
    """The run file's records once wandb's service wrote the exit record (``wandb.finish`` can return before)."""
    deadline = time.monotonic() + timeout
    while True:
        records = wandb_records(run_file)
        if any(record.WhichOneof("record_type") == "exit" for record in records):
            return records
        assert time.monotonic() < deadline, f"{run_file}: no exit record after {timeout} s"
        time.sleep(0.1)


def _items(items: Any) -> dict[str, Any]:
    return {item.key or "/".join(item.nested_key): item.value_json for item in items}


def wandb_run(store: Path) -> dict[str, Any]:
    """What the offline run stored: history rows, metric definitions, config, artifacts and the run's files."""
    (run_dir,) = (store / "wandb").glob("offline-run-*")
    (run_file,) = run_dir.glob("run-*.wandb")
    found: dict[str, Any] = dict(history=[], metrics=[], config={}, artifacts=[], exit=None)
    for record in _finished(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            row = {k: v for k, v in _items(record.history.item).items() if k not in VOLATILE}
            found["history"].append((int(row["_step"]), row))
        elif kind == "metric":
            found["metrics"].append((record.metric.name, str(record.metric.summary).strip()))
        elif kind == "run":
            found["project"] = record.run.project
            found["config"] = {k: v for k, v in _items(record.run.config.update).items() if k != "_wandb"}
        elif kind == "artifact":
            files = sorted((c.path, c.digest) for c in record.artifact.manifest.contents)
            found["artifacts"].append((record.artifact.name, record.artifact.type, files))
        elif kind == "exit":
            found["exit"] = record.exit.exit_code
    found["files"] = sorted(p.name for p in (run_dir / "files").iterdir())
    return found


@pytest.mark.parametrize("kind", ["wandb", "wandb-no-step"])
def test_wandb_logger_hook_stores_the_offline_run_mmcvs_runner_stores(kind, tmp_path):
    pytest.importorskip("wandb", reason="wandb is installed in .venv-mmcv1 by scripts/setup.sh test")
    real = wandb_run(_run(kind, "mmcv", tmp_path)[0])
    mine = wandb_run(_run(kind, "lightning", tmp_path)[0])
    assert mine == real
    steps = [step for step, _ in real["history"]]
    assert len(steps) >= 4 and real["exit"] == 0
    if kind == "wandb":  # steps are mmcv's iteration numbers; the artifact is the json log
        assert steps == [2, 4, 6, 7, 9, 11]
        assert real["metrics"] == [("val/loss", "min: true")]
        assert real["config"] == {"lr": "0.1"}
        ((name, type_, files),) = real["artifacts"]
        assert (name, type_, [path for path, _ in files]) == ("artifacts", "model", [f"{TIMESTAMP}.log.json"])
    else:  # wandb's own steps, mmcv's in global_step
        assert steps == list(range(len(steps)))
        assert all("global_step" in row for _, row in real["history"]) and not real["artifacts"]


# -- MLflow: the file store ------------------------------------------------------------------------------------


def mlflow_run(store: Path) -> dict[str, Any]:
    """What the file store holds: the experiment's one run (params, tags, metric histories) and its logged model's
    files and weights."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store.as_uri())
    experiment = client.get_experiment_by_name("demo")
    (run,) = client.search_runs([experiment.experiment_id])
    history = {
        key: [(m.step, round(m.value, 6)) for m in client.get_metric_history(run.info.run_id, key)]
        for key in sorted(run.data.metrics)
    }
    (model_dir,) = (store / experiment.experiment_id / "models").glob("*/artifacts")
    files = sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*") if p.is_file())
    weights = torch.load(model_dir / "data" / "model.pth", weights_only=False).state_dict()
    tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}
    return dict(params=run.data.params, tags=tags, history=history, model_files=files, weights=weights)


def test_mlflow_logger_hook_stores_the_run_mmcvs_runner_stores(tmp_path):
    pytest.importorskip("mlflow.pytorch", reason="mlflow-skinny is installed in .venv-mmcv1 by scripts/setup.sh test")
    store, real_model = _run("mlflow", "mmcv", tmp_path)
    real = mlflow_run(store)
    mine = mlflow_run(_run("mlflow", "lightning", tmp_path)[0])
    assert_same_weights(real["weights"], weights(real_model))  # the model as trained, logged after the run
    assert_same_weights(mine.pop("weights"), real.pop("weights"))
    assert mine == real
    assert real["params"] == {"lr": "0.1"} and real["tags"] == {"team": "a"}
    assert set(real["history"]) == {"learning_rate", "momentum", "val/loss"}
    for history in real["history"].values():
        assert [step for step, _ in history] == [2, 4, 6, 7, 9, 11]
    assert {"MLmodel", "data/model.pth"} <= set(real["model_files"])
