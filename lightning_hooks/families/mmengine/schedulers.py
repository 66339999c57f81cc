"""``runner.param_schedulers``: MMEngine's parameter schedulers, checked when the adapter is built and built on
Lightning's optimizer at each fit, as ``Runner.build_param_scheduler`` builds them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from mmengine.optim import OptimWrapper
from torch.optim.optimizer import register_optimizer_step_post_hook

from lightning_hooks.core.errors import add_note, unknown_name
from lightning_hooks.core.introspect import init_keywords
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.triggers import Patch, Remove


def check_configs(configs: Any, default_scope: str | None) -> None:
    """Refuse, when the adapter is built, a scheduler config of a type unknown in its scope (``_scope_``, else
    ``default_scope``, as the Runner resolves it) or with a keyword its class does not take (``milestone``).

    Example::

        check_configs([dict(type="MultiStepLR", milestones=[8, 11])], default_scope="mmdet")
    """
    from mmengine.registry import PARAM_SCHEDULERS

    from lightning_hooks.families.mmengine.config import lookup, registered_names

    for item in configs if isinstance(configs, (list, tuple)) else [configs]:
        if not isinstance(item, Mapping) or not isinstance(item.get("type"), (str, type)):
            continue
        cls = item["type"]
        if isinstance(cls, str):
            with PARAM_SCHEDULERS.switch_scope_and_registry(item.get("_scope_") or default_scope) as registry:
                cls = lookup(registry, item["type"])
        if cls is None:
            known = registered_names(registry._get_root_registry())
            raise KeyError(f"MMEngineAdapter(param_schedulers=...): {unknown_name('scheduler type', item['type'], known)}")
        accepted = init_keywords(cls, skip=("self", "optimizer", "epoch_length"))
        if accepted is None:
            continue
        unknown = [k for k in item if k not in accepted | {"type", "convert_to_iter_based", "_scope_"}]
        if unknown:
            raise TypeError(
                f"MMEngineAdapter(param_schedulers=...): {dict(item)!r}: "
                f"{unknown_name(f'{cls.__name__} argument', unknown[0], accepted)}"
            )


def build(configs: Any, optim_wrapper: Callable[[], Any], loop: Any) -> list[Any]:
    """Build scheduler ``configs`` on ``optim_wrapper()`` (``runner.optim_wrapper``, read for each config as the
    Runner reads it) for the train loop ``loop`` (schedulers given built are kept);
    a config without ``end`` ends at ``loop.max_epochs`` (``by_epoch``) or ``loop.max_iters``, as the Runner fills
    it in, and ``epoch_length`` is the length of ``loop.dataloader``."""
    from mmengine.optim.scheduler import _ParamScheduler
    from mmengine.registry import PARAM_SCHEDULERS

    items = configs if isinstance(configs, (list, tuple)) else [configs]
    built = []
    for item in items:
        if isinstance(item, _ParamScheduler):
            built.append(item)
            continue
        cfg = dict(item)
        cfg.setdefault("end", loop.max_epochs if cfg.get("by_epoch", True) else loop.max_iters)
        try:
            default_args = dict(optimizer=optim_wrapper(), epoch_length=len(loop.dataloader))
            built.append(PARAM_SCHEDULERS.build(cfg, default_args=default_args))
        except Exception as err:
            trainer = loop.trainer
            note = f"[lightning-hooks] MMEngineAdapter(param_schedulers=...) could not build {item!r}"
            if "end" not in item and cfg["end"] <= cfg.get("begin", 0):  # the end filled in here
                note += (
                    f" (end={cfg['end']}). A config without 'end' ends at runner.max_epochs (by_epoch) or "
                    f"runner.max_iters, here {loop.max_epochs} and {loop.max_iters}, from "
                    f"Trainer(max_epochs={trainer.max_epochs}, max_steps={trainer.max_steps}): bound the Trainer "
                    "with max_epochs or max_steps, or set 'begin' and 'end' in the config"
                )
            add_note(err, note + ".")
            raise
    return built


def step_counted(wrapper: Any) -> OptimWrapper | None:
    """The optimizer view whose ``_global_step`` :class:`CountWrapperSteps` advances: MMEngine's schedulers count
    ``OptimWrapper.step`` calls to check the step order (they set ``_global_step`` on the view they are built on),
    while Lightning steps the torch optimizer."""
    return wrapper if isinstance(wrapper, OptimWrapper) and hasattr(wrapper, "_global_step") else None


@dataclass(frozen=True)
class CountWrapperSteps(Patch):
    """After ``step()`` of the torch optimizer behind ``runner.optim_wrapper`` (a global optimizer post-hook, filtered
    by identity): one more ``OptimWrapper._global_step``, once :func:`build` built schedulers on that view
    (``runner._step_counted``). Fires no row."""

    def __str__(self) -> str:
        return "Optimizer.step (OptimWrapper step count)"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        runner = adapter.runner

        def after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            wrapper = runner._step_counted
            if wrapper is not None and wrapper.optimizer is optimizer:
                wrapper._global_step += 1

        handle = register_optimizer_step_post_hook(after_step)

        def remove() -> None:
            handle.remove()
            runner._step_counted = None

        return remove


#: the one :class:`CountWrapperSteps` patch (installed for every fit)
COUNT_WRAPPER_STEPS = CountWrapperSteps()


def stateful(schedulers: Any) -> list[Any]:
    """The built schedulers in ``runner.param_schedulers`` (a list, or MMEngine's dict of lists): those whose state a
    checkpoint holds."""
    if not schedulers:
        return []
    if isinstance(schedulers, dict):
        return [s for group in schedulers.values() for s in group]
    return [s for s in schedulers if hasattr(s, "state_dict")]


def start_fit(trainer: pl.Trainer, schedulers: list[Any], states: list[dict] | None) -> None:
    """At ``on_fit_start``, once ``schedulers`` are built: refuse an optimizer that ``configure_optimizers()`` also
    schedules, and restore the states a resumed checkpoint holds (``states``)."""
    scheduled = {id(getattr(s.optimizer, "optimizer", s.optimizer)) for s in schedulers}
    if any(id(config.scheduler.optimizer) in scheduled for config in trainer.lr_scheduler_configs):
        raise ValueError(
            "MMEngineAdapter(param_schedulers=...) and configure_optimizers() both schedule the same optimizer, "
            "so its learning rate would be stepped twice. Return only the optimizer from configure_optimizers(), "
            "or drop param_schedulers."
        )
    for scheduler, state in zip(schedulers, states or (), strict=False):
        scheduler.load_state_dict(state)
