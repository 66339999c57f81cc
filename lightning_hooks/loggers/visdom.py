"""A Lightning logger that plots metrics and hyperparameters on a visdom server."""

from __future__ import annotations

import functools
import html
import logging
import time
import warnings
from argparse import Namespace
from collections.abc import Callable
from typing import Any

import numpy as np
import requests
import visdom
from typing_extensions import override

from lightning_hooks.core.lightning_api import Logger, flat_hyperparams, rank_zero_experiment, rank_zero_only

log = logging.getLogger(__name__)

__all__ = ["VisdomLogger"]

# Seconds an HTTP request to the visdom server may take (connect, read) before the server is
# treated as down. A refused connection fails at once; these only bound a hung or unreachable
# server. The reconnect probe is a trivial request, so it gets a shorter budget: while such a
# server stays unreachable, training loses at most ~1 s per `reconnect_interval`.
_HTTP_TIMEOUT_S = 5.0
_PROBE_TIMEOUT_S = 1.0

HPARAMS_WINDOW = "lightning_hooks:hparams"
"""Window id of the hyperparameter table, reserved so that it does not collide with a metric's window (keyed by
the metric name, e.g. a metric named ``hparams``)."""


class VisdomHTTPError(Exception):
    """The visdom server answered a request with an HTTP error status: it is up, but rejected this update.

    Not a ``requests.RequestException``, so that ``visdom.Visdom`` does not turn it into its "Error connecting"
    ``ConnectionError``.
    """


class _VisdomClient(visdom.Visdom):
    """``visdom.Visdom`` that fails fast and loudly instead of blocking or printing.

    * every request has a timeout and HTTP error statuses raise :class:`VisdomHTTPError` (the
      stock client has no timeout and returns the text of a 500 as if it were a result);
    * ``raise_exceptions=True``: connection failures raise the builtin ``ConnectionError``;
    * no incoming websocket (no background thread, no 5 s wait in the constructor);
    * a server that is down in the constructor does not raise: the object is usable and
      ``connect_error`` holds the error.
    """

    session: requests.Session  # set by visdom.Visdom.__init__; visdom's stubs omit it

    def __init__(self, server: str, port: int, env: str) -> None:
        self.connect_error: Exception | None = None
        self.timeout = _HTTP_TIMEOUT_S
        # The constructor logs "Without the incoming socket you cannot receive events..." and
        # "Setting up a new session..." as warnings; both are expected here.
        visdom_log = logging.getLogger("visdom")
        level = visdom_log.level
        visdom_log.setLevel(logging.ERROR)
        try:
            super().__init__(server=server, port=port, env=env, raise_exceptions=True, use_incoming_socket=False)
        except ConnectionError as err:
            self.connect_error = err
        finally:
            visdom_log.setLevel(level)

    def _handle_post(self, url: str, data: Any = None) -> str:
        response = self.session.post(url, data={} if data is None else data, timeout=self.timeout)
        if response.status_code >= 400:
            raise VisdomHTTPError(f"HTTP {response.status_code} {response.reason}")
        return response.text


