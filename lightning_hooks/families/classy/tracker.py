"""The scalars of Classy's ``TensorboardPlotHook`` and VISSL's ``SSLTensorboardHook`` on the run's Lightning loggers,
under the hook's own tags and at the hook's own steps (``lightning-hooks train ... --logger``).

Those hooks write to a ``SummaryWriter`` (their ``tb_writer``) at steps of their own: Classy's at the train or test
step count (``Learning Rate/train``, ``Speed/{phase}/cumulative_sample_fetch_time``) and at the phase index
(``Losses/{phase}``, ``Meters/{phase}/...``, ``Speed/{tag}/im_per_sec``); VISSL's at ``task.iteration``
(``Training/Loss``, ``Training/Learning_rate``, ``Speed/...``, ``activations/...``) and at the train phase index
(``Training/{meter}_...``). :class:`HookScalars` sends every ``add_scalar`` of such a writer to each of
``trainer.loggers`` as ``logger.log_metrics({tag: value}, step=global_step)`` as well, so a Lightning logger's curves
line up with the hook's own event files (and with the user's older TensorBoard runs); the hook's own files stay as the
host writes them. Histograms and text stay in the hook's own writer (Lightning's loggers have no common API for
them).

Example::

    trainer = lightning.Trainer(callbacks=[adapter, HookScalars()], logger=TensorBoardLogger("tb"))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typing_extensions import override

from lightning_hooks.core.lightning_api import Callback, patch_method


def hook_writers(hooks: list[Any]) -> list[tuple[Any, Any]]:
    """``(hook, writer)`` for each hook holding a writer with ``add_scalar`` as ``tb_writer`` (TensorboardPlotHook,
    SSLTensorboardHook and hooks derived from them, with torch's or tensorboardX's ``SummaryWriter``; secondary
    ranks may hold None), each writer once."""
    found: dict[int, tuple[Any, Any]] = {}
    for hook in hooks:
        writer = getattr(hook, "tb_writer", None)
        if callable(getattr(writer, "add_scalar", None)):
            found.setdefault(id(writer), (hook, writer))
    return list(found.values())


class HookScalars(Callback):
    """Sends the scalars the ``ClassyAdapter``'s TensorBoard hooks write to ``trainer.loggers``, at the hooks' steps.

    At ``setup`` each such hook's writer gets an ``add_scalar`` that writes as before, then logs the tag and value
    (a float) at the writer's ``global_step`` to every Lightning logger; the ``ClassyTaskModule`` then stops sending
    its own copies of the hook's phase values (``Losses/{phase}``, ``Meters/...``) to the loggers, which would be a
    second curve under the same tags. Everything is undone at ``teardown`` (and after a failure). Without a
    Lightning logger, or without such a hook, it does nothing.
    """

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    @override
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        from lightning_hooks.families.classy.adapter import ClassyAdapter

        if stage != "fit" or not trainer.loggers:
            return
        adapters = [cb for cb in trainer.callbacks if isinstance(cb, ClassyAdapter)]
        writers = [pair for adapter in adapters for pair in hook_writers(list(adapter.hooks))]
        for _, writer in writers:
            self._undo.append(patch_method(writer, "add_scalar", _teed(writer.add_scalar, trainer)))
        if writers and getattr(pl_module, "log_phase_values", False) is True:
            pl_module.log_phase_values = False  # an instance attribute over the class's True, popped at the end
            self._undo.append(lambda: vars(pl_module).pop("log_phase_values", None))

    @override
    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self._remove()

    @override
    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._remove()

    def _remove(self) -> None:
        while self._undo:
            self._undo.pop()()


def _teed(write: Callable[..., Any], trainer: Any) -> Callable[..., Any]:
    """``write`` (the writer's ``add_scalar``) that also logs ``{tag: float(value)}`` at ``global_step`` to each of
    ``trainer.loggers``."""

    def add_scalar(tag: str, scalar_value: Any, global_step: int | None = None, *args: Any, **kwargs: Any) -> Any:
        result = write(tag, scalar_value, global_step, *args, **kwargs)
        value = float(scalar_value.item() if hasattr(scalar_value, "item") else scalar_value)
        for logger in trainer.loggers:
            logger.log_metrics({tag: value}, step=global_step)
        return result

    return add_scalar
