"""Read back what Lightning's loggers stored on local stores, as ``(step, name, value)`` points: a ``CSVLogger``'s
``metrics.csv``, a ``TensorBoardLogger``'s event files (TensorBoard's ``EventAccumulator``), an ``MLFlowLogger``'s
``file:`` store (``MlflowClient``) and a ``WandbLogger``'s offline run file (its protobuf records). Tests compare
these points with the legacy hosts' own logs (``lightning-hooks train --logger ...``)."""

from __future__ import annotations

import csv
import json
import struct
import time
from pathlib import Path
from typing import Any

Point = tuple[int, str, float]


def local_stores(tmp_path: Path, monkeypatch: Any) -> None:
    """wandb offline and silent with every folder it writes under ``tmp_path``; no tracking server configured."""
    for name in ("DATA", "CACHE", "CONFIG", "ARTIFACT"):
        monkeypatch.setenv(f"WANDB_{name}_DIR", str(tmp_path / f"wandb-{name.lower()}"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow releases after 3.12 refuse file: stores without it


def csv_points(path: Path) -> list[Point]:
    """Every value of a ``metrics.csv`` with its ``step``."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return sorted((int(row["step"]), name, float(value)) for row in rows for name, value in row.items()
                  if value != "" and name != "step")  # fmt: skip


def tensorboard_points(folder: Path) -> list[Point]:
    """Every scalar of the event files in ``folder``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(folder))
    accumulator.Reload()
    return sorted((event.step, tag, float(event.value)) for tag in accumulator.Tags()["scalars"]
                  for event in accumulator.Scalars(tag))  # fmt: skip


def mlflow_points(store: Path, experiment: str) -> list[Point]:
    """Every metric history of the experiment's one run in the ``file:`` store ``store``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store.as_uri())
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"{store}: no experiment {experiment!r}"
    (run,) = client.search_runs([found.experiment_id])
    return sorted((m.step, key, m.value) for key in run.data.metrics
                  for m in client.get_metric_history(run.info.run_id, key))  # fmt: skip


def wandb_points(save_dir: Path, step_key: str = "trainer/global_step") -> list[Point]:
    """Every number of the history rows of the one offline run under ``save_dir/wandb``, at the row's ``step_key``
    (``WandbLogger`` puts the step it was given there)."""
    (run_file,) = (save_dir / "wandb").glob("offline-run-*/run-*.wandb")
    points = []
    for record in finished_records(run_file):
        if record.WhichOneof("record_type") != "history":
            continue
        row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        step = int(row.pop(step_key))
        points += [(step, k, float(v)) for k, v in row.items() if not k.startswith("_") and isinstance(v, (int, float))]
    return sorted(points)


def wandb_records(path: Path) -> list[Any]:
    """The protobuf records of an offline run file: a 7-byte header, then LevelDB-style log blocks of 32 KiB whose
    chunks (crc32c, length, type: 1 full, 2 first, 3 middle, 4 last; 0 padding) carry ``Record`` bytes."""
    from wandb.proto import wandb_internal_pb2

    data, block, records, pending, pos = path.read_bytes(), 32768, [], b"", 7
    assert data[:4] == b":W&B", f"{path} is not a wandb run file"
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or kind == 0:
            pos += left
            continue
        if pos + 7 + length > len(data):  # a chunk still being written
            break
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            records.append(wandb_internal_pb2.Record.FromString(pending))
            pending = b""
    return records


def finished_records(run_file: Path, timeout: float = 60.0) -> list[Any]:
    """The run file's records once wandb's service wrote the exit record (``wandb.finish`` can return before)."""
    deadline = time.monotonic() + timeout
    while True:
        records = wandb_records(run_file)
        if any(record.WhichOneof("record_type") == "exit" for record in records):
            return records
        assert time.monotonic() < deadline, f"{run_file}: no exit record after {timeout} s"
        time.sleep(0.1)
