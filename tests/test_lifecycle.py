"""Every row of every family's event table is installed by its adapter and fires in a real Lightning run.

Probe hooks implement every mount point of their family and record each call they receive, with its arguments; a
handful of runs per family (fit with validation and test, an epoch cut short, a resume, a standalone validation, a
failure, iMIX with and without a step-owning hook) must call every row's mount point between them, at the row's
trigger and with the row's arguments. The calls are located by markers in the same record: a tracer callback on
each side of the adapter brackets every Lightning callback event, and the LightningModule marks its step methods,
``forward`` and ``on_load_checkpoint``. A row whose trigger the adapter never installs or never reaches, or that
reaches the hook with other arguments, fails here.
"""

from __future__ import annotations

from typing import Any

import imix.engine.hooks as imix_hooks
import lightning.pytorch as pl
import mmengine.hooks as mm_hooks
import pytest
import torch
from lh_testing import TinyModule, tiny_loader
from lightning.pytorch.callbacks import Callback

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter, families
from lightning_hooks.compat import classy as compat_classy
from lightning_hooks.core.events import Mount
from lightning_hooks.core.triggers import (
    ON,
    LastTrainBatch,
    LightningEvent,
    ModuleForward,
    ModuleLoadCheckpoint,
    ModuleStep,
    OptimizerStep,
    StrategyTrainingStep,
    Trigger,
)
from lightning_hooks.families.classy.events import ModelForward


class Boom(RuntimeError):
    pass


class Module(TinyModule):
    """TinyModule with a test step, returning Classy's step dict; fails at ``fail_at`` global steps if set. With a
    ``trace`` list it marks the start and end of its steps, its ``forward`` and its ``on_load_checkpoint`` there."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.trace: list[tuple] | None = None

    def _mark(self, name: str) -> None:
        if self.trace is not None:
            self.trace.append(("marker", f"module.{name}"))

    def forward(self, x):
        self._mark("forward")  # the forward hook's rows fire after it returned: no marker in between
        return super().forward(x)

    def on_load_checkpoint(self, checkpoint):
        self._mark("on_load_checkpoint")

    def training_step(self, batch, batch_idx):
        self._mark("training_step:start")
        if self.fail_at is not None and self.global_step >= self.fail_at:
            raise Boom("injected")
        loss = super().training_step(batch, batch_idx)
        self._mark("training_step:end")
        return loss

    def validation_step(self, batch, batch_idx):
        self._mark("validation_step:start")
        loss = super().validation_step(batch, batch_idx)
        self._mark("validation_step:end")
        return loss

    def test_step(self, batch, batch_idx):
        self._mark("test_step:start")
        x, y = batch
        output = self(x)
        self._mark("test_step:end")
        return {"loss": torch.nn.functional.mse_loss(output, y), "output": output, "target": y}


def probe(base: type, adapter: type) -> object:
    """A hook of ``base`` that implements every mount point of ``adapter``'s table and records each call it receives
    in its ``trace``: ``("call", mount, positional arguments, keyword arguments)``."""

    def recorder(mount: str):
        def record(self, *args, **kwargs):
            self.trace.append(("call", mount, args, kwargs))

        return record

    mounts = {m: recorder(m) for m in adapter.events.mount_points()}
    hook = type(f"Probe{adapter.__name__}", (base,), mounts)()
    hook.trace = []
    return hook


class Tracer(Callback):
    """Marks every Lightning callback event in ``trace``: placed before the adapter it writes the event's name, after
    it ``/`` and the name, so a hook call between the two was made by the adapter at that event."""

    def __init__(self, trace: list[tuple], prefix: str) -> None:
        self.trace, self.prefix = trace, prefix


def _marker(name: str):
    def mark(self, *args, **kwargs):
        self.trace.append(("marker", self.prefix + name))

    return mark


for _name in ON:
    setattr(Tracer, _name, _marker(_name))


def trace_of(adapter) -> list[tuple]:
    """The trace of the adapter's probe hook."""
    (probe_hook,) = [h for h in adapter.hooks if hasattr(h, "trace")]
    return probe_hook.trace


def traced(adapter) -> list[Callback]:
    """``[Tracer, adapter, Tracer]`` writing to the trace of the adapter's probe."""
    trace = trace_of(adapter)
    return [Tracer(trace, ""), adapter, Tracer(trace, "/")]


