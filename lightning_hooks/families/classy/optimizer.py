"""Classy's ``ClassyOptimizer`` as its hooks read it: ``options_view`` over the options Classy's optimizer would hold
(the last step's, not those Lightning's schedulers have already stepped to)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


class OptionsView:
    """Classy's ``optimizer.options_view``: ``options_view.lr`` reads the option from the param groups.

    One distinct value gives that value, several give the list of distinct values, none raises AttributeError.
    ``used`` maps an optimizer to the options Classy's optimizer would hold now (see :meth:`Task.options_at_phase_end`);
    an optimizer that has not stepped yet shows its param groups.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, used: Mapping[Any, list[dict[str, Any]]]) -> None:
        self._optimizer = optimizer
        self._used = used

    def __getattr__(self, name: str) -> Any:
        values: list[Any] = []
        for group in self._used.get(self._optimizer, self._optimizer.param_groups):
            if name in group and group[name] not in values:
                values.append(group[name])
        if not values:
            raise AttributeError(f"no param group of {type(self._optimizer).__name__} has the option {name!r}")
        return values[0] if len(values) == 1 else values


class Optimizer:
    """Classy's ``ClassyOptimizer`` as hooks use it: ``options_view``, ``optimizer`` and the torch optimizer's API."""

    def __init__(self, optimizer: torch.optim.Optimizer, used: Mapping[Any, list[dict[str, Any]]]) -> None:
        self.optimizer = optimizer
        self.options_view = OptionsView(optimizer, used)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.optimizer, name)


def param_options(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """The optimizer's param-group options (everything but the parameters). Taken every step: a dict copy without
    ``params`` (a fifth of a comprehension's time)."""
    options = []
    for group in optimizer.param_groups:
        kept = group.copy()
        del kept["params"]
        options.append(kept)
    return options
