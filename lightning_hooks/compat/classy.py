"""Classy Vision's hook contract without classy_vision installed (it needs torchvision).

Same contracts as ``classy_vision.hooks``: five abstract mount points taking ``task``, per-hook state in
``self.state``, ``name()`` keying that state in checkpoints, and ``from_config``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any


class ClassyHookState:
    """Attributes set on it are the hook's checkpointed state."""

    def get_classy_state(self) -> dict[str, Any]:
        return self.__dict__

    def set_classy_state(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


class ClassyHookFunctions(Enum):
    """Classy's mount points (VISSL adds on_backward, on_update and on_exception)."""

    on_start = "on_start"
    on_phase_start = "on_phase_start"
    on_forward = "on_forward"
    on_loss_and_meter = "on_loss_and_meter"
    on_step = "on_step"
    on_phase_end = "on_phase_end"
    on_end = "on_end"


class ClassyHook(ABC):
    """Base class of Classy-style hooks; subclasses define the five mount points (``on_x = ClassyHook._noop``)."""

    def __init__(self) -> None:
        self.state = ClassyHookState()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ClassyHook:
        return cls(**config)

    def _noop(self, *args: Any, **kwargs: Any) -> None:
        """Assign to a mount point the hook does not use."""

    @classmethod
    def name(cls) -> str:
        return cls.__name__

    def get_classy_state(self) -> dict[str, Any]:
        return self.state.get_classy_state()

    def set_classy_state(self, state_dict: dict[str, Any]) -> None:
        self.state.set_classy_state(state_dict)

    @abstractmethod
    def on_start(self, task: Any) -> None: ...

    @abstractmethod
    def on_phase_start(self, task: Any) -> None: ...

    @abstractmethod
    def on_step(self, task: Any) -> None: ...

    @abstractmethod
    def on_phase_end(self, task: Any) -> None: ...

    @abstractmethod
    def on_end(self, task: Any) -> None: ...
