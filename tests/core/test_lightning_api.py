"""Pins every Lightning internal that ``lightning_hooks/core/lightning_api.py`` relies on, in every installed namespace.

A Lightning release that renames, moves or changes one of them fails here (the main suite runs Lightning 2.6, the
reduced suite in ``.venv-lt24`` runs 2.4), instead of breaking an adapter in a user's run.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import logging
import pathlib
import re
import tomllib
import warnings
from typing import Any

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

from lightning_hooks.core import lightning_api

NAMESPACES = {ns.__name__: ns for ns in lightning_api.NAMESPACES}
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(params=sorted(NAMESPACES))
def ns(request):
    """Each installed Lightning namespace: ``lightning.pytorch`` and ``pytorch_lightning``."""
    return NAMESPACES[request.param]


def _trainer(ns: Any, tmp_path: pathlib.Path, **kwargs: Any) -> Any:
    defaults = dict(default_root_dir=tmp_path, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, max_steps=2, limit_val_batches=1,
                    num_sanity_val_steps=0)  # fmt: skip
    return ns.Trainer(**{**defaults, **kwargs})


def _boring(ns: Any) -> Any:
    return importlib.import_module(f"{ns.__name__}.demos.boring_classes").BoringModel


# ----------------------------------------------------------------------------------------------- versions
def test_requirement_admits_the_supported_releases_in_both_namespaces():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {r.name: r.specifier for r in map(Requirement, requires)}
    assert pins["lightning"] == lightning_api.SUPPORTED
    assert pins["pytorch-lightning"] == lightning_api.SUPPORTED
    assert all(v in lightning_api.SUPPORTED for v in ("2.4.0", "2.5.6", "2.6.6"))
    assert not any(v in lightning_api.SUPPORTED for v in ("2.3.3", "2.7.0"))


def test_every_installed_supported_namespace_is_used():
    expected = []
    for dist, module in (("lightning", "lightning.pytorch"), ("pytorch-lightning", "pytorch_lightning")):
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        if version in lightning_api.SUPPORTED:
            expected.append(module)
    assert list(NAMESPACES) == expected and expected
    assert lightning_api.pl is lightning_api.NAMESPACES[0]


# -------------------------------------------------------------------------------------- namespace bases
def test_bases_derive_from_each_namespace(ns):
    fabric = importlib.import_module({"lightning.pytorch": "lightning.fabric"}.get(ns.__name__, "lightning_fabric"))
    assert issubclass(lightning_api.Callback, ns.Callback)
    assert issubclass(lightning_api.Logger, ns.loggers.Logger)
    assert issubclass(lightning_api.TorchCheckpointIO, fabric.plugins.CheckpointIO)
    assert ns.Callback in lightning_api.CALLBACKS and ns.LightningModule in lightning_api.LIGHTNING_MODULES
    assert lightning_api.namespace_of(_boring(ns)()) is ns


def test_namespace_of_names_both_namespaces_for_a_foreign_object():
    with pytest.raises(TypeError, match="neither a LightningModule nor a Trainer of") as err:
        lightning_api.namespace_of(torch.nn.Linear(1, 1))
    for name in NAMESPACES:
        assert name in str(err.value)


def test_callbacks_loggers_and_plugins_of_the_package_carry_override_on_lightning_methods():
    """``@override`` on every method that overrides a Callback / Logger / CheckpointIO method."""
    import lightning_hooks.callbacks as callbacks
    import lightning_hooks.loggers as loggers
    from lightning_hooks import families

    adapters = [family.adapter for family in families.registered()]
    classes = [getattr(callbacks, n) for n in callbacks.__all__] + [loggers.VisdomLogger, *adapters]
    missing = []
    for cls in classes:
        bases = [b for b in (lightning_api.Callback, lightning_api.Logger, lightning_api.TorchCheckpointIO)
                 if issubclass(cls, b)]  # fmt: skip
        assert bases, cls
        for klass in cls.__mro__:
            if not klass.__module__.startswith("lightning_hooks.") or klass in bases:
                continue
            for name, fn in vars(klass).items():
                fn = fn.fget if isinstance(fn, property) else fn
                if callable(fn) and not name.startswith("__") and any(hasattr(b, name) for b in bases):
                    if not getattr(fn, "__override__", False):
                        missing.append(f"{klass.__qualname__}.{name}")
    assert not missing, f"add @override to {missing}"


# ---------------------------------------------------------------------------------------------- internals
def test_is_overridden_reads_one_wrapped_and_the_code(ns):
    """Lightning's is_overridden unwraps ``__wrapped__`` once and compares ``__code__``; PatchedMethod keeps the
    answer for a patched step, also under a further ``functools.wraps`` wrapper (a second adapter)."""

    class Step(lightning_api.PatchedMethod):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self.original(*args, **kwargs)

    class NoStep(ns.LightningModule):
        pass

    model, bare = _boring(ns)(), NoStep()
    assert lightning_api.is_overridden("training_step", model)
    assert not lightning_api.is_overridden("training_step", bare)
    for module in (model, bare):
        expected = lightning_api.is_overridden("training_step", module)
        undo = lightning_api.patch_method(module, "training_step", Step(module.training_step))
        assert lightning_api.is_overridden("training_step", module) == expected
        outer = functools.wraps(module.training_step)(lambda *a, **k: None)
        undo_outer = lightning_api.patch_method(module, "training_step", outer)
        assert lightning_api.is_overridden("training_step", module) == expected
        undo_outer()
        undo()
        assert "training_step" not in vars(module)
    assert set(inspect.signature(lightning_api.is_overridden).parameters) == {"method", "module"}
    helpers = importlib.import_module(f"{ns.__name__}.utilities.model_helpers")
    assert list(inspect.signature(helpers.is_overridden).parameters) == ["method_name", "instance", "parent"]


def test_patched_module_method_and_strategy_step_are_what_the_fit_calls(ns, tmp_path):
    """Lightning looks module hooks and the strategy's training_step up on the instances, so patches set there run
    (module step inside the strategy step); undoing restores what the instance had."""
    calls: list[str] = []

    class ModuleStep(lightning_api.PatchedMethod):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            calls.append("module")
            return self.original(*args, **kwargs)

    class StrategyStep:
        def __init__(self, original: Any) -> None:
            self.original = original

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            result = self.original(*args, **kwargs)
            calls.append("strategy")
            return result

    class Patcher(ns.Callback):
        def setup(self, trainer, pl_module, stage):
            self.undo = [lightning_api.patch_method(pl_module, "training_step", ModuleStep(pl_module.training_step)),
                         lightning_api.wrap_strategy_training_step(trainer, StrategyStep)]  # fmt: skip

        def teardown(self, trainer, pl_module, stage):
            for undo in self.undo:
                undo()

    model, trainer = _boring(ns)(), _trainer(ns, tmp_path, callbacks=[Patcher()], limit_val_batches=0)
    own = model.training_step  # a step the user set on the instance comes back
    model.training_step = own
    trainer.fit(model)
    assert calls == ["module", "strategy"] * 2
    assert vars(model)["training_step"] is own and "training_step" not in vars(trainer.strategy)


def test_load_combined_loader_states_is_the_fit_loops_no_argument_method(ns, tmp_path):
    trainer = _trainer(ns, tmp_path)
    method = trainer.fit_loop._load_combined_loader_states
    assert not inspect.signature(method).parameters
    assert trainer.fit_loop._combined_loader_states_to_load == []
    lightning_api.load_combined_loader_states(trainer)  # nothing restored: a no-op


def test_load_combined_loader_states_applies_a_restored_mid_epoch_loader_state(ns, tmp_path):
    """Lightning restores a mid-epoch loader state after ``on_fit_start`` and applies it when it sets up the train
    data; a loader set up earlier (by a hook host) gets it only through ``load_combined_loader_states``."""

    class Loader(torch.utils.data.DataLoader):
        def state_dict(self) -> dict[str, int]:
            return {"position": 3}

        def load_state_dict(self, state: dict[str, int]) -> None:
            loaded.append(state)

    loaded: list[dict[str, int]] = []

    class Model(_boring(ns)):
        def train_dataloader(self):
            return Loader(torch.randn(8, 32), batch_size=2)

    trainer = _trainer(ns, tmp_path, max_steps=2, limit_val_batches=0,
                       callbacks=[ns.callbacks.ModelCheckpoint(dirpath=tmp_path, save_last=True)],
                       enable_checkpointing=True)  # fmt: skip
    trainer.fit(Model())
    seen: list[list[dict[str, int]]] = []

    class Probe(ns.Callback):
        def on_fit_start(self, trainer, pl_module):  # a host sizing the loader before Lightning restores the loops
            trainer.fit_loop.setup_data()

        def on_train_start(self, trainer, pl_module):
            seen.append(list(loaded))
            lightning_api.load_combined_loader_states(trainer)
            seen.append(list(loaded))

    resumed = _trainer(ns, tmp_path, max_steps=3, limit_val_batches=0, callbacks=[Probe()])
    resumed.fit(Model(), ckpt_path=str(tmp_path / "last.ckpt"))
    assert seen == [[], [{"position": 3}]]
    assert loaded == [{"position": 3}]  # Lightning's own call later finds nothing left to apply


def test_evaluation_metrics_hold_only_the_ending_loops_metrics(ns, tmp_path):
    seen: dict[str, Any] = {}

    class Model(_boring(ns)):
        def training_step(self, batch, batch_idx):
            out = super().training_step(batch, batch_idx)
            self.log("train_metric", 1.0)
            return out

        def validation_step(self, batch, batch_idx):
            self.log("val_metric", 2.0)

        def test_step(self, batch, batch_idx):
            self.log("test_metric", 3.0)

    class Probe(ns.Callback):
        def on_validation_end(self, trainer, pl_module):
            seen["val"] = lightning_api.evaluation_metrics(trainer)

        def on_test_end(self, trainer, pl_module):
            seen["test"] = lightning_api.evaluation_metrics(trainer)

    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=1, limit_train_batches=2)
    trainer.fit(Model())
    trainer.test(Model(), verbose=False)
    assert {k: float(v) for k, v in seen["val"].items()} == {"val_metric": 2.0}
    assert {k: float(v) for k, v in seen["test"].items()} == {"test_metric": 3.0}
    assert lightning_api.evaluation_metrics(trainer) is None  # no loop runs


def test_flat_hyperparams_is_what_lightnings_loggers_log():
    from argparse import Namespace

    params = Namespace(model={"depth": 2, "sizes": [1, 2]}, lr=0.1, tags=None)
    assert lightning_api.flat_hyperparams(params) == {"model/depth": 2, "model/sizes": "[1, 2]", "lr": 0.1, "tags": "None"}


def test_replays_saved_batch_tells_whether_a_batch_end_checkpoint_runs_its_batch_again(ns, tmp_path):
    """Lightning 2.4 resumes a checkpoint written in on_train_batch_end at that same batch; 2.5+ after it."""

    class Save(ns.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if batch_idx == 1:
                trainer.save_checkpoint(tmp_path / "batch_end.ckpt")

    class Record(ns.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append(batch_idx)

    seen: list[int] = []
    _trainer(ns, tmp_path, max_steps=3, limit_val_batches=0, callbacks=[Save()]).fit(_boring(ns)())
    checkpoint = torch.load(tmp_path / "batch_end.ckpt", weights_only=False)
    resumed = _trainer(ns, tmp_path, max_steps=4, limit_val_batches=0, callbacks=[Record()])
    resumed.fit(_boring(ns)(), ckpt_path=tmp_path / "batch_end.ckpt")
    replays = lightning_api.replays_saved_batch(resumed, checkpoint)
    assert seen == ([1, 2] if replays else [2, 3])
    assert replays == (ns.__version__.startswith("2.4."))
    assert not lightning_api.replays_saved_batch(resumed, {})  # a weights-only checkpoint has no loops


def test_mid_epoch_resume_warning_is_what_lightning_warns_on_resuming_inside_an_epoch(ns, tmp_path):
    """A checkpoint written inside an epoch, resumed from a loader without state: Lightning warns in these words."""

    class Save(ns.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if batch_idx == 1:
                trainer.save_checkpoint(tmp_path / "inside.ckpt")

    _trainer(ns, tmp_path, max_steps=3, limit_val_batches=0, callbacks=[Save()]).fit(_boring(ns)())
    with pytest.warns(UserWarning, match=re.escape(lightning_api.MID_EPOCH_RESUME_WARNING)):
        _trainer(ns, tmp_path, max_steps=4, limit_val_batches=0).fit(_boring(ns)(), ckpt_path=tmp_path / "inside.ckpt")


def test_mute_mid_epoch_resume_warning_until_unmuted():
    """The filter ignores the warning until its undo, which removes it alone (a filter added meanwhile stays)."""
    caution = lightning_api.MID_EPOCH_RESUME_WARNING + " and your dataloader is not resumable."
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        unmute = lightning_api.mute_mid_epoch_resume_warning()
        warnings.filterwarnings("ignore", message="another")
        warnings.warn(caution, UserWarning, stacklevel=1)
        assert seen == []
        unmute()
        unmute()  # idempotent
        warnings.warn(caution, UserWarning, stacklevel=1)
        warnings.warn("another", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == [caution]


def test_train_data_setup_and_batch_counters(ns, tmp_path):
    """setup_train_data sizes the loader before the loop does; the counters count over epochs (4 batches each)."""
    seen: list[tuple[int, int, int]] = []

    class Probe(ns.Callback):
        def on_fit_start(self, trainer, pl_module):
            assert trainer.num_training_batches == float("inf")  # not sized yet
            lightning_api.setup_train_data(trainer)
            seen.append((-1, int(trainer.num_training_batches), lightning_api.train_batches_fetched(trainer)))

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append((batch_idx, lightning_api.train_batch_index(trainer), lightning_api.train_batches_fetched(trainer)))

    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=2, limit_train_batches=4,
                       limit_val_batches=0)  # fmt: skip
    trainer.fit(_boring(ns)())
    assert seen == [(-1, 4, 0)] + [(i % 4, i, i + 1) for i in range(8)]


def test_train_data_source_get_set_and_replace_train_loader(ns, tmp_path):
    """The fit loop reads its train loader from ``_data_source`` (a ``_DataLoaderSource``) at each ``setup_data``;
    ``replace_train_loader(now=True)`` builds the new loader at once, with the sampler at the current epoch."""
    epochs: list[int] = []

    class Sampler(torch.utils.data.SequentialSampler):
        def set_epoch(self, epoch: int) -> None:
            epochs.append(epoch)

    data = torch.randn(6, 32)
    new = torch.utils.data.DataLoader(data, batch_size=2, sampler=Sampler(data))
    seen: list[Any] = []

    class Probe(ns.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            source = lightning_api.train_data_source(trainer)
            connector = importlib.import_module(f"{ns.__name__}.trainer.connectors.data_connector")
            assert isinstance(source, connector._DataLoaderSource)
            seen.append(lightning_api.train_epoch_pending(trainer))
            if trainer.current_epoch == 1:
                lightning_api.replace_train_loader(trainer, new, now=lightning_api.train_epoch_pending(trainer))

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append(len(batch))
            assert not lightning_api.train_epoch_pending(trainer)

    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=2, limit_val_batches=0)
    trainer.fit(_boring(ns)(), torch.utils.data.DataLoader(torch.randn(4, 32), batch_size=4))
    assert seen == [True, 4, True, 2, 2, 2] and epochs[0] == 1 and trainer.train_dataloader is new
    assert issubclass(lightning_api.DataLoaderSource, importlib.import_module(
        f"{lightning_api.pl.__name__}.trainer.connectors.data_connector")._DataLoaderSource)
    source = lightning_api.train_data_source(trainer)
    lightning_api.set_train_data_source(trainer, "other")
    assert trainer.fit_loop._data_source == "other"
    lightning_api.set_train_data_source(trainer, source)
    assert {"instance", "name"} <= set(inspect.signature(lightning_api.DataLoaderSource).parameters)


def test_refetch_train_batches_draws_the_batch_fetched_ahead_again_from_the_iterator(ns, tmp_path):
    """With a loader without length the fetcher holds the next batch when a batch starts; ``refetch_train_batches``
    drops it and draws it again from the iterator, so a source switched in ``on_train_batch_start`` feeds the next
    batch (and the fetcher's count stays the batches handed out plus the one ahead)."""
    source = {"data": iter(torch.full((1, 32), float(i)) for i in range(100))}

    class Switchable(torch.utils.data.IterableDataset):
        def __iter__(self):
            while True:
                yield next(source["data"])[0]

    seen: list[Any] = []

    class Probe(ns.Callback):
        def on_train_start(self, trainer, pl_module):
            seen.append(lightning_api.refetch_train_batches(trainer))  # batch 0 was fetched in setup_data

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append(int(batch[0, 0]))
            if batch_idx == 1:
                source["data"] = iter(torch.full((1, 32), float(-i)) for i in range(1, 100))
                seen.append(lightning_api.refetch_train_batches(trainer))
                seen.append(trainer.fit_loop._data_fetcher.fetched)

    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=4, limit_val_batches=0)
    assert lightning_api.refetch_train_batches(trainer) == 0  # no fit yet: nothing fetched ahead
    trainer.fit(_boring(ns)(), torch.utils.data.DataLoader(Switchable(), batch_size=1))
    # batch 0 refetched at train start (1, not 0), switch at batch 1: batch 2 comes from the new source
    assert seen == [1, 1, 2, 1, 3, -1, -2]


