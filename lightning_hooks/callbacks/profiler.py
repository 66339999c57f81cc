"""torch.profiler over a window of training steps, with zero cost outside it."""

from __future__ import annotations

import os
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from typing_extensions import override

from lightning_hooks.core.lightning_api import Callback, pl, rank_zero_warn
from lightning_hooks.core.state_keys import UniqueStateKey


class Profiler(UniqueStateKey, Callback):
    r"""Profile optimizer steps ``start_step .. start_step + num_steps - 1`` with ``torch.profiler``.

    The profiler starts in ``on_train_batch_start`` of the first batch whose ``trainer.global_step`` is in the
    window (``start_step``, or later in a run resumed inside the window, which profiles its remaining steps) and
    stops in ``on_train_batch_end`` once the window's last optimizer step has completed (so a window covers whole
    accumulation windows). No profiler object exists before or after the window, so the other steps run at full
    speed; Lightning's ``PyTorchProfiler`` instead wraps every hook of the run in ``record_function`` ranges. If
    training ends or fails inside the window, the partial window is written. Whether the window was profiled is in
    the callback's ``state_dict``: a run resumed after it neither profiles again nor warns, while a run resumed past
    a window it never profiled warns.

    Written to ``dirpath`` (default: ``trainer.log_dir``, which is ``default_root_dir`` without a logger);
    ``<stem>`` is ``profile_steps=<first>-<last>`` (the steps profiled) plus ``_rank<r>`` when ``world_size > 1``:

    * ``<stem>.trace.json``: Chrome trace (open in ``chrome://tracing`` or https://ui.perfetto.dev);
    * ``<stem>.txt``: ``key_averages().table(...)`` sorted by self CUDA time when CUDA was profiled, else self CPU
      time (top ``row_limit`` rows).

    Args:
        start_step: first optimizer step (``trainer.global_step`` value) to profile.
        num_steps: number of optimizer steps to profile.
        dirpath: output directory.
        row_limit: rows of the summary table.

    Example::

        >>> import lightning.pytorch as pl
        >>> from lightning.pytorch.demos.boring_classes import BoringModel
        >>> from lightning_hooks.callbacks import Profiler
        >>> import os, tempfile
        >>> prof = Profiler(start_step=2, num_steps=2, dirpath=tempfile.mkdtemp())
        >>> trainer = pl.Trainer(max_steps=5, limit_val_batches=0, callbacks=[prof], logger=False,
        ...                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        >>> trainer.fit(BoringModel())
        >>> [os.path.basename(p) for p in prof.paths]
        ['profile_steps=2-3.trace.json', 'profile_steps=2-3.txt']

    """

    def __init__(
        self, start_step: int = 10, num_steps: int = 5, dirpath: str | None = None, row_limit: int = 50
    ) -> None:
        checks = (("start_step", start_step, 0), ("num_steps", num_steps, 1), ("row_limit", row_limit, 1))
        for name, value, low in checks:
            if not isinstance(value, int) or value < low:
                raise ValueError(f"Profiler: `{name}` must be an int >= {low}, got {value!r}.")
        self._init_state_key(type(self).__qualname__)
        self.start_step = start_step
        self.num_steps = num_steps
        self.dirpath = dirpath
        self.row_limit = row_limit
        self.paths: list[str] = []  # files written
        self._prof: profile | None = None
        self._done = False  # the window was profiled (or cut short by the end of training or an error)
        self._first = 0  # first profiled step
        self._fit_start_step = 0
        self._outdir = ""

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._key_by_position(trainer)

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # resolved here, on all ranks: `trainer.log_dir` broadcasts, which must not happen in `on_exception`
        self._outdir = self.dirpath or trainer.log_dir or trainer.default_root_dir
        self._fit_start_step = trainer.global_step  # > 0 when resumed

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if self._prof is None and not self._done and self.start_step <= step < self.start_step + self.num_steps:
            self._first = step
            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            self._prof = profile(activities=activities)
            self._prof.start()

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._prof is not None and trainer.global_step >= self.start_step + self.num_steps:
            self._finish(trainer)

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._prof is not None:
            rank_zero_warn(f"Profiler: training ended at step {trainer.global_step}, inside the profiling window.")
            self._finish(trainer)
        elif not self._done and self._fit_start_step >= self.start_step + self.num_steps:
            rank_zero_warn(
                f"Profiler: training resumed at global step {self._fit_start_step}, after the profiling window "
                f"(steps {self.start_step}-{self.start_step + self.num_steps - 1}), which the checkpoint does not "
                f"record as profiled; nothing was profiled. Set `start_step` >= {self._fit_start_step} to profile "
                "this run."
            )
        elif not self._done:
            rank_zero_warn(
                f"Profiler: training ended at global step {trainer.global_step} before `start_step={self.start_step}`; "
                "nothing was profiled. Lower `start_step`."
            )

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if self._prof is not None:
            self._finish(trainer)

    def _finish(self, trainer: pl.Trainer) -> None:
        prof, self._prof, self._done = self._prof, None, True
        assert prof is not None
        prof.stop()
        last = min(trainer.global_step, self.start_step + self.num_steps) - 1
        stem = f"profile_steps={self._first}-{max(last, self._first)}"
        if trainer.world_size > 1:
            stem += f"_rank{trainer.global_rank}"
        os.makedirs(self._outdir, exist_ok=True)
        trace = os.path.join(self._outdir, stem + ".trace.json")
        table = os.path.join(self._outdir, stem + ".txt")
        prof.export_chrome_trace(trace)
        sort_by = "self_cuda_time_total" if ProfilerActivity.CUDA in prof.activities else "self_cpu_time_total"
        with open(table, "w") as f:
            f.write(prof.key_averages().table(sort_by=sort_by, row_limit=self.row_limit))
        self.paths = [trace, table]

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"start_step": self.start_step, "num_steps": self.num_steps, "done": self._done}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if set(state_dict) != {"start_step", "num_steps", "done"}:
            raise KeyError(
                f"Profiler: unexpected state keys {sorted(state_dict)}; expected ['done', 'num_steps', 'start_step']. "
                "The checkpoint was not written by lightning_hooks.callbacks.Profiler."
            )
        # a window other than this one's is still to be profiled
        same_window = (state_dict["start_step"], state_dict["num_steps"]) == (self.start_step, self.num_steps)
        self._done = bool(state_dict["done"]) and same_window
