"""Meters in Classy's forms for the ``task`` facade: Classy's own ``ClassyMeter`` instances, Classy's config form
(``{"accuracy": {"topk": [1, 5]}}``, built with ``classy_vision.meters.build_meters``) and torchmetrics metrics behind
Classy's meter interface (:class:`MetricMeter`)."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, cast

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from torchmetrics import Metric

from lightning_hooks.core.errors import unknown_name
from lightning_hooks.families.classy.config import check_config


class MetricMeter:
    """A torchmetrics ``Metric`` behind Classy's meter interface (``name``, ``value`` dict, ``reset``, ``sync_state``).

    ``value`` is computed from the local state; ``sync_state()`` all-gathers the state across ranks (a collective,
    called on every rank at phase end as Classy does) and ``value`` then reflects the global state until ``reset``.

    Example::

        meter = MetricMeter("accuracy", torchmetrics.classification.MulticlassAccuracy(num_classes=3))
    """

    def __init__(self, name: str, metric: Any) -> None:
        self._name = name
        self.metric = metric
        metric.sync_on_compute = False
        metric._to_sync = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def value(self) -> dict[str, Any]:
        """The metric's value; before the first update, its value on the empty state (Classy's meters give zeros),
        or ``{}`` for a metric that cannot compute without samples."""
        if self.metric.update_called:
            result = self.metric.compute()
        else:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*was called before the ``update`` method")
                try:
                    result = self.metric.compute()
                except ValueError:  # "No samples to concatenate"
                    return {}
        if isinstance(result, Mapping):
            return {str(k): _number(v) for k, v in result.items()}
        return {self._name: _number(result)}

    def update(self, output: Any, target: Any, **kwargs: Any) -> None:
        """``metric.update(output, target)``; Classy's keyword arguments (``is_train``) are not passed on."""
        self.metric.update(output, target)

    def reset(self) -> None:
        if self.metric._is_synced:
            self.metric.unsync()
        self.metric.reset()

    def sync_state(self) -> None:
        if torch.distributed.is_available() and torch.distributed.is_initialized() and not self.metric._is_synced:
            self.metric.sync()
            self.metric._computed = None

    def get_classy_state(self) -> dict[str, Any]:
        """The metric's accumulated state (tensors and lists of tensors) and its update count."""
        states = {name: _clone(getattr(self.metric, name)) for name in self.metric._defaults}
        return {"states": states, "update_count": self.metric._update_count}

    def set_classy_state(self, state: dict[str, Any]) -> None:
        self.reset()
        device = self.metric.device
        for name, value in state["states"].items():
            setattr(self.metric, name, [v.to(device) for v in value] if isinstance(value, list) else value.to(device))
        self.metric._update_count = state["update_count"]

    def __repr__(self) -> str:
        return f"{type(self.metric).__name__}({self._name}={self.value})"


def classy_meters(meters: Mapping[str, Any] | Sequence[Any] | None) -> list[Any]:
    """The task's meter list from any of the forms a Classy user has.

    - a list, as ``ClassificationTask.set_meters``: ``ClassyMeter`` instances, or ``{"name": ..., **kwargs}`` configs;
    - a dict ``{name: value}``: a config dict (Classy's ``"meters"`` section, e.g. ``{"accuracy": {"topk": [1, 5]}}``),
      a ``ClassyMeter``, or a torchmetrics ``Metric`` (wrapped in :class:`MetricMeter` under that name).

    Example::

        classy_meters({"accuracy": {"topk": [1, 5]}, "auroc": MulticlassAUROC(num_classes=10)})
    """
    if meters is None:
        return []
    if isinstance(meters, (DictConfig, ListConfig)):  # from YAML / LightningCLI / Hydra
        meters = cast("dict[str, Any] | list[Any]", OmegaConf.to_container(meters, resolve=True))
    if isinstance(meters, Mapping):
        return [_meter(value, f"meters[{name!r}]", name) for name, value in meters.items()]
    if isinstance(meters, Sequence) and not isinstance(meters, str):
        return [_meter(value, f"meters[{i}]") for i, value in enumerate(meters)]
    raise TypeError(
        f"ClassyAdapter(meters=...): expected a list of Classy meters or a dict, got {type(meters).__name__}. Write "
        'e.g. meters={"accuracy": {"topk": [1, 5]}} or meters=[AccuracyMeter(topk=[1])].'
    )


def _meter(value: Any, path: str, name: str | None = None) -> Any:
    """One meter: a ClassyMeter as it is, a config through Classy's registry, a torchmetrics Metric wrapped."""
    if isinstance(value, Metric):
        if name is None:
            raise TypeError(f"ClassyAdapter(meters=...): {path} is a torchmetrics {type(value).__name__} without a "
                            'name; pass metrics in a dict: meters={"acc": metric}.')
        return MetricMeter(name, value)
    if isinstance(value, Mapping):
        return _build_meter({"name": name, **value} if name is not None else dict(value), path)
    base = _classy_meter_base()
    if base is not None and isinstance(value, base):
        return value
    raise TypeError(
        f"ClassyAdapter(meters=...): {path} is a {type(value).__name__}; expected a classy_vision ClassyMeter, a Classy "
        "meter config ({'topk': [1]} under a registered meter name) or, in a dict, a torchmetrics Metric."
    )


def _build_meter(config: dict[str, Any], path: str) -> Any:
    """``classy_vision.meters.build_meter`` with errors that name the entry, the unknown name or key and the nearest."""
    if _classy_meter_base() is None:
        raise ModuleNotFoundError(f"ClassyAdapter(meters=...): {path} is a Classy meter config; install classy-vision")
    from classy_vision.meters import METER_REGISTRY, build_meter

    name = config.get("name")
    if name not in METER_REGISTRY:
        raise KeyError(f"ClassyAdapter(meters=...): {path}: {unknown_name('Classy meter name', str(name), METER_REGISTRY)}")
    try:
        check_config(config, METER_REGISTRY[name], "Classy meter")
        return build_meter(config)
    except (KeyError, TypeError, ValueError, AssertionError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        raise type(err)(f"ClassyAdapter(meters=...): {path}: {message}") from err


def _classy_meter_base() -> type | None:
    """``classy_vision.meters.ClassyMeter`` when classy_vision is installed (it imports without torchvision)."""
    if "classy_vision.meters" not in sys.modules:
        try:
            import classy_vision.meters  # noqa: F401
        except ImportError:
            return None
    return sys.modules["classy_vision.meters"].ClassyMeter


def _clone(value: Any) -> Any:
    return [v.detach().clone() for v in value] if isinstance(value, list) else value.detach().clone()


def _number(value: Any) -> Any:
    """A one-element tensor as a Python number, a larger one as a list."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    return value


def vissl_meters(config: Any) -> list[Any]:
    """VISSL's ``SelfSupervisionTask`` meters: one Classy meter per ``METERS.names`` entry, built from
    ``METERS[name]`` through Classy's registry (where ``vissl.meters`` registers VISSL's list meters). The adapter's
    task updates them at each step (train steps only with ``METERS.enable_training_meter``), syncs them over ranks at
    each phase end and resets them at each phase start, as VISSL's trainer; VISSL's hooks write their values."""
    import vissl.meters  # noqa: F401  (registers VISSL's meters)
    from classy_vision.meters import build_meter

    meters = config.METERS
    return [build_meter({"name": name, **meters[name]}) for name in meters.get("names", None) or []]
