"""Checkpoint state that ``torch.load(weights_only=True)`` accepts: tensors and plain Python containers only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


def plain(obj: Any) -> Any:
    """``obj`` with numpy scalars turned into Python numbers, numpy arrays into tensors and mappings into dicts.

    Lists and tuples are converted element-wise; other objects are returned unchanged.

    Example::

        plain({"lr": np.float64(0.1), "hist": np.arange(3)})  # {'lr': 0.1, 'hist': tensor([0, 1, 2])}
    """
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(plain(v) for v in obj)
    return obj
