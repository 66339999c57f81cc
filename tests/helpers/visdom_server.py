"""A real visdom server process on loopback, for tests.

Usage (from any test file, once ``tests/helpers`` is on ``sys.path``)::

    from visdom_server import visdom_server

    def test_something(tmp_path):
        with visdom_server(tmp_path) as server:
            host, port, proc = server          # unpacks like a tuple
            ...                                # point a client at http://{host}:{port}
            server.stop()                      # simulate a crash (SIGKILL)
            server.start()                     # same port, same env dir
            assert server.line_points("main", "loss") == [(1.0, 0.5), ...]

The server is started from ``visdom.server.run_server.main()`` in a subprocess, NOT via
``python -m visdom.server``: the ``__main__`` entry point first calls
``visdom.server.build.download_scripts()`` (fetches JS/CSS from unpkg/cdn.plot.ly, which fails
offline), while ``main()`` only parses argv and serves. The HTTP API used by the Python client
needs none of those assets. ``-bind_local`` makes it listen on 127.0.0.1 only; envs are stored
under ``<tmp_path>/visdom_env`` (only written when a client calls ``save`` / on server start for
``main``).
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

HOST = "127.0.0.1"
START_TIMEOUT_S = 20.0

_SERVER_CODE = (
    "import sys\n"
    "from visdom.server.run_server import main\n"
    "sys.argv = ['visdom'] + sys.argv[1:]\n"
    "main()\n"
)

# Never go through an HTTP proxy from the environment: only 127.0.0.1 is ever contacted.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class VisdomServer:
    """Handle on a visdom server subprocess (see the module docstring).

    Attributes: ``host`` (always ``"127.0.0.1"``), ``port``, ``url`` (``"http://127.0.0.1"``, the
    value for ``visdom.Visdom(server=...)``), ``env_path``, ``proc`` (current ``Popen`` or None),
    ``log_path`` (server stdout/stderr).
    """

    def __init__(self, tmp_path: Path, port: Optional[int] = None) -> None:
        self.host = HOST
        self.url = f"http://{HOST}"
        self.port = port if port is not None else free_port()
        self.env_path = Path(tmp_path) / "visdom_env"
        self.log_path = Path(tmp_path) / "visdom_server.log"
        self.proc: Optional[subprocess.Popen[bytes]] = None

    # tuple-style unpacking: host, port, proc = server
    def __iter__(self) -> Iterator[Any]:
        return iter((self.host, self.port, self.proc))

    # -- process control ------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the server on ``self.port`` and wait until it answers HTTP (bounded by ``timeout``)."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("visdom server already running")
        self.env_path.mkdir(parents=True, exist_ok=True)
        args = [
            sys.executable, "-c", _SERVER_CODE,
            "-port", str(self.port),
            "--hostname", HOST,
            "-bind_local",
            "-env_path", str(self.env_path) + "/",
            "-logging_level", "WARNING",
        ]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"visdom server exited with {self.proc.returncode}:\n{self.log()}")
            if self.is_up():
                return
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"visdom server on {HOST}:{self.port} not up after {timeout} s:\n{self.log()}")

    def stop(self) -> None:
        """Kill the server (SIGKILL, like a crash) and wait for it; the port is free afterwards."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
        # Wait until the port no longer answers, so a client sees the outage right away.
        deadline = time.monotonic() + 5
        while self.is_up() and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self, timeout: float = START_TIMEOUT_S) -> None:
        """``stop()`` then ``start()`` on the same port and env dir. In-memory plots are lost
        unless a client saved the env (``Visdom.save([env])``) before."""
        self.stop()
        self.start(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # -- HTTP API (read back what was plotted) -------------------------------------------

    def post(self, endpoint: str, msg: dict[str, Any], timeout: float = 5.0) -> str:
        """POST ``msg`` as JSON to ``/<endpoint>`` and return the body (raises on HTTP errors)."""
        req = urllib.request.Request(
            f"http://{HOST}:{self.port}/{endpoint}", data=json.dumps(msg).encode(), method="POST"
        )
        with _OPENER.open(req, timeout=timeout) as resp:
            return resp.read().decode()

    def is_up(self) -> bool:
        try:
            self.post("env_state", {}, timeout=1.0)
            return True
        except (OSError, urllib.error.URLError):
            return False

    def envs(self) -> list[str]:
        """Names of the envs the server knows (in memory or saved under ``env_path``)."""
        return json.loads(self.post("env_state", {}))

    def windows(self, env: str) -> dict[str, dict[str, Any]]:
        """All windows of ``env`` as ``{win_id: window_json}`` ({} if the env does not exist)."""
        if env not in self.envs():
            return {}
        return json.loads(self.post("win_data", {"eid": env, "win": None}))

    def window(self, env: str, win: str) -> Optional[dict[str, Any]]:
        """One window's JSON (what ``visdom.Visdom().get_window_data(win, env)`` returns), or None."""
        return self.windows(env).get(win)

    def line_points(self, env: str, win: str) -> list[tuple[float, float]]:
        """``(x, y)`` points of all traces of a line/scatter window ([] if it does not exist)."""
        window = self.window(env, win)
        if window is None:
            return []
        return [
            (float(x), float(y))
            for trace in window["content"]["data"]
            for x, y in zip(trace["x"], trace["y"])
            if x is not None and y is not None
        ]

    def text(self, env: str, win: str) -> Optional[str]:
        """HTML content of a text window, or None."""
        window = self.window(env, win)
        return None if window is None else window["content"]

    def saved_env(self, env: str) -> Optional[dict[str, Any]]:
        """The env JSON the server wrote to disk (after ``Visdom.save([env])``), or None."""
        path = self.env_path / f"{env}.json"
        return json.loads(path.read_text()) if path.exists() else None


@contextlib.contextmanager
def visdom_server(tmp_path: Path, port: Optional[int] = None) -> Iterator[VisdomServer]:
    """Start a visdom server on a free loopback port; always killed on exit.

    Yields a :class:`VisdomServer`; ``host, port, proc = server`` also works (``proc`` is the
    process at unpacking time: after ``restart()`` use ``server.proc``).
    """
    server = VisdomServer(tmp_path, port)
    try:
        server.start()
        yield server
    finally:
        server.stop()
