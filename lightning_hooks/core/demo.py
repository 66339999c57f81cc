"""The contract between ``lightning-hooks demo`` and the families' demo hooks: a family's ``demo_hooks(out)`` returns
``(hook, probe)`` pairs, and after training each probe gets its hook and the :class:`Run` and says what the hook
produced. The demo itself (model, data, table) is app-level: :mod:`lightning_hooks.demo`."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the families' demo modules import this one, and the family registry them, without Lightning
    from lightning_hooks.core.adapter import LegacyHookAdapter


class DemoModel(Protocol):
    """The demo's model as probes use it: a ``torch.nn.Module`` that evaluates itself on a loader."""

    def evaluate(self, loader: Iterable[Any]) -> dict[str, float]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> Any: ...


class Run:
    """What the demo knows after training: the model, the validation loader, the output folder and the adapters.

    Example::

        def probe(hook, run: Run) -> str:
            return run.files(run.adapter("mmengine").runner.log_dir)
    """

    def __init__(self, model: DemoModel, val: Any, out: Path, adapters: list[LegacyHookAdapter]) -> None:
        self.model, self.val, self.out, self.adapters = model, val, out, adapters

    def val_loss(self, state_dict: dict[str, Any] | None = None) -> float:
        """Validation loss of the trained model, or of a copy of it holding ``state_dict``."""
        model = self.model
        if state_dict is not None:
            model = copy.deepcopy(model)
            model.load_state_dict(state_dict)
        return model.evaluate(self.val)["loss"]

    def adapter(self, family: str) -> LegacyHookAdapter:
        """The run's adapter of ``family``."""
        return next(a for a in self.adapters if a.family == family)

    def files(self, folder: str | os.PathLike[str], pattern: str = "*") -> str:
        """The files under ``folder`` matching ``pattern``, the first four by name."""
        paths = sorted(p for p in Path(folder).rglob(pattern) if p.is_file())
        if not paths:
            return "no files"
        shown = ", ".join(p.name for p in paths[:4]) + (f", ... ({len(paths)} files)" if len(paths) > 4 else "")
        return f"{shown} in {os.path.relpath(folder)}"


#: ``(hook, run) -> str``: what one demo hook produced, for the demo's table.
Probe = Callable[[Any, Run], str]
#: ``(out_dir) -> [(hook, probe)]``: a family's demo hooks (``Family.demo_hooks``).
DemoHooks = Callable[[Path], list[tuple[Any, Probe]]]