def fit(adapter, tmp_path, module=None, ckpt_path=None, test=True, **kwargs):
    kwargs = {**dict(max_epochs=2, default_root_dir=tmp_path, logger=False, enable_progress_bar=False,
                     enable_model_summary=False, num_sanity_val_steps=1), **kwargs}  # fmt: skip
    trainer = pl.Trainer(callbacks=traced(adapter), **kwargs)
    module = module or Module()
    module.trace = trace_of(adapter)
    trainer.fit(module, tiny_loader(), tiny_loader(4), ckpt_path=ckpt_path)
    if test:
        trainer.test(module, tiny_loader(4), verbose=False)
    return trainer


def failing_fit(adapter, tmp_path, module=None):
    with pytest.raises(Boom):
        fit(adapter, tmp_path, module=module or Module(fail_at=1), test=False)


def mmengine_runs(tmp_path):
    make = lambda: MMEngineAdapter([probe(mm_hooks.Hook, MMEngineAdapter)], work_dir=tmp_path)  # noqa: E731
    first = make()
    trainer = fit(first, tmp_path / "a")  # ModelCheckpoint saves at each epoch end: on_save_checkpoint
    resumed = make()
    fit(resumed, tmp_path / "b", ckpt_path=trainer.checkpoint_callback.best_model_path, max_epochs=3, test=False)
    short = make()
    fit(short, tmp_path / "c", max_steps=3, test=False)  # cut inside epoch 0
    failed = make()
    failing_fit(failed, tmp_path / "d")
    return [first, resumed, short, failed]


def classy_runs(tmp_path):
    make = lambda: ClassyAdapter([probe(compat_classy.ClassyHook, ClassyAdapter)])  # noqa: E731
    first, short, alone, failed = make(), make(), make(), make()
    trainer = fit(first, tmp_path / "a")
    fit(short, tmp_path / "b", max_steps=3, test=False)
    trainer.lightning_module.trace = trace_of(alone)
    pl.Trainer(callbacks=traced(alone), logger=False, enable_progress_bar=False).validate(trainer.lightning_module,
                                                                                           tiny_loader(4))  # fmt: skip
    failing_fit(failed, tmp_path / "c")
    return [first, short, alone, failed]


def imix_runs(tmp_path):
    make = lambda *extra: IMIXAdapter([probe(imix_hooks.HookBase, IMIXAdapter), *extra])  # noqa: E731
    lightning_steps, hooks_step, failed = make(), make(imix_hooks.OptimizerHook()), make()
    fit(lightning_steps, tmp_path / "a", test=False)
    fit(hooks_step, tmp_path / "b", test=False)
    failing_fit(failed, tmp_path / "c")
    return [lightning_steps, hooks_step, failed]


def mmcv_runs(tmp_path):
    runner = pytest.importorskip("mmcv.runner", reason="mmcv 1.x lives in .venv-mmcv1 (tests/families/mmcv/test_venv.py)")
    from lightning_hooks import MMCVAdapter

    make = lambda *extra, **options: MMCVAdapter([probe(runner.Hook, MMCVAdapter), *extra], **options)  # noqa: E731
    lightning_steps, hooks_step, short = make(), make(runner.OptimizerHook()), make()
    iter_based = make(runner=dict(type="IterBasedRunner", max_iters=6))
    fit(lightning_steps, tmp_path / "a", test=False)
    fit(hooks_step, tmp_path / "b", test=False)
    fit(short, tmp_path / "c", max_steps=3, test=False)  # cut inside epoch 0
    fit(iter_based, tmp_path / "d", test=False, max_steps=6, max_epochs=-1)
    return [lightning_steps, hooks_step, short, iter_based]


#: the runs of the families whose tables need more than :func:`default_runs` (a resume, a standalone validation, a
#: step-owning hook, IterBasedRunner); every other registered family gets the default runs: a new family needs no line
SCENARIOS = {"mmengine": mmengine_runs, "classy": classy_runs, "imix": imix_runs, "mmcv": mmcv_runs}