def test_fetch_train_batches_when_run_draws_each_batch_at_its_step_for_that_trainer_only(ns, tmp_path):
    """A loader without length: Lightning draws batch 0 at its data setup and each next batch before the current one
    runs; with ``fetch_train_batches_when_run`` each batch is drawn right before its ``on_train_batch_start`` (nothing
    at setup), for that trainer only, and the undo gives Lightning's own fetching back."""
    events: list[Any] = []

    class Counting(torch.utils.data.IterableDataset):
        def __iter__(self):
            for i in range(100):
                events.append(("drawn", i))
                yield torch.full((32,), float(i))

    class Probe(ns.Callback):
        def on_train_start(self, trainer, pl_module):
            events.append("train_start")

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            events.append(("step", int(batch[0, 0])))

    def fit(when_run: bool) -> list[Any]:
        events.clear()
        trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=2, limit_val_batches=0)
        undo = lightning_api.fetch_train_batches_when_run(trainer) if when_run else lambda: None
        other = _trainer(ns, tmp_path, max_steps=1, limit_val_batches=0)  # another trainer keeps Lightning's fetching
        other.fit(_boring(ns)(), torch.utils.data.DataLoader(Counting(), batch_size=1))
        assert events[:2] == [("drawn", 0), ("drawn", 1)], events
        events.clear()
        trainer.fit(_boring(ns)(), torch.utils.data.DataLoader(Counting(), batch_size=1))
        undo()
        return list(events)

    assert fit(True) == ["train_start", ("drawn", 0), ("step", 0), ("drawn", 1), ("step", 1)]
    assert fit(False) == [("drawn", 0), "train_start", ("drawn", 1), ("step", 0), ("drawn", 2), ("step", 1)]


