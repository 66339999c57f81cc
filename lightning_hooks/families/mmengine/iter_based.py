"""MMEngine's train loops' settings (``train_cfg``) on Lightning's fit loop, and ``IterBasedTrainLoop`` as one endless
train epoch with validation by iteration.

``train_cfg=dict(type="IterBasedTrainLoop", max_iters=N, val_interval=k)`` (or ``dict(by_epoch=False, ...)``) turns
the adapter's iteration-based mode on. Lightning then iterates :class:`Endless`, a view of the train loader without a
length that restarts the loader when it runs out (as MMEngine's ``_InfiniteDataloaderIterator``), so the whole run is
one Lightning epoch of ``max_iters`` batches. Hooks still see the loader itself (``runner.train_dataloader``, whose
``len()`` LoggerHook and param schedulers read). Before each validation check the host loop
(:class:`~lightning_hooks.families.mmengine.host_loop.MMEngineLoop`) sets
``trainer.val_check_batch`` from :meth:`IterLoopConfig.validates_at`, so validation runs exactly where
``IterBasedTrainLoop`` runs it (every ``val_interval`` iterations from ``val_begin``, ``dynamic_intervals``, and at
``max_iters``); the run ends at ``max_iters`` by bounding the epoch loop's ``max_steps`` (:func:`plan_iteration`).
An epoch-based ``train_cfg`` with ``val_begin`` / ``dynamic_intervals`` is planned the same way at each epoch's last
batch (:func:`plan_epoch`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.loaders import epoch_sampler
from lightning_hooks.core.triggers import Patch, Remove

_LOOPS = {"IterBasedTrainLoop": False, "EpochBasedTrainLoop": True}


class _ValSchedule:
    """MMEngine's validation schedule of a train loop: after every ``val_interval`` epochs (iterations) from
    ``val_begin`` on, the interval changing at ``dynamic_intervals``' milestones, and at the end of training."""

    val_interval: int
    val_begin: int
    dynamic_intervals: tuple[tuple[int, int], ...]

    @property
    def end(self) -> int:
        raise NotImplementedError

    def interval_at(self, it: int) -> int:
        """The validation interval once ``it`` epochs (iterations) are done (``_decide_current_val_interval``)."""
        if not self.dynamic_intervals:  # the facade's val_interval, read by hooks
            return self.val_interval
        milestones = [0, *(m for m, _ in self.dynamic_intervals)]
        intervals = [self.val_interval, *(i for _, i in self.dynamic_intervals)]
        return intervals[bisect.bisect(milestones, it + 1) - 1]

    def validates_at(self, it: int) -> bool:
        """Whether MMEngine's loop validates once ``it`` epochs (iterations) are done (asked at every iteration of an
        ``IterBasedTrainLoop``: a fixed interval is read without a call of :meth:`interval_at`)."""
        interval = self.interval_at(it) if self.dynamic_intervals else self.val_interval
        return it >= self.val_begin and (it % interval == 0 or it == self.end)


@dataclass(frozen=True)
class IterLoopConfig(_ValSchedule):
    """The settings of MMEngine's ``IterBasedTrainLoop`` (``train_cfg``), and the Trainer arguments they need."""

    max_iters: int
    val_interval: int = 1000
    val_begin: int = 1
    dynamic_intervals: tuple[tuple[int, int], ...] = ()

    @property
    def end(self) -> int:
        return self.max_iters

    def trainer_kwargs(self) -> dict[str, Any]:
        """``Trainer`` arguments of this loop: one endless epoch bounded by ``max_steps``, validation by iteration."""
        return dict(max_steps=self.max_iters, max_epochs=1, val_check_interval=self.val_interval,
                    check_val_every_n_epoch=None)  # fmt: skip  # arguments aligned under the call


@dataclass(frozen=True)
class EpochLoopConfig(_ValSchedule):
    """The settings of MMEngine's ``EpochBasedTrainLoop`` (``train_cfg``), and the Trainer arguments they need.

    Example: ``EpochLoopConfig(max_epochs=300, val_interval=10, val_begin=10, dynamic_intervals=((280, 1),))``
    validates after epochs 10, 20, ..., 280 and then after every epoch, as RTMDet's configs do.
    """

    max_epochs: int
    val_interval: int = 1
    val_begin: int = 1
    dynamic_intervals: tuple[tuple[int, int], ...] = ()

    @property
    def end(self) -> int:
        return self.max_epochs

    @property
    def scheduled(self) -> bool:
        """Whether the adapter decides at each epoch's end where to validate (:func:`plan_epoch`), because
        ``Trainer(check_val_every_n_epoch)`` cannot: ``val_begin``, ``dynamic_intervals``, or a last epoch that is
        no multiple of ``val_interval`` (MMEngine validates at ``max_epochs`` too)."""
        return self.val_begin != 1 or bool(self.dynamic_intervals) or self.max_epochs % self.val_interval != 0

    def trainer_kwargs(self) -> dict[str, Any]:
        every = 1 if self.scheduled else self.val_interval  # scheduled: every epoch is a candidate
        return dict(max_epochs=self.max_epochs, check_val_every_n_epoch=every)


