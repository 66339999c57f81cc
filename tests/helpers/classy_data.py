"""Classy-style dict samples for the Classy / VISSL tests. No Lightning import: classy_real.py uses it in the
subprocess that runs Classy's real ``ClassificationTask``."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import Dataset


class DictData(Dataset):
    """Classy-style samples ``{"input", "target", "id"}``: 4 features, 3 classes, seeded."""

    def __init__(self, n: int = 16, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input": self.x[i], "target": self.y[i], "id": 100 + i}