def default_runs(family, tmp_path):
    """A fit with validation and test, a fit cut short inside epoch 0 and a failing fit, each with a probe of the
    family's first hook base class."""
    bases = family.adapter.base_classes()
    if not bases:
        pytest.skip(f"{family.name}: its hook library is not imported here ({family.adapter.__name__}.base_classes())")
    make = lambda: family.adapter([probe(bases[0], family.adapter)])  # noqa: E731
    first, short, failed = make(), make(), make()
    fit(first, tmp_path / "a")
    fit(short, tmp_path / "b", max_steps=3, test=False)
    failing_fit(failed, tmp_path / "c")
    return [first, short, failed]


def runs(family, tmp_path):
    """The adapters of the family's runs (:data:`SCENARIOS`, else :func:`default_runs`), each after its run."""
    scenario = SCENARIOS.get(family.name)
    return scenario(tmp_path) if scenario is not None else default_runs(family, tmp_path)


def test_every_scenario_is_of_a_registered_family():
    assert set(SCENARIOS) <= {f.name for f in families.registered()}


def _at(trigger: Trigger, place: dict[str, str | None]) -> bool:
    """Whether a call made at ``place`` (see :func:`_places`) was made at ``trigger``."""
    if isinstance(trigger, LightningEvent):
        return place["event"] == trigger.name
    if isinstance(trigger, LastTrainBatch):
        return place["event"] == "on_train_batch_end"
    if place["event"] is not None:  # the other triggers fire outside Lightning's callback events
        return False
    if isinstance(trigger, ModuleLoadCheckpoint):
        return place["module"] == "on_load_checkpoint"
    if isinstance(trigger, (ModuleForward, ModelForward)):
        return place["module"] == "forward"
    if isinstance(trigger, ModuleStep):
        if trigger.at == "after":
            return place["module"] == f"{trigger.method}:end"
        return place["next_module"] == f"{trigger.method}:start"
    if isinstance(trigger, StrategyTrainingStep):
        return place["module"] == "training_step:end"
    if isinstance(trigger, OptimizerStep):
        return place["last_event"] == "/on_before_optimizer_step"  # Lightning's last event before the step
    raise AssertionError(f"no expectation for trigger {trigger} ({type(trigger).__name__}): describe it in _at")


def _places(trace: list[tuple]) -> list[dict[str, str | None]]:
    """For each entry of ``trace``: the Lightning callback event it is inside of (``event``, between the tracers'
    markers), the last tracer marker (``last_event``), and the module markers before and after it."""
    places, stack, last_event, module = [], [], None, None
    for kind, name, *_ in trace:
        if kind == "marker" and name.startswith("module."):
            module = name[len("module."):]
        elif kind == "marker" and name.startswith("/"):
            if stack and stack[-1] == name[1:]:
                stack.pop()
            last_event = name
        elif kind == "marker":
            stack.append(name)
            last_event = name
        places.append(dict(event=stack[-1] if stack else None, last_event=last_event, module=module))
    following = None
    for place, (kind, name, *_) in zip(reversed(places), reversed(trace)):
        place["next_module"] = following
        if kind == "marker" and name.startswith("module."):
            following = name[len("module."):]
    return places


_VALID = {
    "batch_idx": lambda v: isinstance(v, int) and v >= 0,
    "data_batch": lambda v: isinstance(v, (list, tuple)) and [type(t) for t in v] == [torch.Tensor] * 2,  # (x, y)
    "outputs": lambda v: v is not None,
    "checkpoint": lambda v: isinstance(v, dict) and "state_dict" in v,
    "metrics": lambda v: isinstance(v, dict),
    "exception": lambda v: isinstance(v, Boom),
}


def _receives(row: Mount, adapter: Any, args: tuple, kwargs: dict[str, Any]) -> bool:
    """Whether a call received the host object (positional) and exactly the row's arguments, with plausible values."""
    host = tuple(getattr(adapter, name) for name in adapter.host_args)  # the facades, by the names hooks give them
    return (len(args) == len(host) and all(a is h for a, h in zip(args, host)) and set(kwargs) == set(row.args)
            and all(_VALID[name](kwargs[name]) for name in row.args))  # fmt: skip