def parse_train_cfg(train_cfg: dict[str, Any]) -> IterLoopConfig | EpochLoopConfig:
    """``train_cfg`` as MMEngine's ``Runner.build_train_loop`` reads it: ``type`` or ``by_epoch`` picks the loop;
    ``_scope_`` is the ``LOOPS`` registry's own key (the scope it looks ``type`` up in), no setting of the loop."""
    cfg = dict(train_cfg)
    cfg.pop("_scope_", None)
    kind = cfg.pop("type", None)
    by_epoch = cfg.pop("by_epoch", None)
    if kind is not None:
        name = kind if isinstance(kind, str) else getattr(kind, "__name__", repr(kind))
        if name not in _LOOPS:
            raise ValueError(
                f"MMEngineAdapter: train_cfg type {name!r} is not a loop the adapter can run on Lightning's fit loop. "
                f"Use 'EpochBasedTrainLoop' or 'IterBasedTrainLoop' (or by_epoch=True/False); a custom loop's "
                "run() has no Lightning counterpart: put its per-iteration work in a hook or the LightningModule."
            )
        if by_epoch is not None and by_epoch != _LOOPS[name]:
            raise ValueError(f"MMEngineAdapter: train_cfg has type={name!r} and by_epoch={by_epoch}: drop one of them")
        by_epoch = _LOOPS[name]
    if by_epoch is None:
        raise ValueError(
            f"MMEngineAdapter: train_cfg {train_cfg!r} names no loop: add by_epoch=True (EpochBasedTrainLoop) or "
            "by_epoch=False (IterBasedTrainLoop), as MMEngine's Runner requires."
        )
    try:
        dynamic = tuple((int(m), int(i)) for m, i in cfg.pop("dynamic_intervals", None) or ())
        return (EpochLoopConfig if by_epoch else IterLoopConfig)(dynamic_intervals=dynamic, **cfg)
    except TypeError as err:
        loop = "EpochBasedTrainLoop" if by_epoch else "IterBasedTrainLoop"
        raise ValueError(f"MMEngineAdapter: train_cfg {train_cfg!r} does not fit {loop}: {err}") from None


def plan_iteration(trainer: pl.Trainer, cfg: IterLoopConfig, done: int, stop_requested: bool) -> None:
    """Before Lightning's validation check after ``done`` iterations: validate where ``IterBasedTrainLoop`` does, and
    end the run at ``max_iters`` or once a hook set ``stop_training`` (after this check, as MMEngine's ``while``
    reads it), without the validation Lightning forces on ``should_stop``."""
    lightning_api.validate_after(trainer, 1 if done and cfg.validates_at(done) else float("inf"))
    end_if_done(trainer, cfg, done, stop_requested)


def plan_start(trainer: pl.Trainer, cfg: IterLoopConfig, done: int, stop_requested: bool) -> None:
    """At the start of a fit, fresh or resumed after ``done`` iterations: no validation before the next iteration
    ran, as ``IterBasedTrainLoop.run`` validates only after an iteration of its own, and the run ends at once if
    ``done`` reaches ``max_iters``.

    A resumed Lightning epoch loop would otherwise settle the validation check of the checkpoint's last iteration
    first (it fast-forwards its validation loop, which starts iterating the val loader and so draws a seed from
    torch's global generator, or re-runs a validation the checkpoint was written in): then the first resumed
    iteration draws other random numbers (SegFormer's drop path) than the Runner's."""
    lightning_api.validate_after(trainer, float("inf"))
    end_if_done(trainer, cfg, done, stop_requested)


def plan_epoch(trainer: pl.Trainer, cfg: EpochLoopConfig, done: int) -> None:
    """At the last batch of epoch ``done`` (1-based), before Lightning's validation check: validate there if
    ``EpochBasedTrainLoop`` does (``val_begin``, ``dynamic_intervals``, the last epoch), else not."""
    batches = trainer.num_training_batches
    lightning_api.validate_after(trainer, batches if cfg.validates_at(done) else batches + 1)


def end_if_done(trainer: pl.Trainer, cfg: IterLoopConfig, done: int, stop_requested: bool) -> None:
    """End the endless train epoch now if ``done`` iterations reach ``max_iters`` or a hook requested a stop."""
    if done >= cfg.max_iters or stop_requested:
        lightning_api.end_train_epoch_at(trainer, trainer.global_step)