def test_validate_after_and_end_train_epoch_at_steer_the_fit(ns, tmp_path):
    """``val_check_batch`` set before a batch ends decides validation there; bounding the epoch loop's
    ``max_steps`` ends the fit after that step."""
    validated: list[int] = []

    class Probe(ns.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            lightning_api.validate_after(trainer, 1 if batch_idx == 1 else float("inf"))
            if batch_idx == 2:
                lightning_api.end_train_epoch_at(trainer, trainer.global_step + 1)

        def on_validation_start(self, trainer, pl_module):
            validated.append(trainer.global_step)

    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=1, limit_train_batches=8)
    trainer.fit(_boring(ns)())
    assert validated == [2] and trainer.global_step == 3


def test_wrap_fit_loop_run_wraps_the_loop_fit_runs_which_skips_a_finished_fit(ns, tmp_path):
    """``fit`` calls the wrapped ``fit_loop.run`` after restoring the checkpoint, before the strategy's teardown; for a
    fit resumed at ``max_epochs`` it returns without ``on_train_start`` / ``on_train_end``; the undo restores it."""
    seen: list[str] = []

    class Probe(ns.Callback):
        def setup(self, trainer, pl_module, stage):
            def wrap(original):
                def run():
                    seen.append(f"run from epoch {trainer.current_epoch}")
                    original()
                    seen.append("returned")

                return run

            self.undo = lightning_api.wrap_fit_loop_run(trainer, wrap)

        def on_train_start(self, trainer, pl_module):
            seen.append("on_train_start")

        def on_train_end(self, trainer, pl_module):
            seen.append("on_train_end")

        def on_fit_end(self, trainer, pl_module):
            self.undo()
            seen.append(f"undone {'run' not in vars(trainer.fit_loop)}")

    first = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=1, limit_train_batches=2)
    first.fit(_boring(ns)())
    first.save_checkpoint(tmp_path / "finished.ckpt")
    assert seen == ["run from epoch 0", "on_train_start", "on_train_end", "returned", "undone True"]
    seen.clear()
    again = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=1, limit_train_batches=2)
    again.fit(_boring(ns)(), ckpt_path=tmp_path / "finished.ckpt")
    assert seen == ["run from epoch 1", "returned", "undone True"]


