"""core/weight_swaps.py: at most one EMA swaps its weights into the model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lightning_hooks.core.weight_swaps import check_one_weight_swap


class Swapper:
    def __init__(self, *names):
        self.names = list(names)

    def weight_swappers(self):
        return self.names


def test_one_swapper_passes_two_are_refused_naming_both():
    check_one_weight_swap(SimpleNamespace(callbacks=[Swapper("EMA"), Swapper(), object()]))
    with pytest.raises(ValueError, match=r"EMA and EMAHook \(MMEngineAdapter\) both swap EMA weights"):
        check_one_weight_swap(SimpleNamespace(callbacks=[Swapper("EMA"), Swapper("EMAHook (MMEngineAdapter)")]))
