"""The adapter callback every family shares: hook checks and ordering, patch installation, and the Lightning
``Callback`` methods that fire the family's table. It is composed of a dispatch (:mod:`lightning_hooks.core.dispatch`,
``adapter.dispatch``) and a checkpoint state (:mod:`lightning_hooks.core.adapter_state`, ``adapter.state``)."""

from __future__ import annotations

import pickle
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

from omegaconf import DictConfig, ListConfig, OmegaConf
from typing_extensions import override

from lightning_hooks.core import lightning_api
from lightning_hooks.core.adapter_state import AdapterState, base_state_key, default_hook_keys
from lightning_hooks.core.checkpoint_files import note_unreadable_checkpoint
from lightning_hooks.core.checks import check_hook
from lightning_hooks.core.dispatch import HookCaller, HookDispatch
from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.facade import Facade
from lightning_hooks.core.host_loop import EvalLoop, EvalRows, Evaluation, HostLoop, TrainStart, evaluation
from lightning_hooks.core.lightning_api import Callback, pl, rank_zero_warn
from lightning_hooks.core.state_keys import UniqueStateKey
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON, LightningEvent, Patch, Trigger
from lightning_hooks.core.weight_swaps import check_one_weight_swap


class LegacyHookAdapter(UniqueStateKey, Callback):
    """One Lightning callback that drives a list of legacy hooks of one family through its host facade.

    Subclasses set ``family``, ``events`` (the family's :class:`EventTable`), implement :meth:`base_classes` and
    build ``self.host`` (a :class:`Facade`). Every Lightning event fires its table rows through :meth:`fire`, most of
    them in the family's host loop (the translator, below). The table's other triggers are patches installed for the run
    (:mod:`lightning_hooks.core.triggers`), which call back :meth:`trigger` or :meth:`run_step`. Hooks are ordered once
    by :meth:`order`; for every trigger the adapter keeps only the hooks that override each mount point, so N hooks
    cost one Lightning callback plus one Python call per hook that does something.

    Shared lifecycle: a host that ends its train epoch before validating (``ends_train_epoch_at_last_batch``) gets
    :meth:`end_train_epoch` at the last batch's ``on_train_batch_end``, or at ``on_train_epoch_end`` when the epoch was
    cut short (``max_steps``, ``should_stop``); every host gets :meth:`start_train_epoch` for each epoch it runs, the
    one a fit resumes into included.

    Composition: ``self.dispatch`` (:class:`HookDispatch`) holds the ordered hook list (:attr:`hooks` reads it there,
    the one place it is declared), the plan and the fired counts, and records a hook's error in ``failed_at``, which
    the adapter clears once ``on_exception`` ran; its rows' ``when`` conditions are methods of the adapter.
    ``self.state`` (:class:`AdapterState`) writes and loads the checkpoint state, asking the adapter for the family's
    per-hook and host state (:meth:`hook_state`, :meth:`host_state`, ...).

    The translator: every Lightning train and evaluation event is a step of the host loop (``self.loop``, a
    :class:`~lightning_hooks.core.host_loop.HostLoop`), through the adapter's steps :meth:`start_train`,
    :meth:`start_train_epoch`, :meth:`start_train_batch`, :meth:`end_train_batch`, :meth:`end_train_epoch`,
    :meth:`end_train`, :meth:`start_eval` and :meth:`start_eval_epoch` (an evaluation's other events go to the loop
    directly), and a fit with nothing left to train is translated once (:meth:`fit_loop_returned`). A family supplies
    its table, its host loop and its facade, and overrides the steps where its adapter (not its loop) does something
    first; it overrides Lightning methods only for its run's environment and per-step events only it uses.
    """

    family: ClassVar[str]
    events: ClassVar[EventTable]
    #: mount point -> helper methods whose override also makes the mount point active (MMEngine's ``_before_iter``).
    delegates: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: functions that count as "not overridden" besides the base classes' own (Classy's ``ClassyHook._noop``).
    noops: ClassVar[tuple[Callable[..., Any], ...]] = ()
    #: a callable set on a hook instance counts as a mount point (mmcv's ``ClosureHook``).
    instance_mounts: ClassVar[bool] = False
    #: the family's host loop (:class:`~lightning_hooks.core.host_loop.HostLoop`), which the shared train lifecycle
    #: drives (its counters, its rows); None: the shared lifecycle fires the rows itself (the toy family)
    loop: HostLoop | None = None

    #: the library's name in messages, the positional arguments its host passes to every mount point, and the module
    #: prefixes of trusted hook classes (the library's own, our compat bases), for the adapt-time checks.
    family_title: ClassVar[str] = ""
    host_args: ClassVar[tuple[str, ...]] = ()
    upstream: ClassVar[tuple[str, ...]] = ()
    #: where the host makes each train epoch's loader iterator, relative to the hooks that start the epoch (the
    #: host loop's ``start_epoch`` rows): ``"after_epoch_start"`` (MMEngine's ``EpochBasedTrainLoop.run_epoch``, mmcv
    #: 1.x's ``EpochBasedRunner.train``, iMIX: ``iter(loader)`` after ``before_train_epoch``), ``"before_epoch_start"``
    #: (a host that makes it first, then runs the epoch-start hooks). None: where Lightning makes it, today's behaviour.
    #: Declared, every epoch's iterator is made at that point (:class:`TrainIterator`): the fit's first, which
    #: Lightning makes when it sets up its train data (before ``on_train_start``), and each later one, which Lightning
    #: makes after every ``on_train_epoch_start`` hook; so the workers' base seed is drawn from torch's generator
    #: between the same hooks as in the host, their first indices come from the sampler at the epoch the hooks before
    #: it set, and they fork the dataset as those hooks left it (a switched pipeline). A family whose host makes it at
    #: another point (MMEngine's ``IterBasedTrainLoop``: once, when the loop is built) leaves it None. A property may
    #: decide.
    train_iterator_at: ClassVar[Literal["after_epoch_start", "before_epoch_start"] | None] = None
    #: the same for each evaluation (a validation or test run; never Lightning's sanity check): ``"before_epoch_start"``
    #: (Classy's and VISSL's test phase: ``iter()`` of the test loader, then ``on_phase_start``) makes its iterator
    #: after :meth:`prepare_eval_iterator`, before the evaluation-epoch-start step (:class:`EvalIterator`), where
    #: Lightning makes it in the evaluation loop's ``reset()``, before ``on_validation_start`` / ``on_test_start``
    #: (and in a fit after setting the loaders' sampler epoch to its count of train epochs); ``"after_epoch_start"``
    #: (MMEngine's ``ValLoop.run`` / ``TestLoop.run``: ``iter()`` after ``before_val_epoch`` / ``before_test_epoch``)
    #: makes it right after the evaluation-epoch-start step. None: Lightning's.
    eval_iterator_at: ClassVar[Literal["after_epoch_start", "before_epoch_start"] | None] = None
    #: names of the family's hook classes that write checkpoint files (a hook deriving from one, too): they do not
    #: run under ``Trainer(fast_dev_run=...)``, which suppresses checkpointing (see :meth:`_mute_checkpoint_hooks`).
    checkpoint_hooks: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, hooks: Any | Sequence[Any]) -> None:
        hooks = list(hooks) if isinstance(hooks, (list, tuple, ListConfig)) else [hooks]
        hooks = [self.build_hook(_container(h)) if isinstance(h, Mapping) else h for h in hooks]
        if not hooks:
            raise ValueError(f"{type(self).__name__} needs at least one {self.family} hook")
        bases = self.base_classes()
        for i, hook in enumerate(hooks):
            if isinstance(hook, type) and issubclass(hook, bases):
                raise TypeError(f"{type(self).__name__} was given the class {hook.__qualname__}: pass an instance: {hook.__qualname__}()")
            if any(hook is h for h in hooks[:i]):
                raise ValueError(
                    f"{type(self).__name__}: the same {type(hook).__qualname__} instance is listed twice and would run "
                    "twice per event; pass each hook once."
                )
            if not isinstance(hook, bases):
                raise TypeError(
                    f"{type(self).__name__} cannot drive {hook!r} ({type(hook).__module__}.{type(hook).__qualname__}): "
                    f"it is not a {self.family} hook. Accepted base classes: {_names(bases)}."
                )
        ordered = self.order(hooks)
        for hook in ordered:
            check_hook(hook, self.events, self.family_title or self.family, self.host_args, self.upstream)
            self.check_arguments(hook)
        #: no rows fire until the family builds its host and calls ``self.dispatch.build_plan``
        self.dispatch = HookDispatch(
            type(self).__name__, self.family, self.events, ordered, bases,
            delegates=self.delegates, noops=self.noops, instance_mounts=self.instance_mounts, conditions=self,
            position=self._position,
        )  # fmt: skip  # the dispatch's options on one line
        self.state = AdapterState(self)
        self._init_state_key(base_state_key(type(self).__qualname__, self.hook_keys()))
        self.host: Facade
        self._trainer: pl.Trainer | None = None
        self._patches: list[tuple[bool, Callable[[], None]]] = []  # (environment, remove) of each installed patch
        self._train_epoch_open = False  # a train epoch started in the host and has not ended
        self._resumed_without_state = False  # see on_load_checkpoint
        self._train_started = False  # Lightning's fit loop started training in this run (see fit_loop_returned)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (``strategy="ddp_spawn"`` sends the callbacks to its ranks so): a hook that cannot travel (an open
        file, a lock) is named here instead of deep inside multiprocessing."""
        for hook in self.hooks:
            try:
                pickle.dumps(hook)
            except Exception as err:
                raise TypeError(
                    f"{type(self).__name__}: the {type(hook).__qualname__} hook cannot be pickled ({err}), and "
                    "strategy='ddp_spawn' pickles the callbacks to start its ranks. Use strategy='ddp' (it starts the "
                    "ranks by running your script again, so every rank builds its own hooks)."
                ) from err
        return self.__dict__.copy()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A family adapter overrides the ``Callback`` method of every Lightning event its table fires rows from.
        This class overrides the events most tables name; per-step events (``on_after_backward``, ...) that only
        some families use are left to them, so other families pay no call per step for them."""
        super().__init_subclass__(**kwargs)
        table = cls.__dict__.get("events")
        if table is None:
            return
        for event in table.events():
            if isinstance(event, LightningEvent) and getattr(cls, event.name) is getattr(Callback, event.name):
                raise TypeError(
                    f"{cls.__qualname__}: the {table.family} event table fires rows at Lightning's {event.name}, "
                    f"which {cls.__qualname__} does not override. Define {event.name}(...) and call "
                    f'self.fire(ON["{event.name}"], ...) in it.'
                )

    # ----------------------------------------------------------------------------------------- family contract
    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        """The classes a hook of this family derives from (real legacy bases that are imported, plus compat ones)."""
        raise NotImplementedError

    @classmethod
    def build_hook(cls, config: dict[str, Any]) -> Any:
        """Build one hook from a config in the family's own format (from YAML, LightningCLI or ``build_callbacks``)."""
        raise TypeError(f"{cls.__name__} does not build hooks from configs; pass hook objects instead of {config!r}")

    def order(self, hooks: list[Any]) -> list[Any]:
        """The family's own ordering rule; list order by default."""
        return hooks

    def check_arguments(self, hook: Any) -> None:
        """Refuse hook arguments the host would only trip over during training (see :func:`check_argument`)."""

    def hook_keys(self) -> list[str]:
        """Stable per-hook checkpoint keys: the class name, ``#n`` when a class repeats (Classy: ``name()``)."""
        return default_hook_keys(self.hooks)

    def hook_state(self, hook: Any) -> Any:
        """State of one hook to save in the Lightning checkpoint; ``None`` when the family keeps none per hook."""
        return None

    def load_hook_state(self, hook: Any, state: Any) -> None:
        raise NotImplementedError

    def removed_hooks_note(self, removed: list[str]) -> str:
        """What the run continues from when hooks of the checkpoint (``removed``: their keys) are no longer in the
        list, for the migration's warning (MMEngine: the EMA weights ``EMAHook`` saved as the model's); "" when their
        state is simply dropped."""
        return ""

    def host_state(self) -> dict[str, Any]:
        """State of the facade and the host loop (counters, message hubs, log buffers)."""
        return {}

    def load_host_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`host_state`."""

    def upgrade_host_state(
        self, state: dict[str, Any], written: int, checkpoint: Mapping[str, Any] | None, source: str
    ) -> dict[str, Any]:
        """:meth:`host_state` of adapter state format ``written`` (older than
        :data:`~lightning_hooks.core.adapter_state.STATE_FORMAT`) in this format: ``checkpoint`` is the whole Lightning
        checkpoint (None: the state was given alone), ``source`` names it for errors. A family whose host state means
        the same in both returns it as it is; one that cannot convert it exactly raises
        :class:`~lightning_hooks.core.adapter_state.StateFormatError`."""
        return state

    # -------------------------------------------------------------------------------------- the dispatch's face
    @property
    def hooks(self) -> list[Any]:
        """The hooks in the family's order (held by the dispatch)."""
        return self.dispatch.hooks

    def fire(self, trigger: Trigger, *, errors: str = "raise", **context: Any) -> None:
        """Fire ``trigger``'s table rows (:meth:`HookDispatch.fire`)."""
        self.dispatch.fire(trigger, errors=errors, **context)

    def call_hook(self, mount: str, **context: Any) -> None:
        """Call mount point ``mount`` by name (:meth:`HookDispatch.call_hook`)."""
        self.dispatch.call_hook(mount, **context)

    @property
    def fired_rows(self) -> Counter[Mount]:
        """How often each table row has fired so far."""
        return self.dispatch.fired_rows

    @property
    def fired(self) -> Counter[str]:
        """How often each mount point has fired so far, by its rows or by name."""
        return self.dispatch.fired

    def mount_counts(self, hook: Any) -> dict[str, int]:
        """How often each mount point ``hook`` implements has fired so far."""
        return self.dispatch.mount_counts(hook)

    @property
    def hook_caller(self) -> HookCaller:
        """What this adapter hands its facade to call hooks with (never the adapter itself): its :meth:`trigger` and
        :meth:`call_hook`."""
        return AdapterCaller(self)

    def trigger(self, trigger: Trigger, **context: Any) -> None:
        """Called by an installed patch (:mod:`lightning_hooks.core.triggers`) and by the facade (its
        :attr:`hook_caller`); a family overrides it to update its facade before the rows fire."""
        self.fire(trigger, **context)

    def run_step(self, method: str, step: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a wrapped LightningModule step method (a :class:`~lightning_hooks.core.triggers.ModuleStep` patch) and
        fire its rows around it; families whose table has such a trigger implement it."""
        raise NotImplementedError(f"{type(self).__name__} has a ModuleStep trigger but does not implement run_step")

    def start_train_epoch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, mid_epoch: bool) -> None:
        """Start a train epoch in the host loop (which fires its rows); ``mid_epoch`` when the fit resumed inside it
        (from a checkpoint). Without a host loop, fire the rows."""
        if self.loop is not None:
            self.loop.start_epoch(mid_epoch)
        else:
            self.fire(ON["on_train_epoch_start"])

    def start_train_batch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        """Start a train batch in the host loop (its epoch has started)."""
        if self.loop is not None:
            self.loop.start_iter(batch, batch_idx)
        else:
            self.fire(ON["on_train_batch_start"], batch_idx=batch_idx, data_batch=batch)

    def end_train_batch(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """End a train batch in the host loop (before its epoch may end at it)."""
        if self.loop is not None:
            self.loop.end_iter(outputs, batch, batch_idx)
        else:
            self.fire(ON["on_train_batch_end"], batch_idx=batch_idx, data_batch=batch, outputs=outputs)

    def end_train_epoch(self, trainer: pl.Trainer, trigger: Trigger) -> None:
        """End the open train epoch in the host loop, firing ``trigger``'s rows: :data:`LAST_TRAIN_BATCH`, or
        ``on_train_epoch_end`` (an epoch cut short, or a host that does not end epochs at their last batch)."""
        if self.loop is not None:
            self.loop.end_epoch(trigger)
        else:
            self.fire(trigger)

    @property
    def ends_train_epoch_at_last_batch(self) -> bool:
        """Whether the host ends a train epoch at its last batch, before validating (MMEngine, Classy; not iMIX). A
        family overrides it with a property (a host whose loop decides) or a class attribute."""
        return True

    # ------------------------------------------------------------------------------------------- conditions
    def real_validation(self) -> bool:
        trainer = self._trainer
        assert trainer is not None, "conditions are read once setup() has run"
        return not trainer.sanity_checking

    def train_epoch_open(self) -> bool:
        """Whether a train epoch started in the host and has not ended (a row's condition, and what the shared train
        epoch start/end reads). A family whose host loop owns this overrides it and :meth:`_mark_train_epoch`."""
        return self._train_epoch_open

    def _mark_train_epoch(self, open_: bool) -> None:
        """Record that the host's train epoch opened or closed (kept here unless the host loop owns it)."""
        self._train_epoch_open = open_

    def _position(self) -> str:
        trainer = self._trainer
        return f"epoch {trainer.current_epoch}, global step {trainer.global_step}" if trainer is not None else "before setup"

    def run_patches(self, stage: str) -> tuple[Patch, ...]:
        """The patches installed for a run of ``stage`` (``"fit"``, ``"validate"``, ...): one per patch trigger of the
        table; a family adds, after them, patches of its own machinery that fire no row (a checkpoint-load wrapper, the
        endless train loader of an iteration-based host). All are removed at ``teardown`` or on a failure. In a fit,
        :data:`EMPTY_FIT` comes first: the fit loop's return, where a fit with nothing left to train is translated;
        then, for a family that declares :attr:`train_iterator_at`, :data:`TRAIN_ITERATOR`; in any run, for one that
        declares :attr:`eval_iterator_at`, :data:`EVAL_ITERATOR`."""
        evaluation = (EVAL_ITERATOR,) if self.eval_iterator_at is not None else ()
        if stage != "fit":
            return (*evaluation, *self.events.patches())
        iterator = (TRAIN_ITERATOR,) if self.train_iterator_at is not None else ()
        return (EMPTY_FIT, *iterator, *evaluation, *self.events.patches())

    # ------------------------------------------------------------------------------------------ lightning glue
    def _install_patches(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._remove_patches()  # a fit that failed before teardown left them
        for patch in self.run_patches(stage):
            self._patches.append((patch.environment, patch.install(self, trainer, pl_module)))

    def resume_made_exact(self) -> None:
        """The family's loop rewrote the checkpoint a fit resumes from (``on_load_checkpoint``, before Lightning
        restores its loops) so that the fit goes on as the host's own resume does, a new pass of the loader from its
        first batch: Lightning's caution that a resume inside an epoch from a loader without ``state_dict`` is
        unreliable (``lightning_api.MID_EPOCH_RESUME_WARNING``) is not the user's to act on. Ignored until the run's
        patches are removed (``teardown``, a failure)."""
        self._patches.append((False, lightning_api.mute_mid_epoch_resume_warning()))

    def _remove_patches(self, keep_environment: bool = False) -> None:
        """Undo the patches of this run (idempotent), last installed first: the module, the strategy, the hooks and
        the process are as they came in; with ``keep_environment``, all but the ``environment`` ones."""
        patches = self._patches
        self._patches = [(env, remove) for env, remove in patches if env and keep_environment]
        for environment, remove in reversed(patches):
            if not (environment and keep_environment):
                remove()

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._key_by_position(trainer)
        check_one_weight_swap(trainer)
        self._check_hooks_not_shared(trainer)
        self._mute_checkpoint_hooks(trainer)
        self._trainer = trainer
        self._mark_train_epoch(False)
        self._resumed_without_state = False
        self._train_started = False
        self._install_patches(trainer, pl_module, stage)

    def _check_hooks_not_shared(self, trainer: pl.Trainer) -> None:
        """Refuse a hook object that another adapter of ``trainer`` also drives: it would run once per adapter at
        every event (a shared EMA would update twice per step)."""
        callbacks = trainer.callbacks  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
        for other in callbacks:
            if other is self or not isinstance(other, LegacyHookAdapter):
                continue
            shared = [h for h in self.hooks if any(h is o for o in other.hooks)]
            if shared:
                names = ", ".join(type(h).__qualname__ for h in shared)
                raise ValueError(
                    f"{type(self).__name__} ({self.state_key}) at setup: it and {type(other).__name__} ({other.state_key}) in one "
                    f"Trainer were given the same hook object(s): {names}. Each adapter would run it at every event, "
                    "so it would run twice per step (a shared EMA would update twice). Give each hook object to one "
                    "adapter only, or build a separate instance per adapter."
                )

    def _mute_checkpoint_hooks(self, trainer: pl.Trainer) -> None:
        """Under ``Trainer(fast_dev_run=...)`` Lightning writes no checkpoint or log (``ModelCheckpoint`` skips saving,
        loggers are replaced), so a smoke test leaves nothing a later run could resume from: the family's checkpoint
        hooks do not run either, and a host's work dir is a temporary folder (:class:`WorkDir`); one warning names
        them. In other runs every hook runs."""
        fast_dev_run = trainer.fast_dev_run  # type: ignore[attr-defined]  # Lightning's connectors set it; Trainer does not declare it
        muted = [h for h in self.hooks if fast_dev_run and self._writes_checkpoints(h)]
        self.dispatch.mute("checkpoint hooks under fast_dev_run", muted)
        notes = []
        if muted:
            mounts = sorted({m for h in muted for m in self.events.mount_points() if self.dispatch._overrides(h, m)})
            notes.append(
                f"its checkpoint hooks {', '.join(type(h).__qualname__ for h in muted)} are skipped (mount points "
                f"{', '.join(mounts)} are not called) and write no checkpoint a later run could resume from"
            )
        if fast_dev_run and self.host._work_dir is not None:
            notes.append(
                f"its {self.host.host}'s work_dir is a temporary folder, removed when the run ends, for the files "
                "its hooks write there (logs, config dumps, visualizer data)"
            )
        if notes:
            rank_zero_warn(
                f"{type(self).__name__}: Trainer(fast_dev_run={fast_dev_run}) suppresses checkpointing and "
                f"logging, so {'; and '.join(notes)}. Run without fast_dev_run to save checkpoints and logs."
            )

    def _writes_checkpoints(self, hook: Any) -> bool:
        return any(klass.__name__ in self.checkpoint_hooks for klass in type(hook).__mro__)

    def _release_work_dir(self) -> None:
        """Remove the temporary work dir a ``fast_dev_run`` wrote its host's files to (see :class:`WorkDir`)."""
        work_dir = self.host._work_dir
        if work_dir is not None:
            work_dir.release()

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._remove_patches()
        self._release_work_dir()

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        """Remove the run's patches but those of the hooks' environment and forward the failure to hooks with an
        ``on_exception`` mount point (their own errors only warn), then put the live weights back if hooks had EMA
        weights swapped in (an error or Ctrl-C during evaluation), and remove the environment's patches."""
        self._remove_patches(keep_environment=True)
        note_unreadable_checkpoint(trainer, exception)
        try:
            self.fire(ON["on_exception"], errors="warn", exception=exception)
        finally:
            self.restore_live_weights()
            self.dispatch.clear_failure()
            self._release_work_dir()
            self._remove_patches()

    # ------------------------------------------------------------------------------------------- EMA weight swaps
    @classmethod
    def weight_swap_classes(cls) -> tuple[type, ...]:
        """Hook classes of this family that swap EMA weights into the model for evaluation."""
        return ()

    def weight_swappers(self) -> list[str]:
        """Names of this adapter's hooks that swap EMA weights into the model, for :func:`check_one_weight_swap`."""
        classes = self.weight_swap_classes()
        return [f"{type(h).__qualname__} ({type(self).__name__})" for h in self.hooks if classes and isinstance(h, classes)]

    def restore_live_weights(self) -> None:
        """Put the live weights back into the model when a run ends while EMA hooks have theirs swapped in."""

    # The translator's train events: each calls a step of the adapter (start_train, start_train_epoch, ...), which
    # calls the host loop; a family overrides a step where its adapter does something first, never the event.
    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._train_started = True
        self.start_train(trainer)

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """A train epoch starts; ``mid_epoch`` where Lightning 2.4 starts the epoch a fit resumes into past its
        first batch (2.5 and later skip this hook there: :meth:`start_skipped_train_epoch`, ``on_train_batch_start``)."""
        mid_epoch = lightning_api.first_train_batch_index(trainer) > 0
        self._start_train_epoch(trainer, pl_module, mid_epoch=mid_epoch, first_batch_drawn=False)

    @override
    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        if not self.train_epoch_open():
            # Lightning 2.6 does not call on_train_epoch_start for the epoch a fit resumes into from a checkpoint
            # written during it or at the previous epoch's last batch; every legacy host starts each epoch it runs.
            # (A family that declares train_iterator_at has started it already, before the batch was drawn.)
            self._start_train_epoch(trainer, pl_module, mid_epoch=batch_idx > 0, first_batch_drawn=True)
        self.start_train_batch(trainer, pl_module, batch, batch_idx)

    def _start_train_epoch(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, mid_epoch: bool, first_batch_drawn: bool
    ) -> None:
        """The host's train epoch starts; unless its ``first_batch_drawn`` (which made its iterator), the epoch's
        train iterator is made at the point :attr:`train_iterator_at` declares
        (``lightning_api.make_pending_train_iterator``)."""
        self._mark_train_epoch(True)
        at = None if first_batch_drawn else self.train_iterator_at
        if at == "before_epoch_start":
            self.prepare_train_iterator(trainer, mid_epoch)
            lightning_api.make_pending_train_iterator(trainer)
        self.start_train_epoch(trainer, pl_module, mid_epoch=mid_epoch)
        if at == "after_epoch_start":
            lightning_api.make_pending_train_iterator(trainer)

    def start_skipped_train_epoch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batches_run: int) -> None:
        """Lightning draws a train epoch's first batch without having called ``on_train_epoch_start`` (2.6, the epoch
        a fit resumes into; ``batches_run`` of it already ran), its iterator still held back (:class:`TrainIterator`):
        the host's epoch starts now and its iterator is made where :attr:`train_iterator_at` declares, after
        :meth:`prepare_train_iterator` or the epoch-start steps, as at any epoch start."""
        if not self.train_epoch_open():
            self._start_train_epoch(trainer, pl_module, mid_epoch=batches_run > 0, first_batch_drawn=False)

    def prepare_train_iterator(self, trainer: pl.Trainer, mid_epoch: bool) -> None:
        """What a host that makes each train epoch's iterator before the epoch-start hooks (``"before_epoch_start"``)
        does to the train loader first, for the epoch starting or (``mid_epoch``) the one a fit resumed inside (nothing
        here; VISSL's trainer sets its sampler's epoch)."""

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.end_train_batch(trainer, pl_module, outputs, batch, batch_idx)
        if trainer.is_last_batch and self.ends_train_epoch_at_last_batch:
            self._end_train_epoch(trainer, LAST_TRAIN_BATCH)

    @override
    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.train_epoch_open():  # not ended at its last batch: cut short, or a host that ends epochs here
            self._end_train_epoch(trainer, ON["on_train_epoch_end"])

    def _end_train_epoch(self, trainer: pl.Trainer, trigger: Trigger) -> None:
        try:
            self.end_train_epoch(trainer, trigger)  # rows read train_epoch_open(): still True here
        finally:
            self._mark_train_epoch(False)

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.end_train(trainer)

    def start_train(self, trainer: pl.Trainer) -> None:
        """Training starts (``on_train_start``, Lightning's loop restored if the fit resumed): the host loop's
        :meth:`~lightning_hooks.core.host_loop.HostLoop.start_train` at the Trainer's :func:`train_start` (the host's
        ``before_train``). A family overrides it for what its adapter does around the loop (checks, schedules).
        Without a host loop, fire the rows."""
        if self.loop is None:
            self.fire(ON["on_train_start"])
        else:
            self.loop.start_train(train_start(trainer))

    def end_train(self, trainer: pl.Trainer) -> None:
        """Training ends (``on_train_end``): the host loop's ``end_train`` (the host's ``after_train``). Without a host
        loop, fire the rows."""
        if self.loop is None:
            self.fire(ON["on_train_end"])
        else:
            self.loop.end_train()

    #: the host opens (and closes) its train epoch even when it has nothing left to train (MMEngine's
    #: ``IterBasedTrainLoop``: one epoch for the whole run): see :meth:`fit_loop_returned`
    empty_train_opens_epoch: bool = False

    def fit_loop_returned(self, trainer: pl.Trainer) -> None:
        """Lightning's fit loop returned (:class:`EmptyFit`). If it never started training, the fit had nothing left
        to train (resumed from a checkpoint at ``max_epochs`` / ``max_steps``): Lightning skips ``on_train_start`` and
        ``on_train_end`` then, while every legacy host runs its train loop, empty (MMEngine's ``Runner.train``:
        ``before_train``, ``after_train``; mmcv's ``runner.run``, Classy's trainer and iMIX's engine alike): the
        train's start and end run here, back to back, around an empty epoch where the host opens one."""
        if self._train_started:
            return
        self._train_started = True
        self.start_train(trainer)
        if self.empty_train_opens_epoch:
            self._start_train_epoch(trainer, trainer.lightning_module, mid_epoch=False, first_batch_drawn=False)
            self._end_train_epoch(trainer, ON["on_train_epoch_end"])
        self.end_train(trainer)

    # Lightning's evaluation events, translated once: each is a step of the host loop's evaluation (an
    # :class:`Evaluation`, built from the Trainer's state), which fires its rows (:class:`EvalRows`).
    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.start_eval(trainer, self._evaluation(trainer, "val"))

    @override
    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start_eval_epoch(trainer, self._evaluation(trainer, "val"))

    @override
    def on_validation_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self.eval_loop.start_eval_iter(self._evaluation(trainer, "val"), batch, batch_idx)

    @override
    def on_validation_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip  # Lightning's signature, dataloader_idx on its own line
        self.eval_loop.end_eval_iter(self._evaluation(trainer, "val"), outputs, batch, batch_idx)

    @override
    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.eval_loop.end_eval_epoch(self._evaluation(trainer, "val"))

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.eval_loop.end_eval(self._evaluation(trainer, "val"))

    @override
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.start_eval(trainer, self._evaluation(trainer, "test"))

    @override
    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start_eval_epoch(trainer, self._evaluation(trainer, "test"))

    @override
    def on_test_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self.eval_loop.start_eval_iter(self._evaluation(trainer, "test"), batch, batch_idx)

    @override
    def on_test_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip  # Lightning's signature, dataloader_idx on its own line
        self.eval_loop.end_eval_iter(self._evaluation(trainer, "test"), outputs, batch, batch_idx)

    @override
    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.eval_loop.end_eval_epoch(self._evaluation(trainer, "test"))

    @override
    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.eval_loop.end_eval(self._evaluation(trainer, "test"))

    @staticmethod
    def _evaluation(trainer: pl.Trainer, stage: Literal["val", "test"]) -> Evaluation:
        return evaluation(stage, trainer.sanity_checking, trainer.state.fn == "fit")

    @property
    def eval_loop(self) -> EvalLoop:
        """What runs the evaluation steps: the host loop, or (no loop: the toy family) one that fires the rows."""
        return self.loop if self.loop is not None else _RowsOnly(AdapterCaller(self))

    def start_eval(self, trainer: pl.Trainer, run: Evaluation) -> None:
        """An evaluation starts in the host loop. A family overrides it (or :meth:`start_eval_epoch`) for what its
        adapter, not its loop, checks first (MMEngine's sampler check, Classy's end of a train phase cut short)."""
        self.eval_loop.start_eval(run)

    def _start_eval_epoch(self, trainer: pl.Trainer, run: Evaluation) -> None:
        """The host's evaluation epoch starts; its iterator is made before or after it where :attr:`eval_iterator_at`
        says so (``lightning_api.make_pending_eval_iterator``; not in the sanity check, whose iterator Lightning
        made)."""
        at = None if run.sanity_check else self.eval_iterator_at
        if at == "before_epoch_start":
            self.prepare_eval_iterator(trainer, run)
            lightning_api.make_pending_eval_iterator(trainer)
        self.start_eval_epoch(trainer, run)
        if at == "after_epoch_start":
            lightning_api.make_pending_eval_iterator(trainer)

    def prepare_eval_iterator(self, trainer: pl.Trainer, run: Evaluation) -> None:
        """What a host that makes each evaluation's iterator before its epoch-start hooks does to the loaders first
        (nothing here; VISSL's trainer sets the test sampler's epoch)."""

    def start_eval_epoch(self, trainer: pl.Trainer, run: Evaluation) -> None:
        """An evaluation epoch starts in the host loop (see :meth:`start_eval`)."""
        self.eval_loop.start_eval_epoch(run)

    @override
    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        self.fire(ON["on_save_checkpoint"], checkpoint=checkpoint)

    # ------------------------------------------------------------------------------------------- checkpoint state
    @override
    def state_dict(self) -> dict[str, Any]:
        return self.state.state_dict()

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.state.load_state_dict(state_dict)

    def checkpoint_state(self, trainer: pl.Trainer, checkpoint: Mapping[str, Any]) -> dict[str, Any] | None:
        """This adapter's state in ``checkpoint`` (:meth:`AdapterState.checkpoint_state`)."""
        return self.state.checkpoint_state(trainer, checkpoint)

    @override
    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        """Warn where Lightning replays the saved batch; resuming with another hook list changes :attr:`state_key`:
        then load the one state an adapter of this class wrote (:meth:`~AdapterState.migrate`; Lightning calls
        this before ``load_state_dict``, which it skips for a key the checkpoint lacks)."""
        if trainer.state.fn == "fit" and lightning_api.replays_saved_batch(trainer, checkpoint):
            warnings.warn(
                f"Lightning {lightning_api.namespace_of(trainer).__version__} resumes this checkpoint, written at the "
                "end of a train batch (where legacy checkpoint hooks save), by running that batch once more, so the "
                "hooks see it twice and the epoch's later batch_idx are one lower than in the legacy host. "
                "Lightning >= 2.5 resumes after the batch: pip install 'lightning>=2.5,<2.7'.",
                stacklevel=2,
            )
        self.state.migrate(trainer, checkpoint)
        #: the fit resumes from a checkpoint with no state of this adapter (a plain Lightning one, written without it):
        #: the family's host counters then follow Lightning's restored loop (MMEngine) or start fresh
        self._resumed_without_state = trainer.state.fn == "fit" and self.checkpoint_state(trainer, checkpoint) is None


def train_start(trainer: pl.Trainer) -> TrainStart:
    """Where ``trainer``'s fit starts training, read once at ``on_train_start`` for the host loop."""
    return TrainStart(trainer.current_epoch, lightning_api.train_batches_fetched(trainer), trainer.num_training_batches)


@dataclass(frozen=True)
class EmptyFit(Patch):
    """Lightning's ``fit_loop.run``, after it returned: the adapter's :meth:`~LegacyHookAdapter.fit_loop_returned`
    translates a fit that had nothing left to train (Lightning skipped its train loop). Fires no row."""

    def __str__(self) -> str:
        return "FitLoop.run (after it returned)"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Callable[[], None]:
        def wrap(original: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                original()
                adapter.fit_loop_returned(trainer)

            return run

        return lightning_api.wrap_fit_loop_run(trainer, wrap)


#: the one :class:`EmptyFit` patch
EMPTY_FIT = EmptyFit()


@dataclass(frozen=True)
class TrainIterator(Patch):
    """Each train epoch's iterator made where the family's host makes it (:attr:`LegacyHookAdapter.train_iterator_at`),
    which :meth:`~LegacyHookAdapter._start_train_epoch` reaches: the fit's first is held back from Lightning's data
    setup (``FitLoop.setup_data``, before ``on_train_start``), and a later epoch's is made there rather than after the
    epoch-start hooks (:func:`~lightning_hooks.core.lightning_api.make_pending_train_iterator`); if the epoch's first
    batch is drawn before its start (Lightning 2.6's resume into an epoch, without ``on_train_epoch_start``), the
    host's epoch starts then, before the draw (:meth:`~LegacyHookAdapter.start_skipped_train_epoch`, called by
    :func:`~lightning_hooks.core.lightning_api.defer_train_iterators`'s fetcher), and makes it. Fires no row."""

    def __str__(self) -> str:
        return "FitLoop's train data fetcher (each epoch's iterator)"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Callable[[], None]:
        def start_skipped_epoch(batches_run: int) -> None:
            adapter.start_skipped_train_epoch(trainer, pl_module, batches_run)

        return lightning_api.defer_train_iterators(trainer, start_skipped_epoch)


#: the one :class:`TrainIterator` patch (in a fit of a family that declares ``train_iterator_at``)
TRAIN_ITERATOR = TrainIterator()


@dataclass(frozen=True)
class EvalIterator(Patch):
    """Each evaluation's iterator made where the family's host makes it (:attr:`LegacyHookAdapter.eval_iterator_at`):
    held back from the evaluation loop's ``reset()`` (:func:`~lightning_hooks.core.lightning_api.defer_eval_iterators`)
    and made by :meth:`~LegacyHookAdapter._start_eval_epoch`, or at the first batch. Fires no row."""

    def __str__(self) -> str:
        return "EvaluationLoop's data fetcher (each evaluation's iterator)"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Callable[[], None]:
        return lightning_api.defer_eval_iterators(trainer)


#: the one :class:`EvalIterator` patch (in a run of a family that declares ``eval_iterator_at``)
EVAL_ITERATOR = EvalIterator()


class AdapterCaller:
    """The :class:`~lightning_hooks.core.dispatch.HookCaller` of an adapter: what a facade may call on it."""

    def __init__(self, adapter: LegacyHookAdapter) -> None:
        self._adapter = adapter
        #: the adapter's :meth:`~LegacyHookAdapter.trigger` itself: the host loops fire every step through it, and a
        #: method of ours in between would take a call and a copy of the keywords each time
        self.fire: Callable[..., None] = adapter.trigger

    def call_hook(self, mount: str, **context: Any) -> None:
        self._adapter.call_hook(mount, **context)


class _RowsOnly(EvalRows):
    """The evaluation steps of an adapter without a host loop: the rows, nothing else."""

    def __init__(self, caller: HookCaller) -> None:
        self.caller = caller


def _container(config: Mapping[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], OmegaConf.to_container(config, resolve=True)) if isinstance(config, DictConfig) else dict(config)


def _names(classes: Iterable[type]) -> str:
    return ", ".join(f"{c.__module__}.{c.__qualname__}" for c in classes)


def warn_if_last_epoch_unvalidated(trainer: pl.Trainer, who: str, consequence: str) -> None:
    """Warn when Lightning validates on some epochs but not after the last one (``max_epochs`` not a multiple of
    ``check_val_every_n_epoch``), while the legacy host ends every run with a validation; ``consequence`` says what
    the user loses."""
    every = trainer.check_val_every_n_epoch
    if trainer.enable_validation and every and trainer.max_epochs not in (None, -1) and trainer.max_epochs % every:
        rank_zero_warn(
            f"{who}: Trainer(max_epochs={trainer.max_epochs}, check_val_every_n_epoch={every}) runs no validation "
            f"after the last train epoch, {consequence}. Choose a max_epochs that is a multiple of "
            "check_val_every_n_epoch, or call trainer.validate() after fit."
        )
