"""Fixtures for the Classy / VISSL adapter tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from classy_testkit import Net, ReferenceTask, loader


@pytest.fixture
def reference() -> Callable[..., ReferenceTask]:
    def run(hooks: Sequence[Any], epochs: int = 2, **net: Any) -> ReferenceTask:
        task = ReferenceTask(Net(**net), hooks, loader(), loader(8, seed=1), epochs)
        task.run()
        return task

    return run