class VisdomLogger(Logger):
    """Plot Lightning metrics and hyperparameters on a `visdom <https://github.com/fossasia/visdom>`_ server.

    Each metric name gets its own line window (window id = metric name, x = ``step``, or the
    number of earlier :meth:`log_metrics` calls if ``step`` is None); every
    :meth:`log_metrics` call appends one point per metric. :meth:`log_hyperparams` writes a
    table to the text window ``"lightning_hooks:hparams"`` (replaced on every call). Everything goes to the
    visdom environment ``env``; only rank 0 talks to the server.

    Server outages never stop training. The client talks HTTP only (no websocket thread) with
    request timeouts. If the server is down when the logger starts, or goes away mid-run, the
    logger emits **one** ``UserWarning`` for the outage (Python's default warning filter shows
    a repeat from the same code line only once per process; visdom itself may also print one
    "Error connecting to Visdom server!" line) and drops the points logged while it is down.
    A later log call probes the server again, at most once every :attr:`reconnect_interval`
    seconds (time-based, not per call); once it answers, the hyperparameter table is re-sent
    and plotting resumes with that call. A refused connection costs nothing; a *hung* server
    can stall the call that discovers the outage for up to 2 x 5 s, and each later probe for
    up to 1 s.

    A server that answers with an HTTP error status (e.g. 500 for a line update of a window
    that is not a line plot) is up: the logger warns once per window, naming it, keeps the
    connection and keeps plotting the other metrics.

    :meth:`save` is a no-op (every call is sent immediately, nothing is buffered).
    :meth:`finalize` asks the server to write ``env`` to its ``-env_path`` so the plots
    survive a server restart.

    Args:
        env: visdom environment to plot into.
        server: server URL (scheme and host), as for ``visdom.Visdom``.
        port: server port.

    Example (needs a visdom server on localhost:8097: ``python -m visdom.server``, or offline,
    where that command fails fetching web assets,
    ``python -c "from visdom.server.run_server import main; main()"``)::

        import lightning as L
        from lightning.pytorch.demos.boring_classes import BoringModel
        from lightning_hooks.loggers import VisdomLogger

        class Model(BoringModel):
            def training_step(self, batch, batch_idx):
                out = super().training_step(batch, batch_idx)
                self.log("train_loss", out["loss"])
                return out

        logger = VisdomLogger(env="my_run", server="http://localhost", port=8097)
        trainer = L.Trainer(max_steps=20, log_every_n_steps=1, logger=logger,
                            enable_checkpointing=False, enable_progress_bar=False)
        trainer.fit(Model())  # window "train_loss" in env "my_run", x = global step
        print(logger.experiment.get_window_data("train_loss", "my_run"))  # the plot's JSON
    """

    reconnect_interval: float = 10.0
    """Minimum seconds between two attempts to reach a server that is down (class attribute;
    override it on an instance to change it)."""

    def __init__(self, env: str = "main", server: str = "http://localhost", port: int = 8097) -> None:
        super().__init__()
        self._env = env
        self._server = server
        self._port = port
        self._client: _VisdomClient | None = None
        self._connected = False
        self._warned = False  # a warning was emitted for the current outage
        self._rejected: set[str] = set()  # windows (and envs) whose update the server answered with an HTTP error
        self._last_attempt = 0.0  # time.monotonic() of the last failed request
        self._hparams_html: str | None = None
        self._num_log_calls = 0  # x value when Lightning passes no step

    def __getstate__(self) -> dict[str, Any]:
        # The client (requests session) is not sent along when the logger is pickled, e.g. to
        # spawned DDP workers; it is recreated on first use.
        state = self.__dict__.copy()
        state.update(_client=None, _connected=False, _warned=False, _last_attempt=0.0)
        return state

    @property
    @override
    def name(self) -> str:
        """The visdom environment."""
        return self._env

    @property
    @override
    def version(self) -> None:
        """Visdom has no notion of run versions; the environment identifies the run."""
        return None

    @property
    @rank_zero_experiment
    def experiment(self) -> visdom.Visdom:
        """The ``visdom.Visdom`` client (created on first access; usable even if the server is down)."""
        if self._client is None:
            self._client = _VisdomClient(self._server, self._port, self._env)
            if self._client.connect_error is None:
                self._connected = True
            else:
                self._mark_down(self._client.connect_error)
        return self._client

    @override
    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        params = flat_hyperparams(params)
        rows = "".join(
            f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>" for k, v in params.items()
        )
        self._hparams_html = f"<table><tr><th>hyperparameter</th><th>value</th></tr>{rows}</table>"
        if self._ensure_connected():
            self._call(self._send_hparams, f"window {HPARAMS_WINDOW!r}")

    @override
    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        x = np.array([self._num_log_calls if step is None else step], dtype=np.float64)
        self._num_log_calls += 1
        points = []
        for key, value in metrics.items():
            try:
                points.append((key, float(value)))
            except (TypeError, ValueError):
                log.debug("VisdomLogger: skipping non-numeric metric %r=%r", key, value)
        if not points or not self._ensure_connected():
            return
        client = self.experiment
        for key, value in points:
            line = functools.partial(client.line, Y=np.array([value]), X=x, win=key, env=self._env, update="append",
                                     opts={"title": key, "xlabel": "step", "ylabel": key})  # fmt: skip  # arguments aligned under the call
            if not self._call(line, f"window {key!r}"):
                return  # the server is down: the rest of this call's points are dropped too

    @override
    @rank_zero_only
    def save(self) -> None:
        """Nothing to do: points are sent as they are logged."""

    @override
    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._client is None or not self._ensure_connected():
            return
        client = self._client
        self._call(lambda: client.save([self._env]), f"env {self._env!r}")

    # -- connection handling --------------------------------------------------------------

    def _send_hparams(self) -> None:
        if self._hparams_html is not None:
            self.experiment.text(
                self._hparams_html, win=HPARAMS_WINDOW, env=self._env, opts={"title": "hyperparameters"}
            )

    def _ensure_connected(self) -> bool:
        """True if the server is believed up; otherwise re-probe it if the retry interval has passed."""
        client = self.experiment
        if self._connected:
            return True
        if time.monotonic() - self._last_attempt < self.reconnect_interval:
            return False
        try:
            client.timeout = _PROBE_TIMEOUT_S
            try:
                client.get_env_list()  # cheap request; raises ConnectionError while the server is down
            finally:
                client.timeout = _HTTP_TIMEOUT_S
        except (ConnectionError, requests.RequestException, ValueError, VisdomHTTPError) as err:
            self._mark_down(err)
            return False
        self._connected = True
        if self._warned:
            log.info("VisdomLogger: visdom server %s:%s is reachable again", self._server, self._port)
        self._warned = False
        return self._call(self._send_hparams, f"window {HPARAMS_WINDOW!r}")  # it may have restarted without our state

    def _call(self, fn: Callable[[], object], what: str) -> bool:
        """Run one request updating ``what``; False if the server is down (an HTTP error answer leaves it up)."""
        try:
            fn()
        except VisdomHTTPError as err:
            if what not in self._rejected:
                self._rejected.add(what)
                warnings.warn(
                    f"VisdomLogger: the visdom server at {self._server}:{self._port} rejected the update of {what} "
                    f"({err}); this window may stay incomplete. The connection is kept and other windows "
                    f"are still plotted (a metric window is keyed by the metric's name: rename a metric that clashes).",
                    UserWarning,
                    stacklevel=3,
                )
        except (ConnectionError, requests.RequestException) as err:
            self._mark_down(err)
            return False
        return True

    def _mark_down(self, err: Exception) -> None:
        self._connected = False
        self._last_attempt = time.monotonic()
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"VisdomLogger: cannot reach the visdom server at {self._server}:{self._port} ({err}). "
                f"Training continues; points are dropped until it is back (retried at most every "
                f"{self.reconnect_interval:g} s).",
                UserWarning,
                stacklevel=2,
            )