def test_validate_now_runs_the_fits_validation_from_a_callback(ns, tmp_path):
    """``validate_now`` at train start runs the validation loop inside ``fit``; training goes on after it."""
    seen: list[tuple[str, bool]] = []

    class Probe(ns.Callback):
        def on_train_start(self, trainer, pl_module):
            lightning_api.validate_now(trainer)
            seen.append(("after", trainer.training))

        def on_validation_start(self, trainer, pl_module):
            seen.append(("validation", trainer.validating))

    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=1, limit_val_batches=1, num_sanity_val_steps=0,
                       check_val_every_n_epoch=None, val_check_interval=100)  # fmt: skip
    trainer.fit(_boring(ns)())
    assert seen == [("validation", True), ("after", True)] and trainer.global_step == 1


def test_start_fit_after_continues_at_the_epoch_and_step(ns, tmp_path):
    """start_fit_after at on_fit_start: the fit runs the epochs left, counting epochs and steps on from those given."""
    seen = []

    class Probe(ns.Callback):
        def on_fit_start(self, trainer, pl_module):
            lightning_api.start_fit_after(trainer, 2, 7)

        def on_train_epoch_start(self, trainer, pl_module):
            seen.append((trainer.current_epoch, trainer.global_step))

    class Counted(_boring(ns)):
        def train_dataloader(self):
            loader = super().train_dataloader()

            class Loader(type(loader)):
                def __iter__(self):
                    seen.append("iter")
                    return super().__iter__()

            return Loader(loader.dataset, batch_size=loader.batch_size)

    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_epochs=4, max_steps=-1, limit_train_batches=2,
                       limit_val_batches=0)
    trainer.fit(Counted())
    # one loader iterator per epoch (made after on_train_epoch_start), the first one built at setup_data
    assert seen == ["iter", (2, 7), (3, 9), "iter"] and trainer.current_epoch == 4 and trainer.global_step == 11


def test_fit_loop_state_and_set_optimizer_steps(ns, tmp_path):
    """The fit loop's state has ``epoch_progress``; set_optimizer_steps sets what ``global_step`` reads."""

    class Probe(ns.Callback):
        def on_train_start(self, trainer, pl_module):
            state = lightning_api.fit_loop_state(trainer)
            assert {"total", "current"} <= set(state["epoch_progress"])
            lightning_api.set_optimizer_steps(trainer, 5)
            assert trainer.global_step == 5 and trainer.fit_loop.epoch_loop._batches_that_stepped == 5

    class Manual(_boring(ns)):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            loss = self.step(batch)
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()

    for model in (_boring(ns)(), Manual()):
        _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=7, limit_val_batches=0).fit(model)


def test_set_train_batches_done(ns, tmp_path):
    """set_train_batches_done sets where ``train_batch_index`` counts from: the next batch is number ``batches``."""
    seen: list[tuple[int, int]] = []

    class Probe(ns.Callback):
        def on_train_start(self, trainer, pl_module):
            lightning_api.set_train_batches_done(trainer, 6)

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append((batch_idx, lightning_api.train_batch_index(trainer)))

    _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=1, limit_train_batches=2,
             limit_val_batches=0).fit(_boring(ns)())  # fmt: skip
    assert seen == [(0, 6), (1, 7)]


def test_call_before_backward_runs_callbacks_then_module(ns, tmp_path):
    calls: list[str] = []

    class Model(_boring(ns)):
        def on_before_backward(self, loss):
            calls.append("module")

    class Probe(ns.Callback):
        def on_before_backward(self, trainer, pl_module, loss):
            calls.append("callback")

        def on_train_start(self, trainer, pl_module):
            lightning_api.call_before_backward(trainer, torch.tensor(1.0))
            calls.append("|")

    _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=1, limit_val_batches=0).fit(Model())
    assert calls == ["callback", "module", "|", "callback", "module"]


def test_sampler_inside_wrapper_finds_the_loaders_own_sampler_in_either_namespace():
    sampler = torch.utils.data.SequentialSampler(range(4))
    for fabric in lightning_api.FABRICS:
        wrapper = importlib.import_module(f"{fabric.__name__}.utilities.distributed").DistributedSamplerWrapper
        assert lightning_api.sampler_inside_wrapper(wrapper(sampler, num_replicas=1, rank=0)) is sampler
    assert lightning_api.sampler_inside_wrapper(sampler) is None