def _calls_by_row(adapter: Any) -> tuple[dict[Mount, int], list[str]]:
    """The probe's recorded calls, each matched to the table rows of its mount point that fire at its place in the
    trace: how many calls each row received, and the calls no row explains (wrong place or wrong arguments)."""
    trace = trace_of(adapter)
    received = {row: 0 for row in adapter.events.rows}
    unexplained = []
    for entry, place in zip(trace, _places(trace)):
        if entry[0] != "call":
            continue
        _, mount, args, kwargs = entry
        rows = [r for r in adapter.events.rows if r.mount == mount and _at(r.event, place)]
        for row in rows:
            if _receives(row, adapter, args, kwargs):
                received[row] += 1
        if not any(_receives(row, adapter, args, kwargs) for row in rows):
            unexplained.append(f"{mount}({', '.join(sorted(kwargs))}) at {place}")
    return received, unexplained


@pytest.mark.parametrize("family", families.registered(), ids=lambda f: f.name)
def test_every_table_row_is_installed_and_fires(family, tmp_path):
    check_every_row_fires(family, tmp_path)


def test_a_newly_registered_family_is_checked_with_no_line_here(monkeypatch, tmp_path):
    """The toy family (tests/core/toy_family), registered by its one registry line, is checked by the default runs."""
    from toy_family import FAMILY

    monkeypatch.setattr(families, "FAMILIES", [*families.FAMILIES, FAMILY])  # the one registry line
    check_every_row_fires(FAMILY, tmp_path)


def check_every_row_fires(family, tmp_path):
    """Every row of ``family``'s table fires in its runs, at its trigger, with its arguments."""
    adapters = runs(family, tmp_path)
    family = family.name
    received: dict[Mount, int] = {row: 0 for row in adapters[0].events.rows}
    per_adapter = []
    for adapter in adapters:
        calls, unexplained = _calls_by_row(adapter)
        assert not unexplained, f"{family}: the probe received calls that no table row explains: {unexplained}"
        per_adapter.append(calls)
        for row, n in calls.items():
            received[row] += n
    never = [f"{row.event} -> {row.mount}{row.args}" for row, n in received.items() if not n]
    assert not never, f"{family}: rows whose mount point no run called, at their trigger with their arguments: {never}"
    for adapter, calls in zip(adapters, per_adapter):  # the adapter's counter agrees: one probe call per row fired
        assert calls == {row: adapter.fired_rows[row] for row in adapter.events.rows}


@pytest.mark.parametrize("family", families.registered(), ids=lambda f: f.name)
def test_every_lightning_event_in_a_table_is_implemented_by_its_adapter(family):
    """Not a test of inheritance: the family's adapter class (or the shared base) must override the Callback method."""
    for trigger in family.adapter.events.events():
        if isinstance(trigger, LightningEvent):
            method = getattr(family.adapter, trigger.name)
            assert method is not getattr(Callback, trigger.name), f"{family.adapter.__name__} ignores {trigger}"


def test_fire_refuses_a_trigger_outside_the_table():
    adapter = MMEngineAdapter([probe(mm_hooks.Hook, MMEngineAdapter)])
    with pytest.raises(ValueError, match="is not a trigger of the mmengine event table"):
        adapter.fire("on_train_start")  # a plain string is not a trigger
    from lightning_hooks.families.classy.events import FORWARD

    with pytest.raises(ValueError, match=r"ModelForward\(\) is not a trigger of the mmengine event table"):
        adapter.fire(FORWARD)


def test_patches_are_removed_after_fit_and_after_a_failure(tmp_path):
    module = Module()
    adapters = [ClassyAdapter([probe(compat_classy.ClassyHook, ClassyAdapter)]),
                IMIXAdapter([probe(imix_hooks.HookBase, IMIXAdapter), imix_hooks.OptimizerHook()])]  # fmt: skip
    for adapter in adapters:
        trainer = fit(adapter, tmp_path / type(adapter).__name__, module=module, test=False)
        assert "training_step" not in vars(module) and "training_step" not in vars(trainer.strategy)
        assert not module._forward_hooks
    failing = Module(fail_at=1)
    failing_fit(MMEngineAdapter([probe(mm_hooks.Hook, MMEngineAdapter)]), tmp_path / "mm", failing)
    failing_fit(ClassyAdapter([probe(compat_classy.ClassyHook, ClassyAdapter)]), tmp_path / "classy", failing)
    assert not {"on_load_checkpoint", "training_step", "validation_step"} & set(vars(failing))
    assert not failing._forward_hooks