class Endless:
    """The train loader as ``IterBasedTrainLoop`` iterates it: without end, restarting it (after ``set_epoch`` on its
    sampler, as ``_InfiniteDataloaderIterator``) when it runs out; a resumed run first skips ``skip()`` batches.
    Once ``redirect.iterator`` is an iterator (a hook assigned ``runner.train_loop.dataloader_iterator``: ``redirect``
    is the :class:`EndlessSource`, see :meth:`EndlessSource.redirect`), every later batch is ``next()`` of it, as
    MMEngine's loop draws it (an attribute read at every batch, no call).

    It has no ``len()``, so Lightning runs one epoch that ``max_steps`` ends. An ``InfiniteSampler`` loader is iterated
    once, as under MMEngine: iterating it anew would close the sampler's shared index generator.
    """

    def __init__(self, loader: Any, skip: Any, redirect: Any = None) -> None:
        self.loader = loader
        self._skip = skip
        self._redirect = redirect if redirect is not None else _NoRedirect()  # its iterator: a hook's, or None

    def __iter__(self) -> Iterator[Any]:
        epoch, skip = 0, self._skip()
        iterator = iter(self.loader)
        redirect = self._redirect
        while True:
            assigned = redirect.iterator
            if assigned is not None:
                yield next(assigned)
                continue
            try:
                batch = next(iterator)
            except StopIteration:
                epoch += 1
                sampler = epoch_sampler(self.loader)
                if sampler is not None:
                    sampler.set_epoch(epoch)
                iterator = iter(self.loader)
                try:
                    batch = next(iterator)
                except StopIteration:
                    raise RuntimeError(
                        "MMEngineAdapter (IterBasedTrainLoop): the train loader yields no batch after a restart; "
                        "it cannot feed an iteration-based run. Give it a sampler that can be iterated again."
                    ) from None
            if skip:
                skip -= 1
                continue
            yield batch


class _NoRedirect:
    """What a plain :class:`Endless` reads at every batch: no hook assigned an iterator."""

    iterator = None


class EndlessSource(lightning_api.DataLoaderSource):
    """Lightning's train data source, whose loader is served as :class:`Endless`."""

    def __init__(self, source: Any, skip: Any) -> None:
        super().__init__(source.instance, source.name)
        self.original = source
        self._skip = skip
        self._loader: Any = None
        #: the iterator a hook gave the loop (``dataloader_iterator``), which feeds every later batch; None: the loader
        self.iterator: Iterator[Any] | None = None

    @property
    def loader(self) -> Any:
        """The train loader, requested from the original source once. Hooks read it (``runner.train_dataloader``)
        without making Lightning start iterating it before a resumed run restored its iteration count; a hook may
        assign another (``runner.train_loop.dataloader = ...``), which, as under MMEngine, changes what hooks read
        but not the batches until it also assigns the iterator."""
        if self._loader is None:
            loader = self.original.dataloader()
            if isinstance(loader, (list, tuple, dict)) or not hasattr(loader, "__iter__"):
                raise TypeError(
                    f"MMEngineAdapter (IterBasedTrainLoop): the train data is {type(loader).__name__}; an "
                    "iteration-based run takes one train loader, as MMEngine's train_dataloader."
                )
            self._loader = loader
        return self._loader

    @loader.setter
    def loader(self, loader: Any) -> None:
        self._loader = loader

    def redirect(self, trainer: pl.Trainer, iterator: Iterator[Any]) -> None:
        """Draw every batch from ``iterator`` from the next one on, as ``IterBasedTrainLoop`` draws
        ``next(self.dataloader_iterator)`` at each iteration: the batch Lightning fetched ahead is fetched again."""
        if not hasattr(iterator, "__next__"):
            raise TypeError(
                f"runner.train_loop.dataloader_iterator = {type(iterator).__name__}: IterBasedTrainLoop calls next() "
                "on it at every iteration; assign an iterator, e.g. mmengine's _InfiniteDataloaderIterator(loader)."
            )
        self.iterator = iterator
        lightning_api.refetch_train_batches(trainer)

    def dataloader(self) -> Endless:
        return Endless(self.loader, self._skip, self)


@dataclass(frozen=True)
class EndlessTrainData(Patch):
    """Lightning's train data source, served as :class:`Endless` for an ``IterBasedTrainLoop`` fit (it skips the
    iterations a resumed run has done, the host loop's ``finished_iters``), each batch drawn when its iteration runs
    (``IterBasedTrainLoop`` calls ``next()`` at each iteration: a pipeline's random draws follow the hooks' and a
    validation's, not one batch ahead of them); removing it gives a later fit or a plain Trainer the loader as given
    and Lightning's fetching. Fires no row."""

    def __str__(self) -> str:
        return "Trainer's train data source"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        loop = adapter.loop
        serve_endless(trainer, skip=lambda: loop.finished_iters)
        fetch_ahead = lightning_api.fetch_train_batches_when_run(trainer)

        def remove() -> None:
            fetch_ahead()
            restore_source(trainer)

        return remove


#: the one :class:`EndlessTrainData` patch (installed for a fit with an ``IterBasedTrainLoop``)
ENDLESS_TRAIN_DATA = EndlessTrainData()


def serve_endless(trainer: pl.Trainer, skip: Any) -> None:
    """Make Lightning iterate the train loader as :class:`Endless` in this fit."""
    source = lightning_api.train_data_source(trainer)
    if not isinstance(source, EndlessSource):
        lightning_api.set_train_data_source(trainer, EndlessSource(source, skip))


def restore_source(trainer: pl.Trainer) -> None:
    """Undo :func:`serve_endless`, so a later fit or a plain Trainer sees the loader as given."""
    source = lightning_api.train_data_source(trainer)
    if isinstance(source, EndlessSource):
        lightning_api.set_train_data_source(trainer, source.original)
