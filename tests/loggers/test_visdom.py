"""VisdomLogger against a real visdom server process on 127.0.0.1 (see tests/helpers/visdom_server.py)."""

from __future__ import annotations

import time
import warnings
from typing import Any, Optional

import lightning as L
import pytest
import torch
import visdom
from torch.utils.data import DataLoader, TensorDataset
from visdom_server import VisdomServer, free_port, visdom_server

from lightning_hooks.loggers import VisdomLogger
from lightning_hooks.loggers.visdom import HPARAMS_WINDOW, _VisdomClient


class RecordingVisdomLogger(VisdomLogger):
    """Records what Lightning asked to log, to compare with what the server holds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[dict[str, float], Optional[int]]] = []

    def log_metrics(self, metrics: dict[str, float], step: Optional[int] = None) -> None:
        self.calls.append((dict(metrics), step))
        super().log_metrics(metrics, step)

    def expected_points(self, key: str, first_call: int = 0) -> list[tuple[float, float]]:
        return [(float(step), float(m[key])) for m, step in self.calls[first_call:] if key in m]


class LoggingModule(L.LightningModule):
    def __init__(self, lr: float = 0.05, hidden: int = 3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        self.log("batch_idx", float(batch_idx))
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    def train_dataloader(self) -> DataLoader:
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g))
        return DataLoader(data, batch_size=4)


def fit(logger: VisdomLogger, tmp_path: Any, steps: int, callbacks: Optional[list] = None) -> L.Trainer:
    trainer = L.Trainer(
        max_steps=steps,
        log_every_n_steps=1,
        logger=logger,
        callbacks=callbacks or [],
        accelerator="cpu",
        devices=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(LoggingModule())
    return trainer


def visdom_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if "VisdomLogger" in str(w.message)]


class ServerAt(L.Callback):
    """Runs ``action(server)`` after the given training batches."""

    def __init__(self, server: VisdomServer, actions: dict[int, str], logger: RecordingVisdomLogger) -> None:
        self.server, self.actions, self.logger = server, actions, logger
        self.restarted_at_call: Optional[int] = None

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        action = self.actions.get(trainer.global_step)
        if action == "stop":
            self.server.stop()
        elif action == "start":
            self.server.start()
            self.restarted_at_call = len(self.logger.calls)


def test_metrics_and_hparams_reach_server(tmp_path):
    with visdom_server(tmp_path) as server:
        logger = RecordingVisdomLogger(env="run1", server=server.url, port=server.port)
        assert logger.name == "run1" and logger.version is None
        assert isinstance(logger.experiment, visdom.Visdom)

        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            trainer = fit(logger, tmp_path, steps=6)
        assert visdom_warnings(record) == []
        assert trainer.global_step == 6

        # Every logged (step, value) is on the server, in order, one window per metric.
        assert len(logger.calls) == 6
        for key in ("train_loss", "batch_idx"):
            points = server.line_points("run1", key)
            assert points == logger.expected_points(key)  # JSON round-trips float64 exactly
            assert server.window("run1", key)["title"] == key
        assert [y for _, y in server.line_points("run1", "batch_idx")] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        steps = [x for x, _ in server.line_points("run1", "train_loss")]
        assert steps == sorted(steps) and len(set(steps)) == 6

        table = server.text("run1", HPARAMS_WINDOW)
        assert "<td>lr</td><td>0.05</td>" in table and "<td>hidden</td><td>3</td>" in table

        # finalize() (called by Trainer at the end of fit) made the server persist the env.
        saved = server.saved_env("run1")
        assert saved is not None and {"train_loss", "batch_idx", HPARAMS_WINDOW} <= set(saved["jsons"])


def test_server_down_at_start_warns_once_and_training_completes(tmp_path):
    port = free_port()  # nothing listens there
    logger = RecordingVisdomLogger(env="down", server="http://127.0.0.1", port=port)
    logger.reconnect_interval = 0.0  # re-probe on every call: still a single warning
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trainer = fit(logger, tmp_path, steps=8)
    assert trainer.global_step == 8
    assert len(logger.calls) == 8
    messages = visdom_warnings(record)
    assert len(messages) == 1, messages
    assert f"127.0.0.1:{port}" in messages[0]
    assert time.monotonic() - start < 20


def test_server_killed_mid_run_and_restarted(tmp_path):
    with visdom_server(tmp_path) as server:
        logger = RecordingVisdomLogger(env="crash", server=server.url, port=server.port)
        logger.reconnect_interval = 0.0
        callback = ServerAt(server, {3: "stop", 6: "start"}, logger)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            trainer = fit(logger, tmp_path, steps=10, callbacks=[callback])
        assert trainer.global_step == 10
        assert len(visdom_warnings(record)) == 1, visdom_warnings(record)

        # The restarted server has a fresh state (nothing was saved before the crash): it holds
        # exactly the points logged after the restart, and the hparams table was re-sent.
        after = callback.restarted_at_call
        assert after is not None and 0 < len(logger.calls) - after < 10
        for key in ("train_loss", "batch_idx"):
            expected = logger.expected_points(key, first_call=after)
            assert expected and server.line_points("crash", key) == expected
        assert "<td>lr</td>" in server.text("crash", HPARAMS_WINDOW)


def test_reconnect_is_rate_limited(tmp_path, monkeypatch):
    posts: list[str] = []
    original = _VisdomClient._handle_post

    def counting_post(self: _VisdomClient, url: str, data: Any = None) -> str:
        posts.append(url)
        return original(self, url, data)

    monkeypatch.setattr(_VisdomClient, "_handle_post", counting_post)
    logger = VisdomLogger(env="x", server="http://127.0.0.1", port=free_port())  # server down
    logger.reconnect_interval = 3600.0
    with pytest.warns(UserWarning, match="VisdomLogger"):
        for step in range(50):
            logger.log_metrics({"loss": 1.0}, step=step)
    assert len(posts) == 1  # the constructor's request; no retry within the interval
    logger.reconnect_interval = 0.0  # takes effect at once: interval counts from the last attempt
    logger.log_metrics({"loss": 1.0}, step=50)
    assert len(posts) == 2  # one probe once the interval has passed

    # ...and once a server answers on that port, the next call reconnects and plots.
    with visdom_server(tmp_path, port=logger._port) as server:
        logger.log_metrics({"loss": 2.5}, step=51)
        assert server.line_points("x", "loss") == [(51.0, 2.5)]


def test_http_error_answer_warns_once_per_window_and_keeps_plotting(tmp_path):
    with visdom_server(tmp_path) as server:
        logger = VisdomLogger(env="clash", server=server.url, port=server.port)
        logger.log_metrics({"loss": 1.0}, step=0)
        logger.experiment.text("notes", win="notes_text", env="clash")  # a text window, as a hparams table is
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            for step in (1, 2, 3):  # the server answers 500 to a line point appended to a text window
                logger.log_metrics({"notes_text": 0.5, "loss": float(step)}, step=step)
        messages = visdom_warnings(record)
        assert len(messages) == 1 and "'notes_text'" in messages[0] and "HTTP 500" in messages[0], messages
        assert logger._connected
        assert server.line_points("clash", "loss") == [(0.0, 1.0), (1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]


def test_metric_named_hparams_does_not_collide_with_the_hyperparameter_table(tmp_path):
    with visdom_server(tmp_path) as server:
        logger = VisdomLogger(env="hp", server=server.url, port=server.port)
        logger.log_hyperparams({"lr": 0.1})
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            logger.log_metrics({"hparams": 2.0, "loss": 1.0}, step=0)
        assert visdom_warnings(record) == []
        assert server.line_points("hp", "hparams") == [(0.0, 2.0)] and server.line_points("hp", "loss") == [(0.0, 1.0)]
        assert "<td>lr</td><td>0.1</td>" in server.text("hp", HPARAMS_WINDOW)