def test_ddp_kwargs_are_the_arguments_the_ddp_strategy_wraps_the_model_with(ns):
    strategy = ns.strategies.DDPStrategy(find_unused_parameters=True)
    kwargs = lightning_api.ddp_kwargs(strategy)
    assert kwargs == {"find_unused_parameters": True}
    kwargs.setdefault("bucket_cap_mb", 7)  # what a module's setup adds before the strategy wraps it
    assert strategy._ddp_kwargs["bucket_cap_mb"] == 7
    assert lightning_api.ddp_kwargs(ns.strategies.SingleDeviceStrategy("cpu")) is None


@pytest.mark.parametrize("options", [{}, dict(accelerator="cpu", devices=2), dict(accelerator="cpu", devices=3, num_nodes=2),
                                     dict(accelerator="cpu", devices=2, strategy="ddp_spawn", max_epochs=3)])  # fmt: skip
def test_world_size_is_the_trainers_without_building_one(options, tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        expected = lightning_api.pl.Trainer(default_root_dir=tmp_path, logger=False, **options).world_size
        assert any("GPU available" in r.getMessage() for r in caplog.records)  # the banner a Trainer logs
        caplog.clear()
        assert lightning_api.world_size(**options) == expected
        assert not caplog.records


def test_describe_train_epochs_rewrites_a_rich_bars_epoch_description_and_undoes_it(ns):
    import rich  # noqa: F401  (RichProgressBar needs it)

    bar = ns.callbacks.RichProgressBar()
    bar._trainer = type("T", (), {"max_epochs": 3})()  # what _get_train_description reads
    lightnings = bar._get_train_description(1)
    undo = lightning_api.describe_train_epochs(bar, lambda epoch, text: f"{text}|{epoch}")
    assert bar._get_train_description(1) == f"{lightnings}|1" and lightnings.strip() == "Epoch 1/2"
    undo()
    assert bar._get_train_description(1) == lightnings
    assert lightning_api.describe_train_epochs(ns.callbacks.TQDMProgressBar(), lambda e, t: t) is None


def test_default_checkpoint_io_is_a_plain_torch_checkpoint_io_of_either_namespace(ns, tmp_path):
    trainer = _trainer(ns, tmp_path)
    assert lightning_api.default_checkpoint_io(trainer.strategy.checkpoint_io)
    assert not lightning_api.default_checkpoint_io(lightning_api.TorchCheckpointIO())


def test_rich_progress_bar_describes_the_train_epoch_through_train_description():
    import rich  # noqa: F401  (RichProgressBar needs it)

    class Bar(lightning_api.RichProgressBar):
        def train_description(self, current_epoch: int) -> str:
            return f"E{current_epoch}"

    bar = Bar()
    assert bar._get_train_description(3) == "E3"
    base = importlib.import_module(f"{lightning_api.pl.__name__}.callbacks.progress").RichProgressBar
    assert list(inspect.signature(base._get_train_description).parameters) == ["self", "current_epoch"]


def test_restart_epoch_at_start_reruns_the_epoch_a_mid_epoch_checkpoint_was_written_in(ns, tmp_path):
    """A checkpoint written in ``on_train_batch_end`` of the second batch of epoch 1 (4 batches an epoch): resumed
    as rewritten, epoch 1 runs all its batches again from ``batch_idx`` 0, ``global_step`` going on from 6; a
    checkpoint written between epochs is left as it is."""

    class Save(ns.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.current_epoch == 1 and batch_idx == 1:
                trainer.save_checkpoint(tmp_path / "mid.ckpt")

        def on_train_epoch_end(self, trainer, pl_module):
            if trainer.current_epoch == 0:
                trainer.save_checkpoint(tmp_path / "end.ckpt")

    trainer = _trainer(ns, tmp_path, max_steps=-1, max_epochs=2, limit_train_batches=4, limit_val_batches=0,
                       callbacks=[Save()])  # fmt: skip
    trainer.fit(_boring(ns)())
    checkpoint = torch.load(tmp_path / "mid.ckpt", weights_only=False)
    assert lightning_api.restart_epoch_at_start(checkpoint)
    torch.save(checkpoint, tmp_path / "restart.ckpt")
    end = torch.load(tmp_path / "end.ckpt", weights_only=False)
    assert not lightning_api.restart_epoch_at_start(end)
    seen: list[tuple[int, int, int]] = []

    class Probe(ns.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append((trainer.current_epoch, batch_idx, trainer.global_step))

    resumed = _trainer(ns, tmp_path, max_steps=-1, max_epochs=2, limit_train_batches=4, limit_val_batches=0,
                       callbacks=[Probe()])  # fmt: skip
    resumed.fit(_boring(ns)(), ckpt_path=tmp_path / "restart.ckpt")
    assert seen == [(1, 0, 6), (1, 1, 7), (1, 2, 8), (1, 3, 9)]


def test_start_next_epoch_resumes_a_last_batch_checkpoint_at_the_next_epochs_start(ns, tmp_path):
    """A checkpoint written in ``on_train_batch_end`` of epoch 0's last batch (4 batches an epoch): resumed as
    rewritten, epoch 1 starts with ``on_train_epoch_start`` before its first batch, ``global_step`` going on from 4 and
    epoch 0 not run again; a checkpoint written inside an epoch or between epochs is left as it is."""

    class Save(ns.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.current_epoch == 0 and batch_idx in (1, 3):
                trainer.save_checkpoint(tmp_path / f"batch{batch_idx}.ckpt")

        def on_train_epoch_end(self, trainer, pl_module):
            if trainer.current_epoch == 0:
                trainer.save_checkpoint(tmp_path / "end.ckpt")

    trainer = _trainer(ns, tmp_path, max_steps=-1, max_epochs=2, limit_train_batches=4, limit_val_batches=0,
                       callbacks=[Save()])  # fmt: skip
    trainer.fit(_boring(ns)())
    for other in ("batch1.ckpt", "end.ckpt"):
        checkpoint = torch.load(tmp_path / other, weights_only=False)
        assert not lightning_api.written_at_last_batch(checkpoint), other
        assert not lightning_api.start_next_epoch(checkpoint), other
    checkpoint = torch.load(tmp_path / "batch3.ckpt", weights_only=False)
    assert lightning_api.written_at_last_batch(checkpoint)
    assert lightning_api.start_next_epoch(checkpoint)
    torch.save(checkpoint, tmp_path / "next.ckpt")
    seen: list[tuple[Any, ...]] = []

    class Probe(ns.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            seen.append(("epoch", trainer.current_epoch))

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append((trainer.current_epoch, batch_idx, trainer.global_step))

    resumed = _trainer(ns, tmp_path, max_steps=-1, max_epochs=2, limit_train_batches=4, limit_val_batches=0,
                       callbacks=[Probe()])  # fmt: skip
    resumed.fit(_boring(ns)(), ckpt_path=tmp_path / "next.ckpt")
    assert seen == [("epoch", 1), (1, 0, 4), (1, 1, 5), (1, 2, 6), (1, 3, 7)]


def test_run_pending_validation_resumes_a_last_batch_checkpoint_with_that_epochs_validation(ns, tmp_path):
    """A checkpoint written in ``on_train_batch_end`` of epoch 0's last batch (2 batches an epoch), before its
    validation: rewritten in ``on_load_checkpoint`` (Lightning 2.5 and later), the resumed fit runs epoch 0's
    validation, ends epoch 0 without running a batch of it, then runs epoch 1 from its ``on_train_epoch_start``,
    ``global_step`` going on from 2; as written, 2.6 goes on with epoch 1 and never runs it. Left as it is on 2.4 (which
    runs the batch again, then validates), and where the fit does not validate at that epoch's end."""

    class Save(ns.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.current_epoch == 0 and batch_idx == 1:
                trainer.save_checkpoint(tmp_path / "last_batch.ckpt")

    trainer = _trainer(ns, tmp_path, max_steps=-1, max_epochs=1, limit_train_batches=2, callbacks=[Save()])
    trainer.fit(_boring(ns)())
    newer = Version(ns.__version__) >= Version("2.5")
    for options, rewritten in (({}, newer), ({"limit_val_batches": 0}, False), ({"check_val_every_n_epoch": 2}, False)):
        seen: list[Any] = []

        class Probe(ns.Callback):
            def on_load_checkpoint(self, trainer, pl_module, checkpoint):
                seen.append(("rewritten", lightning_api.run_pending_validation(trainer, checkpoint)))

            def on_train_epoch_start(self, trainer, pl_module):
                seen.append(("epoch", trainer.current_epoch))

            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                seen.append((trainer.current_epoch, batch_idx, trainer.global_step))

            def on_validation_start(self, trainer, pl_module):
                seen.append(("validation", trainer.current_epoch))

            def on_train_epoch_end(self, trainer, pl_module):
                seen.append(("end", trainer.current_epoch))

        resumed = _trainer(ns, tmp_path, max_steps=-1, max_epochs=2, limit_train_batches=2, callbacks=[Probe()],
                           **options)  # fmt: skip
        resumed.fit(_boring(ns)(), ckpt_path=tmp_path / "last_batch.ckpt")
        assert seen[0] == ("rewritten", rewritten), options
        if rewritten:
            assert seen[1:] == [("validation", 0), ("end", 0), ("epoch", 1), (1, 0, 2), (1, 1, 3), ("validation", 1),
                                ("end", 1)]  # fmt: skip


def test_start_epoch_afresh_starts_the_epoch_after_a_fit_cut_short_at_its_first_batch(ns, tmp_path):
    """A fit of 5 batches an epoch stopped at ``max_steps=7`` (inside epoch 1) and saved: resumed as written to 14
    steps, epoch 2 starts at batch 2 (3 batches); rewritten, at batch 0 (5 batches), ``global_step`` going on from 7.
    A checkpoint written inside an epoch, or at an epoch's last batch, is left as it is."""

    class Save(ns.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.global_step in (3, 5):
                trainer.save_checkpoint(tmp_path / f"step{trainer.global_step}.ckpt")

    seen: list[tuple[int, int, int]] = []

    class Probe(ns.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append((trainer.current_epoch, batch_idx, trainer.global_step))

    trainer = _trainer(ns, tmp_path, max_steps=7, limit_train_batches=5, limit_val_batches=0, callbacks=[Save()])
    trainer.fit(_boring(ns)())
    trainer.save_checkpoint(tmp_path / "cut.ckpt")
    for other in ("step3.ckpt", "step5.ckpt"):
        assert not lightning_api.start_epoch_afresh(torch.load(tmp_path / other, weights_only=False)), other
    _trainer(ns, tmp_path, max_steps=10, limit_train_batches=5, limit_val_batches=0, callbacks=[Probe()]).fit(
        _boring(ns)(), ckpt_path=tmp_path / "cut.ckpt")  # fmt: skip
    assert seen == [(2, 2, 7), (2, 3, 8), (2, 4, 9)]  # as written: the cut epoch's batch count skips 2
    checkpoint = torch.load(tmp_path / "cut.ckpt", weights_only=False)
    assert lightning_api.start_epoch_afresh(checkpoint)
    torch.save(checkpoint, tmp_path / "afresh.ckpt")
    seen.clear()
    _trainer(ns, tmp_path, max_steps=10, limit_train_batches=5, limit_val_batches=0, callbacks=[Probe()]).fit(
        _boring(ns)(), ckpt_path=tmp_path / "afresh.ckpt")  # fmt: skip
    assert seen == [(2, 0, 7), (2, 1, 8), (2, 2, 9)]


def test_launch_processes_starts_nothing_for_one_process_and_launches_through_the_strategy(ns):
    """One process: nothing starts. Several: the strategy the Trainer would build launches them (its launcher, the
    script launcher that re-runs the command) and then sets up its environment (the process group); the run of 2
    processes is tests/families/mmcv/test_train_ddp.py."""
    assert lightning_api.launch_processes(accelerator="cpu", devices=1) == 1
    assert lightning_api.launch_processes(accelerator="cpu", devices=1, strategy="ddp") == 1
    connectors = importlib.import_module(f"{lightning_api.pl.__name__}.trainer.connectors.accelerator_connector")
    strategy = connectors._AcceleratorConnector(accelerator="cpu", devices=2, strategy="ddp").strategy
    launchers = importlib.import_module(f"{lightning_api.pl.__name__}.strategies.launchers.subprocess_script")
    assert isinstance(strategy.launcher, launchers._SubprocessScriptLauncher) and strategy.world_size == 2
    assert callable(strategy.launcher.launch) and callable(strategy.setup_environment)


def test_pending_train_loader_is_the_replaced_loader_until_the_fit_loop_builds_it(ns, tmp_path):
    """``pending_train_loader`` reads the loader ``replace_train_loader(now=False)`` set for the next epoch without
    building the train data; once the fit loop built it (or before any replacement) it is None."""
    new = torch.utils.data.DataLoader(torch.randn(6, 32), batch_size=2)
    seen: list[Any] = []

    class Probe(ns.Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            if trainer.current_epoch == 0:
                seen.append(lightning_api.pending_train_loader(trainer))
                lightning_api.replace_train_loader(trainer, new, now=False)
                seen.append(lightning_api.pending_train_loader(trainer))
                assert trainer.fit_loop._combined_loader is None  # reading built nothing

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.current_epoch == 1 and batch_idx == 0:
                seen.append(lightning_api.pending_train_loader(trainer))

    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=2, limit_val_batches=0)
    trainer.fit(_boring(ns)(), torch.utils.data.DataLoader(torch.randn(4, 32), batch_size=4))
    assert seen == [None, new, None] and trainer.train_dataloader is new


def test_drop_unset_wandb_anonymous_leaves_out_the_anonymous_none_wandb_warns_about(ns, tmp_path):
    pytest.importorskip("wandb")
    unset = ns.loggers.WandbLogger(save_dir=str(tmp_path), offline=True)
    assert unset._wandb_init["anonymous"] is None  # what Lightning hands wandb.init without anonymous=...
    lightning_api.drop_unset_wandb_anonymous(unset)
    assert "anonymous" not in unset._wandb_init and unset._wandb_init["dir"] == str(tmp_path)
    chosen = ns.loggers.WandbLogger(save_dir=str(tmp_path), offline=True, anonymous=True)
    lightning_api.drop_unset_wandb_anonymous(chosen)
    assert chosen._wandb_init["anonymous"] == "allow"  # the user's setting stays


def test_wandb_run_made_is_the_run_a_wandb_logger_started_or_none(ns, tmp_path, monkeypatch):
    """``WandbLogger`` starts its run when first used, on rank 0 only; before, and on another rank, there is none."""
    pytest.importorskip("wandb")
    for name in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    logger = ns.loggers.WandbLogger(save_dir=str(tmp_path), offline=True)
    assert lightning_api.wandb_run_made(logger) is None
    rank_zero_only = importlib.import_module(f"{ns.__name__}.utilities.rank_zero").rank_zero_only
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    assert type(logger.experiment).__name__ == "_DummyExperiment" and lightning_api.wandb_run_made(logger) is None
    monkeypatch.setattr(rank_zero_only, "rank", 0)
    run = logger.experiment
    try:
        assert lightning_api.wandb_run_made(logger) is run and type(run).__name__ == "Run"
    finally:
        run.finish()



def test_direct_optimizer_reads_answer_from_the_wrappers_own_class(ns):
    """Lightning builds a class per ``LightningOptimizer`` (``Lightning<Optimizer>``) and forwards the optimizer's
    attributes in ``__getattr__``: the properties go on that class alone, read the optimizer's objects and write to it."""
    wrapper_class = importlib.import_module(f"{ns.__name__}.core.optimizer").LightningOptimizer
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    wrapper, other = wrapper_class(optimizer), wrapper_class(torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1))
    assert type(wrapper) is not type(other) and type(wrapper).__bases__ == (wrapper_class, torch.optim.SGD)
    assert all(name not in vars(type(wrapper)) and name in vars(optimizer) for name in lightning_api.OPTIMIZER_READS)
    assert lightning_api.direct_optimizer_reads(wrapper) is wrapper
    assert all(isinstance(vars(type(wrapper))[name], property) for name in lightning_api.OPTIMIZER_READS)
    assert not any(name in vars(type(other)) for name in lightning_api.OPTIMIZER_READS)
    assert wrapper.param_groups is optimizer.param_groups and wrapper.state is optimizer.state
    optimizer.load_state_dict(optimizer.state_dict())  # replaces the optimizer's param_groups and state objects
    assert wrapper.param_groups is optimizer.param_groups and wrapper.defaults is optimizer.defaults
    wrapper.param_groups[0]["lr"] = 0.5
    assert optimizer.param_groups[0]["lr"] == 0.5
    assert lightning_api.direct_optimizer_reads(optimizer) is optimizer and "param_groups" not in vars(torch.optim.SGD)


def test_defer_train_iterators_makes_the_first_iterator_when_asked_or_at_the_first_batch(ns, tmp_path):
    """Lightning makes the fit's first train iterator at its data setup, before ``on_train_start`` and before the
    sampler gets the fit's epoch, and a later epoch's after every ``on_train_epoch_start`` hook; deferred, each is made
    when ``make_pending_train_iterator`` asks in ``on_train_epoch_start`` (the sampler at the fit's epoch 2, then 3),
    once (the epoch loop's own ``iter()`` keeps it, also for a loader rebuilt at that epoch's start), or else the
    first at the first batch drawn with the fetched count kept and the next where Lightning makes it; without the
    deferral (or after its undo) Lightning makes them as usual."""
    made: list[Any] = []

    class Sampler(torch.utils.data.DistributedSampler):
        pass

    class Loader(torch.utils.data.DataLoader):
        def __iter__(self):
            made.append(self.sampler.epoch)
            return super().__iter__()

    class Model(_boring(ns)):
        def train_dataloader(self):
            data = importlib.import_module(f"{ns.__name__}.demos.boring_classes").RandomDataset(32, 8)
            return Loader(data, batch_size=2, sampler=Sampler(data, num_replicas=1, rank=0, shuffle=True))

    class Probe(ns.Callback):
        def __init__(self, ask: bool) -> None:
            self.ask = ask

        def on_fit_start(self, trainer, pl_module):
            lightning_api.start_fit_after(trainer, 2, 8)

        def on_train_start(self, trainer, pl_module):
            made.append("train_start")

        def on_train_epoch_start(self, trainer, pl_module):
            made.append("epoch_start")
            if self.ask:
                made.append(lightning_api.make_pending_train_iterator(trainer))

    def fit(defer: bool, ask: bool, reload: int = 0) -> list[Any]:
        made.clear()
        trainer = _trainer(ns, tmp_path, callbacks=[Probe(ask)], max_steps=-1, max_epochs=4, use_distributed_sampler=False,
                           reload_dataloaders_every_n_epochs=reload)  # fmt: skip
        undo = lightning_api.defer_train_iterators(trainer) if defer else lambda: None
        again = lightning_api.defer_train_iterators(trainer) if defer else lambda: None  # defers once
        trainer.fit(Model())
        again()
        undo()
        assert trainer.global_step == 16 and lightning_api.train_batches_fetched(trainer) == 8  # 2 epochs of 4 batches
        return list(made)

    assert fit(defer=True, ask=True) == ["train_start", "epoch_start", 2, True, "epoch_start", 3, True]
    assert fit(defer=True, ask=False) == ["train_start", "epoch_start", 2, "epoch_start", 3]
    assert fit(defer=False, ask=True) == [0, "train_start", "epoch_start", False, "epoch_start", False, 3]
    # a loader rebuilt at an epoch's start: made once when asked, kept by the epoch loop's own iter() (not made again)
    assert fit(defer=True, ask=True, reload=1) == ["train_start", "epoch_start", 2, True, "epoch_start", 3, True]


def test_a_deferred_train_iterator_made_at_the_first_batch_of_a_resumed_epoch_keeps_its_batch_count(ns, tmp_path):
    """A fit resumed inside an epoch: its epoch loop counts the batches already run as fetched before it draws; the
    deferred iterator, made at that first draw, keeps them, so the epoch's last batch is known as such. Before that
    draw each ``before_first_draw`` runs with that count (Lightning 2.6 draws it without ``on_train_epoch_start``) and
    may make the iterator; ``first_train_batch_index`` reads, in ``on_train_epoch_start``, the batch the epoch starts
    at (2.4 calls the hook for the resumed epoch and runs batch 2 again; a later epoch starts at 0)."""
    last: list[tuple[int, bool]] = []
    seen: list[Any] = []

    class Probe(ns.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            seen.append(("epoch start", lightning_api.first_train_batch_index(trainer)))

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            last.append((batch_idx, trainer.fit_loop.epoch_loop.batch_progress.is_last_batch))

    class Save(ns.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if batch_idx == 2:
                trainer.save_checkpoint(tmp_path / "mid.ckpt")

    class Loader(torch.utils.data.DataLoader):
        def __iter__(self):
            seen.append("iter")
            return super().__iter__()

    def loader() -> torch.utils.data.DataLoader:
        return Loader(importlib.import_module(f"{ns.__name__}.demos.boring_classes").RandomDataset(32, 8), batch_size=2)

    first = _trainer(ns, tmp_path, callbacks=[Save()], max_steps=-1, max_epochs=1, limit_train_batches=4,
                     limit_val_batches=0)  # fmt: skip
    first.fit(_boring(ns)(), loader())
    trainer = _trainer(ns, tmp_path, callbacks=[Probe()], max_steps=-1, max_epochs=2, limit_train_batches=4,
                       limit_val_batches=0)  # fmt: skip

    def before_first_draw(fetched: int) -> None:
        seen.append(("draw", fetched))
        seen.append(lightning_api.make_pending_train_iterator(trainer))

    undo = lightning_api.defer_train_iterators(trainer, before_first_draw)
    seen.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's caution on a resume inside an epoch
        trainer.fit(_boring(ns)(), loader(), ckpt_path=tmp_path / "mid.ckpt")
    undo()
    if Version(ns.__version__) >= Version("2.5"):  # after batch 2, without on_train_epoch_start
        batches, resumed = [(3, True)], [("draw", 3), "iter", True]
    else:  # batch 2 again, after on_train_epoch_start (which made no iterator here)
        batches, resumed = [(2, False), (3, True)], [("epoch start", 2), ("draw", 2), "iter", True]
    assert last == [*batches, (0, False), (1, False), (2, False), (3, True)]
    assert seen == [*resumed, ("epoch start", 0), "iter"]  # the next epoch: Lightning's iter() after the hook


def test_defer_eval_iterators_makes_each_evaluations_iterator_when_asked_or_at_the_first_batch(ns, tmp_path):
    """Lightning makes a validation's (and a test's) iterator in its evaluation loop's ``reset()``, before
    ``on_validation_start``, in a fit after setting the sampler's epoch to its count of train epochs; deferred, it is
    made when ``make_pending_eval_iterator`` asks in ``on_validation_epoch_start`` / ``on_test_epoch_start`` (after
    the probe set the sampler's epoch to 7), or else at the first batch; never in the sanity check, which keeps
    Lightning's order (as without the deferral, or after its undo). (``trainer.test`` after the fit: Lightning set
    the test sampler's epoch to the fit's 2 when it built the loader.)"""
    made: list[Any] = []

    class Loader(torch.utils.data.DataLoader):
        def __iter__(self):
            made.append(("iter", self.sampler.epoch))
            return super().__iter__()

    class Model(_boring(ns)):
        def val_dataloader(self):
            data = importlib.import_module(f"{ns.__name__}.demos.boring_classes").RandomDataset(32, 4)
            return Loader(data, batch_size=2, sampler=torch.utils.data.DistributedSampler(data, num_replicas=1, rank=0))

        test_dataloader = val_dataloader

    class Probe(ns.Callback):
        def __init__(self, ask: bool) -> None:
            self.ask = ask

        def on_validation_start(self, trainer, pl_module):
            made.append("sanity" if trainer.sanity_checking else "start")

        def on_validation_epoch_start(self, trainer, pl_module):
            if self.ask and not trainer.sanity_checking:
                self.make(trainer, trainer.val_dataloaders)

        def on_test_epoch_start(self, trainer, pl_module):
            made.append("test")
            if self.ask:
                self.make(trainer, trainer.test_dataloaders)

        def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
            made.append(batch_idx)

        @staticmethod
        def make(trainer, loader):
            loader.sampler.set_epoch(7)
            made.append(lightning_api.make_pending_eval_iterator(trainer))

    def run(defer: bool, ask: bool) -> list[Any]:
        made.clear()
        trainer = _trainer(ns, tmp_path, callbacks=[Probe(ask)], max_steps=-1, max_epochs=2, limit_train_batches=2,
                           limit_val_batches=2, num_sanity_val_steps=1, use_distributed_sampler=False)  # fmt: skip
        undo = lightning_api.defer_eval_iterators(trainer) if defer else lambda: None
        again = lightning_api.defer_eval_iterators(trainer) if defer else lambda: None  # defers once
        trainer.fit(Model())
        trainer.test(Model(), verbose=False)
        again()
        undo()
        return list(made)

    sanity = [("iter", 0), "sanity", 0]
    assert run(defer=True, ask=True) == [*sanity, "start", ("iter", 7), True, 0, 1, "start", ("iter", 7), True, 0, 1,
                                         "test", ("iter", 7), True]  # fmt: skip
    assert run(defer=True, ask=False) == [*sanity, "start", ("iter", 0), 0, 1, "start", ("iter", 1), 0, 1, "test",
                                          ("iter", 2)]  # fmt: skip
    assert run(defer=False, ask=True) == [*sanity, ("iter", 0), "start", False, 0, 1, ("iter", 1), "start", False, 0, 1,
                                          ("iter", 2), "test", False]  # fmt: skip
