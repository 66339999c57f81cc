"""Everything lightning-hooks takes from Lightning beyond ``import lightning``: namespaces and internals, in one place.

Lightning ships one framework under two names: ``lightning.pytorch`` (package ``lightning``) and the standalone
``pytorch_lightning`` (package ``pytorch-lightning``), each with its own classes. A Trainer of one namespace accepts
only callbacks, loggers and plugins derived from *its* classes, so the bases here derive from the class of every
installed namespace in :data:`SUPPORTED` releases. The rest of the package imports Lightning only through this module.

Every function that reaches past Lightning's public API names the releases it was checked on (:data:`CHECKED_ON`);
``tests/core/test_lightning_api.py`` pins each signature and attribute it relies on, so a release that changes
one fails there, not in a user's run.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import operator
import re
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch.utils.data
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from typing_extensions import override

#: Lightning releases lightning-hooks supports, in either namespace (``pyproject.toml`` requires the same range).
SUPPORTED = SpecifierSet(">=2.4,<2.7")
#: Releases every function below was checked on (CI runs the oldest and the newest: ``scripts/setup.sh test``).
CHECKED_ON = ("2.4.0", "2.6.6")

#: distribution -> (module of the Trainer API, module of Fabric's utilities)
_DISTRIBUTIONS = {"lightning": ("lightning.pytorch", "lightning.fabric"),
                  "pytorch-lightning": ("pytorch_lightning", "lightning_fabric")}


def _installed() -> tuple[tuple[types.ModuleType, types.ModuleType], ...]:
    """``(trainer API, fabric)`` of every installed namespace in :data:`SUPPORTED`, ``lightning`` first."""
    found, rejected = [], []
    for dist, (api, fabric) in _DISTRIBUTIONS.items():
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Version(version) not in SUPPORTED:
            rejected.append(f"{dist}=={version}")
            continue
        try:
            found.append((importlib.import_module(api), importlib.import_module(fabric)))
        except ImportError:  # metadata left behind by an uninstall, or a namespace blocked on purpose
            continue
    if not found:
        why = f"found {', '.join(rejected)}" if rejected else "found neither"
        raise ImportError(
            f"lightning-hooks needs Lightning {SUPPORTED} as `lightning` or `pytorch-lightning`; {why}. "
            f"Install one: pip install 'lightning{SUPPORTED}'"
        )
    return tuple(found)


_NAMESPACES = _installed()
#: Every supported installed namespace's trainer API: ``lightning.pytorch`` and/or ``pytorch_lightning``.
NAMESPACES: tuple[types.ModuleType, ...] = tuple(api for api, _ in _NAMESPACES)
#: The namespace the package itself builds Trainers and modules with (demo, CLI): ``lightning.pytorch`` when installed.
if TYPE_CHECKING:  # the type checker reads `lightning.pytorch`; at run time the first installed namespace
    import lightning.pytorch as pl
else:
    pl = NAMESPACES[0]
#: Fabric of each namespace in :data:`NAMESPACES` (``lightning.fabric``, ``lightning_fabric``), and that of :data:`pl`.
FABRICS: tuple[types.ModuleType, ...] = tuple(fabric for _, fabric in _NAMESPACES)
fabric = FABRICS[0]


def submodule(name: str) -> types.ModuleType:
    """``pl.<name>`` (e.g. ``"cli"``), imported on demand: these are not imported with the namespace itself."""
    return importlib.import_module(f"{pl.__name__}.{name}")


def _each(module: str, name: str) -> tuple[type, ...]:
    """Class ``name`` of ``module`` in every namespace (``"callbacks"``, ``"Callback"``)."""
    return tuple(getattr(importlib.import_module(f"{ns.__name__}.{module}"), name) for ns in NAMESPACES)


# --------------------------------------------------------------------------------------------- namespace bases
class Callback(*_each("callbacks", "Callback")):  # type: ignore[misc]  # its bases: one class per installed namespace, found at run time
    """Base of every lightning-hooks callback: a ``Callback`` of each installed namespace, so that a
    ``lightning.Trainer`` and a ``pytorch_lightning.Trainer`` both accept it (each checks ``isinstance`` against its
    own class). Both bases are the same code under two names; the first one in the MRO answers every method."""


class Logger(*_each("loggers", "Logger")):  # type: ignore[misc]  # its bases: one class per installed namespace, found at run time
    """Base of lightning-hooks loggers: a ``Logger`` of each installed namespace."""


class TorchCheckpointIO(*_each("plugins.io", "TorchCheckpointIO")):  # type: ignore[misc]  # its bases: one class per installed namespace, found at run time
    """Base of lightning-hooks checkpoint IO plugins: a ``TorchCheckpointIO`` (hence ``CheckpointIO``) of each
    installed namespace, which each Trainer's ``plugins=[...]`` check requires."""


#: Lightning's ``Callback`` class of every namespace: a callback passes ``isinstance(cb, CALLBACKS)`` if either
#: namespace's Trainer takes it.
CALLBACKS: tuple[type, ...] = Callback.__bases__
#: ``LightningModule`` and ``Trainer`` of every namespace, for ``isinstance`` checks.
LIGHTNING_MODULES: tuple[type, ...] = tuple(ns.LightningModule for ns in NAMESPACES)
TRAINERS: tuple[type, ...] = tuple(ns.Trainer for ns in NAMESPACES)
#: Lightning's own callbacks in every namespace: the modules whose classes a config may name as callbacks.
CALLBACK_MODULES: tuple[str, ...] = tuple(f"{ns.__name__}.callbacks" for ns in NAMESPACES)

rank_zero_warn = pl.utilities.rank_zero_warn
rank_zero_only = pl.utilities.rank_zero_only
rank_zero_experiment = importlib.import_module(f"{pl.__name__}.loggers.logger").rank_zero_experiment
isolate_rng = importlib.import_module(f"{pl.__name__}.utilities.seed").isolate_rng
move_data_to_device = importlib.import_module(f"{fabric.__name__}.utilities.apply_func").move_data_to_device
get_filesystem = importlib.import_module(f"{fabric.__name__}.utilities.cloud_io").get_filesystem


def namespace_of(obj: Any) -> types.ModuleType:
    """The namespace whose ``LightningModule`` or ``Trainer`` ``obj`` is (a mixed-up object gets a clear error)."""
    for ns in NAMESPACES:
        if isinstance(obj, (ns.LightningModule, ns.Trainer)):
            return ns
    raise TypeError(
        f"{type(obj).__module__}.{type(obj).__qualname__} is neither a LightningModule nor a Trainer of "
        f"{' or '.join(ns.__name__ for ns in NAMESPACES)}: build the model and the Trainer from one of them."
    )


# --------------------------------------------------------------------------------------------------- internals
def flat_hyperparams(params: Any) -> dict[str, Any]:
    """Hyperparameters (a dict or an ``argparse.Namespace``) as Lightning's own loggers log them: one level of
    ``a/b`` keys with loggable values, through Fabric's ``_convert_params``, ``_flatten_dict`` and
    ``_sanitize_params`` (``utilities.logger``). Checked on :data:`CHECKED_ON`."""
    helpers = importlib.import_module(f"{fabric.__name__}.utilities.logger")
    return helpers._sanitize_params(helpers._flatten_dict(helpers._convert_params(params)))


def is_overridden(method: str, module: Any) -> bool:
    """Whether ``module`` (a LightningModule of either namespace) overrides ``method``, as Lightning decides it.

    Lightning's ``is_overridden`` (``utilities.model_helpers``) compares ``__code__`` after unwrapping one
    ``__wrapped__``; :class:`PatchedMethod` keeps that answer for a patched step. Checked on :data:`CHECKED_ON`."""
    ns = namespace_of(module)
    helpers = importlib.import_module(f"{ns.__name__}.utilities.model_helpers")
    return helpers.is_overridden(method, module, parent=ns.LightningModule)


class PatchedMethod:
    """A callable that an adapter sets on a LightningModule instance in place of one of its methods.

    Lightning calls module hooks as ``getattr(module, name)(...)`` (``trainer.call._call_lightning_module_hook``),
    so an instance attribute takes the class method's place. Lightning also asks ``is_overridden(name, module)``
    (``training_step`` at fit start): it unwraps ``__wrapped__`` once and compares ``__code__`` with the base
    class's, so this object exposes the original's ``__code__``. Subclasses implement ``__call__``. Checked on
    :data:`CHECKED_ON`.
    """

    def __init__(self, original: Callable[..., Any]) -> None:
        self.original = self.__wrapped__ = original

    @property
    def __code__(self) -> types.CodeType:
        """The original's code: a wrapper around this object (``functools.wraps``, a second adapter) exposes this
        object as its ``__wrapped__``, and Lightning reads ``__code__`` here."""
        return inspect.unwrap(self.original).__code__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __deepcopy__(self, memo: dict[int, Any]) -> PatchedMethod:
        """Shared, not copied, when a hook deep-copies the module (MMEngine's EMAHook): it holds its adapter."""
        return self


def patch_method(obj: Any, name: str, replacement: Callable[..., Any]) -> Callable[[], None]:
    """Set ``replacement`` as ``obj.<name>`` on the instance (a LightningModule or the strategy), where Lightning
    looks its hooks up. Returns the function that undoes it: it restores what the instance itself held (a method the
    user set on it) or removes the attribute, unless something else replaced ``replacement`` meanwhile."""
    had, before = name in vars(obj), vars(obj).get(name)
    setattr(obj, name, replacement)

    def undo() -> None:
        if vars(obj).get(name) is replacement:
            if had:
                setattr(obj, name, before)
            else:
                delattr(obj, name)

    return undo


def wrap_strategy_training_step(
    trainer: Any, wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Callable[[], None]:
    """Route ``trainer.strategy.training_step`` through ``wrapper(original)``; returns the function that undoes it.

    Lightning's optimization loops call ``trainer._call_strategy_hook("training_step", ...)``, which looks the method
    up on the strategy instance; the strategy calls ``LightningModule.training_step`` inside it (through the DDP
    wrapper's forward). The wrapper runs after the step returned, outside that forward.
    Checked on :data:`CHECKED_ON`."""
    strategy = trainer.strategy
    return patch_method(strategy, "training_step", wrapper(strategy.training_step))


def wrap_fit_loop_run(trainer: Any, wrapper: Callable[[Callable[[], None]], Callable[[], None]]) -> Callable[[], None]:
    """Route ``trainer.fit_loop.run`` through ``wrapper(original)``; returns the function that undoes it.

    ``Trainer.fit`` calls ``fit_loop.run()`` (looked up on the loop instance) between restoring a checkpoint's
    training state and tearing the strategy down; it returns at once, without ``on_train_start`` /
    ``on_train_end``, when the fit has nothing left to train (its ``skip``: ``done``, ``limit_train_batches=0``).
    Checked on :data:`CHECKED_ON`."""
    loop = trainer.fit_loop
    return patch_method(loop, "run", wrapper(loop.run))


def setup_train_data(trainer: Any) -> None:
    """Build and size the train loader now (``fit_loop.setup_data``), for a host asked for it before Lightning's
    loop does so; Lightning's own later call then finds it built. Checked on :data:`CHECKED_ON`."""
    trainer.fit_loop.setup_data()


def train_batches_fetched(trainer: Any) -> int:
    """Train batches fetched since the fit's first epoch, restored ones included on resume
    (``fit_loop.epoch_loop.batch_progress.total.ready``). Checked on :data:`CHECKED_ON`."""
    return trainer.fit_loop.epoch_loop.batch_progress.total.ready


def fetch_train_batches_when_run(trainer: Any) -> Callable[[], None]:
    """Make ``trainer``'s fit loop draw each train batch when it runs it, not one ahead: the fit loop's data fetcher
    (``fit_loop._select_data_fetcher``, for this trainer only) gets ``prefetch_batches=0``. With a loader without a
    length Lightning draws the next batch before it runs the current one (and the first at the fit's data setup), so a
    data pipeline drawing from the global random generators draws before the hooks, the train step and a validation
    in between, not after them as a loop that fetches each batch when it runs it (an endless loader never ends, so
    Lightning need not look ahead for its last batch). Returns the undo. Checked on :data:`CHECKED_ON`."""
    module: Any = importlib.import_module(f"{namespace_of(trainer).__name__}.loops.fit_loop")
    original = module._select_data_fetcher

    def select(fitting: Any, stage: Any) -> Any:
        fetcher = original(fitting, stage)
        if fitting is trainer and hasattr(fetcher, "prefetch_batches"):
            fetcher.prefetch_batches = 0
        return fetcher

    module._select_data_fetcher = select

    def undo() -> None:
        module._select_data_fetcher = original

    return undo


def defer_train_iterators(trainer: Any, before_first_draw: Callable[[int], None] | None = None) -> Callable[[], None]:
    """Make the train-loader iterator that ``trainer``'s fit loop makes when it sets up its train data
    (``FitLoop.setup_data``: ``iter(fit_loop._data_fetcher)``, before ``on_train_start``) only when
    :func:`make_pending_train_iterator` asks for it, or when the loop draws the first batch from its data fetcher.
    The fetcher ``fit_loop._select_data_fetcher`` returns for this trainer's train stage (a ``_PrefetchDataFetcher``)
    becomes a :class:`_DeferredFetcher`. A ``DataLoader`` iterator draws its workers' base seed from torch's generator
    and its workers take their first indices from the sampler when it is made: made later, it draws after the hooks
    that run in between and sees the sampler's epoch and the dataset as they left them. Several calls for one trainer
    defer once.

    ``before_first_draw(batches_fetched)`` runs when the loop draws a batch while the iterator is still held back,
    before it is made, with the count of the epoch's batches already run (a resumed epoch's): the epoch started without
    ``on_train_epoch_start`` (Lightning 2.6 skips it for the epoch a fit resumes into from a checkpoint written inside
    it or at the previous epoch's last batch), so the caller can start it and make the iterator
    (:func:`make_pending_train_iterator`) as at an epoch start. Every caller's runs, in the order of the calls.
    Returns the undo. Checked on :data:`CHECKED_ON`."""
    return _defer_fetchers(trainer, "fit_loop", ("train",), before_first_draw)


def defer_eval_iterators(trainer: Any) -> Callable[[], None]:
    """The evaluation counterpart of :func:`defer_train_iterators`: the iterator of the validation or test loaders
    that ``trainer``'s evaluation loop makes in its ``reset()`` (``_EvaluationLoop.reset``: ``iter(data_fetcher)``,
    before ``on_validation_start`` / ``on_test_start``, in a fit after setting the loaders' sampler epoch to its count
    of train epochs) is made only when :func:`make_pending_eval_iterator` asks for it, or when the loop draws the first
    batch. Every evaluation run but Lightning's sanity check (its fetcher: ``evaluation_loop._select_data_fetcher``,
    called at each run's reset). Several calls for one trainer defer once. Returns the undo. Checked on
    :data:`CHECKED_ON`."""
    return _defer_fetchers(trainer, "evaluation_loop", ("validate", "test"), None)


def _defer_fetchers(
    trainer: Any, loop: str, stages: tuple[str, ...], before_first_draw: Callable[[int], None] | None
) -> Callable[[], None]:
    """The ``_PrefetchDataFetcher`` that ``<namespace>.loops.<loop>._select_data_fetcher`` returns for ``trainer`` in
    one of ``stages`` (``RunningStage`` values) becomes a :class:`_DeferredFetcher` whose next ``iter()`` is held
    back; once for a trainer and loop. ``before_first_draw`` joins that trainer's list for the loop, whose functions
    each such fetcher calls when it draws with its iterator held back. Returns the undo."""
    module: Any = importlib.import_module(f"{namespace_of(trainer).__name__}.loops.{loop}")
    original = module._select_data_fetcher
    select = original
    while hasattr(select, "defers_for") and select.defers_for is not trainer:  # another trainer's deferral
        select = select.wrapped
    undo_select = None
    if not hasattr(select, "defers_for"):
        select = _deferring_select(trainer, original, stages)
        module._select_data_fetcher = select

        def undo_select() -> None:
            if module._select_data_fetcher is select:
                module._select_data_fetcher = original

    draws: list[Callable[[int], None]] = select.draws
    if before_first_draw is not None:
        draws.append(before_first_draw)

    def undo() -> None:
        if before_first_draw in draws:
            draws.remove(before_first_draw)
        if undo_select is not None:
            undo_select()

    return undo


def _deferring_select(trainer: Any, original: Any, stages: tuple[str, ...]) -> Any:
    """``original`` (a ``_select_data_fetcher``) whose fetcher for ``trainer`` in one of ``stages`` is deferred; it
    carries ``defers_for`` (the trainer), ``draws`` (the functions its fetchers call before a held-back draw) and
    ``wrapped`` (``original``)."""
    prefetcher = importlib.import_module(f"{namespace_of(trainer).__name__}.loops.fetchers")._PrefetchDataFetcher
    draws: list[Callable[[int], None]] = []

    def select(fitting: Any, stage: Any) -> Any:
        fetcher = original(fitting, stage)
        if fitting is trainer and stage in stages and type(fetcher) is prefetcher:
            fetcher.__class__ = _deferred_class(prefetcher)
            fetcher.pending, fetcher.before_first_draw = True, draws
        return fetcher

    select.defers_for, select.draws, select.wrapped = trainer, draws, original  # type: ignore[attr-defined]  # marks read by _defer_fetchers
    return select


def make_pending_eval_iterator(trainer: Any) -> bool:
    """Make the iterator that :func:`defer_eval_iterators` held back for the evaluation running now (in
    ``on_validation_epoch_start`` / ``on_test_epoch_start``, before its first batch; the loop's count of batches
    fetched is kept). Returns whether one was made (not: made already, or the run's fetcher not deferred: the sanity
    check, a step taking ``dataloader_iter``). Reads ``trainer._evaluation_loop._data_fetcher``. Checked on
    :data:`CHECKED_ON`."""
    fetcher = trainer._evaluation_loop._data_fetcher
    if not getattr(fetcher, "pending", False):
        return False
    fetcher.make_iterator()
    return True


def make_pending_train_iterator(trainer: Any) -> bool:
    """Make the train iterator pending for the epoch that starts now, before its first batch is drawn (in
    ``on_train_epoch_start``, or earlier in the fit), for a fit whose train iterators :func:`defer_train_iterators`
    defers: the one it held back at the data setup (the fit's first epoch, a resumed fit's, an epoch whose loader was
    rebuilt at its start; the batches the fetcher counted as fetched are kept), or, at a later epoch's start, a new
    one in place of the previous epoch's, which Lightning makes only after every ``on_train_epoch_start`` hook
    (``iter()`` of the fetcher in ``_TrainingEpochLoop.on_run_start``). That ``iter()`` then keeps this iterator
    rather than making a second one, as a host iterates its loader once an epoch. Returns whether one was made (not:
    made for this epoch already, or the fit's fetcher not deferred).

    The epoch a fit resumes into from a checkpoint written in its validation, after its last batch, ends without
    drawing: the iterator made ahead for it (Lightning 2.4 starts it with ``on_train_epoch_start``) is made anew for
    the next epoch, and the count of its batches the epoch loop added to the one held back (2.5 and later) is dropped,
    so the next epoch runs all its batches. Checked on :data:`CHECKED_ON`."""
    fetcher = trainer.fit_loop._data_fetcher
    epoch = trainer.current_epoch
    if not hasattr(fetcher, "made_ahead") or (fetcher.made_ahead and fetcher.made_for == epoch):
        return False
    if fetcher.pending and not trainer.fit_loop.epoch_loop.restarting:
        fetcher.fetched = 0
    fetcher.make_iterator()
    fetcher.made_ahead, fetcher.made_for = True, epoch
    return True


_DEFERRED_CLASSES: dict[type, type] = {}


def _deferred_class(base: type) -> type:
    """``base`` (Lightning's ``_PrefetchDataFetcher``) whose first ``iter()`` after ``pending`` was set is held back
    until :meth:`make_iterator` or ``next()`` (one class per namespace's fetcher)."""
    if base not in _DEFERRED_CLASSES:

        class _DeferredFetcher(base):  # Lightning's fetcher class, found at run time
            pending = False
            made_ahead = False  # made by make_pending_train_iterator for the epoch starting, no batch drawn yet
            made_for = -1  # that epoch
            before_first_draw: Sequence[Callable[[int], None]] = ()  # each fetcher gets its trainer's list

            def __iter__(self) -> Any:
                if self.made_ahead:
                    self.made_ahead = False
                    return self
                if not self.pending:
                    return super().__iter__()
                # sized as Lightning's data setup needs (len(combined_loader)), without an iterator of its loaders
                loader = self.combined_loader
                modes = importlib.import_module(type(loader).__module__)._SUPPORTED_MODES
                loader._iterator = modes[loader._mode]["iterator"](loader.flattened, loader._limits)
                self.iterator = loader
                self.reset()
                return self

            def make_iterator(self) -> None:
                """``iter()`` now; for the iterator held back, the count of batches fetched (a resumed epoch loop
                adds its batches before drawing) stays."""
                fetched, self.pending = self.fetched if self.pending else 0, False
                super().__iter__()
                self.fetched += fetched

            def __next__(self) -> Any:
                if self.pending:
                    for start in list(self.before_first_draw):  # may make the iterator (make_pending_train_iterator)
                        start(self.fetched)
                self.made_ahead = False
                if self.pending:
                    self.make_iterator()
                return super().__next__()

        _DEFERRED_CLASSES[base] = _DeferredFetcher
    return _DEFERRED_CLASSES[base]


def train_batch_index(trainer: Any) -> int:
    """Index of the current train batch counted over all epochs (``fit_loop.epoch_loop.total_batch_idx``).
    Checked on :data:`CHECKED_ON`."""
    return trainer.fit_loop.epoch_loop.total_batch_idx


def load_combined_loader_states(trainer: Any) -> None:
    """Apply the mid-epoch train-loader state a resumed fit restored (``fit_loop._load_combined_loader_states``).

    Lightning applies it when it sets up the train data; a hook host that built the loader earlier (to read its
    length) calls this so the loader resumes where the checkpoint left it. It is idempotent: Lightning clears the
    pending state once applied. Checked on :data:`CHECKED_ON`."""
    trainer.fit_loop._load_combined_loader_states()


def evaluation_metrics(trainer: Any) -> dict[str, Any] | None:
    """Metrics logged in the evaluation epoch that just ended, read in ``on_validation_end``/``on_test_end``.

    ``trainer.callback_metrics`` then still holds the train metrics too; the running loop's result collection
    (``trainer._results``) holds only this loop's: ``_results.metrics(on_step=False)["callback"]``. ``None``
    outside a loop. Checked on :data:`CHECKED_ON`."""
    results = trainer._results
    return None if results is None else results.metrics(on_step=False)["callback"]


def rich_bar_works() -> bool:
    """Whether :data:`pl`'s ``RichProgressBar`` runs with the installed ``rich``: Lightning 2.4's fails at the sanity
    check (``IndexError: pop from empty list`` in ``Console.clear_live``) with current rich releases; 2.5 and later
    work. Checked on :data:`CHECKED_ON`."""
    return Version(pl.__version__) >= Version("2.5")


def replays_saved_batch(trainer: Any, checkpoint: dict[str, Any]) -> bool:
    """Whether resuming ``checkpoint`` runs the batch it was written in once more.

    A checkpoint written in ``on_train_batch_end`` (where legacy checkpoint hooks save) holds that batch as
    processed but not completed: Lightning 2.5 and later resume after it, Lightning 2.4 runs it again and every later
    ``batch_idx`` of that epoch is one lower. Reads ``loops.fit_loop["epoch_loop.batch_progress"]`` of the
    checkpoint. Checked on :data:`CHECKED_ON`."""
    if Version(namespace_of(trainer).__version__) >= Version("2.5"):
        return False
    loop = checkpoint.get("loops", {}).get("fit_loop", {})
    total = loop.get("epoch_loop.batch_progress", {}).get("total", {})
    return bool(total) and total["processed"] == total["completed"] + 1


def restart_epoch_at_start(checkpoint: dict[str, Any]) -> bool:
    """Make a fit checkpoint written inside a train epoch resume at that epoch's first batch (the epoch's batches
    all run again; ``global_step`` and the count of batches that stepped go on from the checkpoint's), as an
    epoch-based host loop that does not skip into its loader resumes. Returns whether the checkpoint was written inside
    an epoch (else it is left as it is).

    Rewrites ``loops.fit_loop``'s ``epoch_progress`` (the epoch ready, not started), ``epoch_loop.batch_progress``
    (no batch of this epoch, the total settled) and ``epoch_loop.state_dict._batches_that_stepped``, and drops the
    train loaders' saved position. Checked on :data:`CHECKED_ON`."""
    loop = checkpoint.get("loops", {}).get("fit_loop")
    if not loop or "epoch_progress" not in loop:
        return False
    epochs = loop["epoch_progress"]
    if epochs["total"]["processed"] != epochs["total"]["started"] - 1:
        return False  # between epochs
    for part in ("total", "current"):
        epochs[part]["started"] = epochs[part]["processed"]
    _settle_batches(loop)
    return True


#: The start of the warning Lightning gives when it resumes a checkpoint written inside an epoch from a train loader
#: without ``state_dict`` (``_TrainingEpochLoop.reset``). It does not apply where :func:`restart_epoch_at_start` made
#: the fit run that epoch again from its first batch, as an epoch-based host loop resumes. Checked on
#: :data:`CHECKED_ON`.
MID_EPOCH_RESUME_WARNING = "You're resuming from a checkpoint that ended before the epoch ended"


def mute_mid_epoch_resume_warning() -> Callable[[], None]:
    """Ignore :data:`MID_EPOCH_RESUME_WARNING` (a ``warnings`` filter) until the returned function is called, which
    removes that filter alone (any added meanwhile stay)."""
    warnings.filterwarnings("ignore", message=re.escape(MID_EPOCH_RESUME_WARNING))
    entry = warnings.filters[0]

    def unmute() -> None:
        filters = cast("list[Any]", warnings.filters)  # the module's list, which typeshed types as a Sequence
        if entry in filters:
            filters.remove(entry)

    return unmute


def written_at_last_batch(checkpoint: Mapping[str, Any]) -> bool:
    """Whether a fit checkpoint was written at a train epoch's last batch (``on_train_batch_end``: every batch ran,
    the epoch not ended), the case :func:`start_next_epoch` rewrites. Checked on :data:`CHECKED_ON`."""
    loop = checkpoint.get("loops", {}).get("fit_loop")
    if not loop or "epoch_progress" not in loop:
        return False
    epochs, batches = loop["epoch_progress"], loop["epoch_loop.batch_progress"]
    return epochs["total"]["processed"] == epochs["total"]["started"] - 1 and bool(batches.get("is_last_batch"))


def start_next_epoch(checkpoint: dict[str, Any]) -> bool:
    """Make a fit checkpoint written at a train epoch's last batch (``on_train_batch_end``: every batch ran, the epoch
    not ended) resume as from the end of that epoch: the next epoch starts as a fresh one, so Lightning calls
    ``on_train_epoch_start`` before it iterates the train loader, as an epoch-based host loop starts each epoch
    (restored as written, Lightning 2.6 ends the epoch without ``on_train_epoch_start`` of the next, whose first batch
    it fetches before any callback runs). Returns whether the checkpoint was written at an epoch's last batch (else it
    is left as it is).

    Rewrites ``loops.fit_loop``'s ``epoch_progress`` (the epoch processed and completed),
    ``epoch_loop.batch_progress`` (no batch of the next epoch, the total settled) and
    ``epoch_loop.state_dict._batches_that_stepped``, and drops the train loaders' saved position. Checked on
    :data:`CHECKED_ON`."""
    if not written_at_last_batch(checkpoint):
        return False  # between epochs, or inside one
    loop = checkpoint["loops"]["fit_loop"]
    epochs = loop["epoch_progress"]
    for part in ("total", "current"):
        epochs[part]["processed"] = epochs[part]["completed"] = epochs[part]["started"]
    _settle_batches(loop)
    return True


def run_pending_validation(trainer: Any, checkpoint: dict[str, Any]) -> bool:
    """Make a fit checkpoint written at a train epoch's last batch (``on_train_batch_end``: every batch ran, the
    validation Lightning runs after it not yet) resume with that validation, then the next epoch, as a host that
    evaluates after each train phase resumes from the checkpoint of that phase's end (Classy's and VISSL's trainers run
    the pending test phase first). Restored as written, Lightning 2.6 goes on with the next epoch and never runs it.
    Returns whether the checkpoint was rewritten: only where ``trainer`` validates at that epoch's end
    (``val_check_interval=1.0``, ``check_val_every_n_epoch``) and resumes after the saved batch (Lightning 2.5 and
    later; 2.4 runs that batch again, then validates).

    Rewrites ``loops.fit_loop``'s ``epoch_loop.batch_progress`` (the batch completed and the epoch's current count at
    0: kept, Lightning's epoch loop runs the saved batch again) and ``epoch_loop.val_loop.batch_progress`` (as written
    at the validation's first batch: the fit loop runs the whole validation, then ends the epoch). Checked on
    :data:`CHECKED_ON`."""
    if Version(namespace_of(trainer).__version__) < Version("2.5") or not written_at_last_batch(checkpoint):
        return False
    loop = checkpoint["loops"]["fit_loop"]
    epoch, every = loop["epoch_progress"]["current"]["processed"], trainer.check_val_every_n_epoch
    interval = trainer.val_check_interval
    if not (trainer.enable_validation and isinstance(interval, float) and interval == 1.0):
        return False
    if every is not None and (epoch + 1) % every:
        return False
    batches = loop["epoch_loop.batch_progress"]
    batches["total"]["completed"] = batches["total"]["processed"]
    batches["current"] = _saved_progress(0)
    validation = loop["epoch_loop.val_loop.batch_progress"]
    validation["total"] = _saved_progress(1, processed=0)
    validation["current"] = _saved_progress(0)
    validation["is_last_batch"] = False
    return True


def start_epoch_afresh(checkpoint: dict[str, Any]) -> bool:
    """Make a fit checkpoint written between train epochs after one cut short resume at the next epoch's first batch,
    as a host loop that starts a new pass of its loader resumes. A fit that stopped at ``max_steps`` inside an epoch
    counts that epoch as ended but keeps its batch count, so restored as written the next epoch starts at that batch
    index and skips as many batches. Returns whether the checkpoint was such (else it is left as it is).

    Rewrites ``loops.fit_loop``'s ``epoch_loop.batch_progress`` (no batch of the next epoch, the total settled) and
    drops the train loaders' saved position. Checked on :data:`CHECKED_ON`."""
    loop = checkpoint.get("loops", {}).get("fit_loop")
    if not loop or "epoch_progress" not in loop:
        return False
    epochs, batches = loop["epoch_progress"], loop["epoch_loop.batch_progress"]
    if epochs["total"]["processed"] != epochs["total"]["started"] or not batches["current"]["processed"]:
        return False  # inside an epoch, or before the next one's first batch already
    _settle_batches(loop)
    return True


def _settle_batches(loop: dict[str, Any]) -> None:
    """The fit loop's saved batch progress as before an epoch's first batch, its totals settled on the batches
    processed (the count of batches that stepped follows), the train loaders' saved position dropped."""
    batches = loop["epoch_loop.batch_progress"]
    done = batches["total"]["processed"]
    loop["epoch_loop.state_dict"]["_batches_that_stepped"] += done - batches["total"]["completed"]
    batches["total"] = _saved_progress(done)
    batches["current"] = _saved_progress(0)
    batches["is_last_batch"] = False
    loop.get("state_dict", {}).pop("combined_loader", None)


def _saved_progress(ready: int, *, processed: int | None = None) -> dict[str, int]:
    """A saved progress counter (Lightning's ``_ReadyCompletedTracker``'s ``state_dict``): ``ready`` batches ready and
    started, ``processed`` (default ``ready``) processed and completed."""
    done = ready if processed is None else processed
    return dict(ready=ready, started=ready, processed=done, completed=done)


def _data_connector(ns: types.ModuleType) -> types.ModuleType:
    return importlib.import_module(f"{ns.__name__}.trainer.connectors.data_connector")


#: :data:`pl`'s ``_DataLoaderSource`` (``trainer.connectors.data_connector``): what a loop asks for its loader
#: (``dataloader()``, ``is_defined()``, ``instance``, ``name``); subclass it to serve a loader another way.
#: Checked on :data:`CHECKED_ON`.
DataLoaderSource: type = _data_connector(pl)._DataLoaderSource


def train_data_source(trainer: Any) -> Any:
    """The fit loop's train data source (``fit_loop._data_source``). Checked on :data:`CHECKED_ON`."""
    return trainer.fit_loop._data_source


def set_train_data_source(trainer: Any, source: Any) -> None:
    """Make ``source`` the fit loop's train data source; the loop's next ``setup_data`` reads it.
    Checked on :data:`CHECKED_ON`."""
    trainer.fit_loop._data_source = source


def replace_train_loader(trainer: Any, loader: Any, *, now: bool) -> None:
    """Train on ``loader`` from now on, as ``Trainer(reload_dataloaders_every_n_epochs)`` rebuilds the train data.

    The fit loop gets a ``_DataLoaderSource`` of the trainer's namespace and drops its combined loader, so its next
    ``setup_data`` (at the next epoch start) builds the new one. With ``now`` it is built at once and each loader's
    sampler gets the current epoch (``fabric.utilities.data._set_sampler_epoch``), for an epoch whose batches are
    still to come. Checked on :data:`CHECKED_ON`."""
    ns = namespace_of(trainer)
    loop = trainer.fit_loop
    loop._data_source = _data_connector(ns)._DataLoaderSource(loader, "train_dataloader")
    loop._combined_loader = None
    if now:
        loop.setup_data()
        data = importlib.import_module(f"{FABRICS[NAMESPACES.index(ns)].__name__}.utilities.data")
        for dl in loop._combined_loader.flattened:
            data._set_sampler_epoch(dl, loop.epoch_progress.current.processed)


def pending_train_loader(trainer: Any) -> Any | None:
    """The loader :func:`replace_train_loader` made the train data source while the fit loop has not built it yet
    (the next epoch's), else None. Reading it builds nothing: building the train data inside an epoch's end moves
    the fit loop's validation schedule. Reads ``fit_loop._data_source.instance`` and ``_combined_loader``. Checked on
    :data:`CHECKED_ON`."""
    loop = trainer.fit_loop
    source = loop._data_source
    if loop._combined_loader is not None or not isinstance(source, _data_connector(namespace_of(trainer))._DataLoaderSource):
        return None
    instance = source.instance
    return instance if isinstance(instance, torch.utils.data.DataLoader) else None


def refetch_train_batches(trainer: Any) -> int:
    """Fetch again the train batches the fit loop fetched ahead, from where its loader's iterator is now; returns how
    many. Lightning's data fetcher draws one batch ahead of the running one when the loader has no length (to know
    the last batch): a host whose hooks switch the data source (an iteration-based loop's iterator) drops that batch
    so the next batch comes from the new source, as under a loop that fetches each batch when it runs it.
    Reads and refills ``fit_loop._data_fetcher.batches`` (keeping its ``fetched`` count); nothing is fetched before
    the fit set up its train data. Checked on :data:`CHECKED_ON`."""
    fetcher = trainer.fit_loop._data_fetcher
    ahead = getattr(fetcher, "batches", None)
    if not ahead:
        return 0
    count = len(ahead)
    fetcher.batches = []
    fetcher.fetched -= count
    fetch = importlib.import_module(f"{namespace_of(trainer).__name__}.loops.fetchers")._DataFetcher.__next__
    for _ in range(count):
        fetcher.batches.append(fetch(fetcher))
    return count


def first_train_batch_index(trainer: Any) -> int:
    """Index of the first batch of the train epoch that starts now, read in ``on_train_epoch_start``: 0, unless the
    fit resumed into this epoch from a checkpoint written inside it; then the batch it resumes at, which Lightning
    reads from the epoch loop's restored progress when it resets the loop, after the hook
    (``fit_loop.epoch_loop.restarting``, ``batch_progress.current.completed``: Lightning 2.4, which starts such an
    epoch with ``on_train_epoch_start``, runs the checkpoint's batch again; 2.5 and later skip the hook there and
    call it for a resumed epoch only at its start). Checked on :data:`CHECKED_ON`."""
    loop = trainer.fit_loop.epoch_loop
    return loop.batch_progress.current.completed if loop.restarting else 0


def train_epoch_pending(trainer: Any) -> bool:
    """Whether the current train epoch has begun (``on_train_epoch_start``) but not yet fetched its first batch:
    ``fit_loop.epoch_progress.current`` is ready but not started, or (Lightning >= 2.5) the fit resumed at the
    epoch's start (``fit_loop.restarted_on_epoch_start``: its progress reset, ready no longer ahead) and the epoch
    loop has not fetched a batch. Checked on :data:`CHECKED_ON`."""
    loop = trainer.fit_loop
    progress = loop.epoch_progress.current
    restarted = getattr(loop, "restarted_on_epoch_start", False)  # Lightning 2.4: counts ready as it started
    return progress.ready > progress.started or (restarted and loop.epoch_loop.batch_progress.current.ready == 0)


def setup_fit_val_data(trainer: Any) -> None:
    """Load the fit's validation loaders now (``fit_loop.epoch_loop.val_loop.setup_data``), for a host asked for
    them before Lightning's loop does so. Checked on :data:`CHECKED_ON`."""
    trainer.fit_loop.epoch_loop.val_loop.setup_data()


def validate_after(trainer: Any, batches: int | float) -> None:
    """Run the fit's next validation check after ``batches`` train batches (``float("inf")``: none this epoch),
    through ``trainer.val_check_batch``, which the epoch loop reads at every batch end.
    Checked on :data:`CHECKED_ON`."""
    trainer.val_check_batch = batches


def validate_now(trainer: Any) -> None:
    """Run the fit's validation loop now, as the epoch loop runs it between train batches (callbacks see a validation
    inside ``fit``; the trainer is back in training after it): ``fit_loop.epoch_loop.val_loop.run()``.
    Checked on :data:`CHECKED_ON`."""
    trainer.validating = True
    try:
        trainer.fit_loop.epoch_loop.val_loop.run()
    finally:
        trainer.training = True


def end_train_epoch_at(trainer: Any, steps: int) -> None:
    """End the fit once ``steps`` optimizer steps are done, without the validation Lightning forces on
    ``should_stop``: bounds the epoch loop's ``max_steps`` (``fit_loop.epoch_loop.max_steps``).
    Checked on :data:`CHECKED_ON`."""
    trainer.fit_loop.epoch_loop.max_steps = steps


def fit_loop_state(trainer: Any) -> dict[str, Any]:
    """The fit loop's state as a checkpoint's ``loops.fit_loop`` holds it (``fit_loop.state_dict()``).
    Checked on :data:`CHECKED_ON`."""
    return trainer.fit_loop.state_dict()


def set_optimizer_steps(trainer: Any, steps: int) -> None:
    """Count ``steps`` optimizer steps as done, as a resumed fit would: ``trainer.global_step`` and the step count
    the LR schedulers and loggers read (``epoch_loop._batches_that_stepped``, the optimizer-step progress of the
    automatic or manual optimization loop). Checked on :data:`CHECKED_ON`."""
    loop = trainer.fit_loop.epoch_loop
    loop._batches_that_stepped = steps
    if trainer.lightning_module.automatic_optimization:
        progress = loop.automatic_optimization.optim_progress.optimizer.step.total
    else:
        progress = loop.manual_optimization.optim_step_progress.total
    progress.ready = progress.completed = steps


def set_train_batches_done(trainer: Any, batches: int) -> None:
    """Count ``batches`` train batches as done over all epochs, as a resumed fit would: the epoch loop's total batch
    progress, from which :func:`train_batch_index` counts (``fit_loop.epoch_loop.batch_progress.total``).
    Checked on :data:`CHECKED_ON`."""
    total = trainer.fit_loop.epoch_loop.batch_progress.total
    total.ready = total.started = total.processed = total.completed = batches


def start_fit_after(trainer: Any, epochs: int, steps: int) -> None:
    """Let a fit go on as one resumed after ``epochs`` finished train epochs and ``steps`` optimizer steps, for a
    legacy checkpoint that holds no Lightning loop state: ``trainer.current_epoch`` becomes ``epochs`` (the fit loop's
    epoch progress) and ``global_step`` ``steps`` (:func:`set_optimizer_steps`). As on a resume, the first epoch
    iterates the train loader ``fit_loop.setup_data`` already iterated, rather than a second iterator (which would
    draw another base seed from the global random generator): Lightning 2.5+ reads ``fit_loop.is_resuming``, 2.4 the
    epoch loop's ``restarting``. Call it once the fit has started and before its loop runs (``on_fit_start``).
    Checked on :data:`CHECKED_ON`."""
    loop = trainer.fit_loop
    for counts in (loop.epoch_progress.total, loop.epoch_progress.current):
        counts.ready = counts.started = counts.processed = counts.completed = epochs
    set_optimizer_steps(trainer, steps)
    if hasattr(loop, "_resuming_from_checkpoint"):
        loop._resuming_from_checkpoint = True
    else:
        loop.epoch_loop._restarting = True


#: Trainer class -> its namespace's ``trainer.call`` module (:func:`call_before_backward`)
_CALL_MODULES: dict[type, types.ModuleType] = {}


def call_before_backward(trainer: Any, loss: Any) -> None:
    """Run ``on_before_backward(loss)`` of the trainer's callbacks and then its LightningModule, as Lightning does
    before a backward it runs (``trainer.call._call_callback_hooks``, ``_call_lightning_module_hook``).
    Checked on :data:`CHECKED_ON`. Called every step a hook owns backward: the module is found once per Trainer class."""
    call = _CALL_MODULES.get(type(trainer))
    if call is None:
        call = _CALL_MODULES[type(trainer)] = importlib.import_module(f"{namespace_of(trainer).__name__}.trainer.call")
    call._call_callback_hooks(trainer, "on_before_backward", loss)
    call._call_lightning_module_hook(trainer, "on_before_backward", loss)


def default_checkpoint_io(checkpoint_io: Any) -> bool:
    """Whether ``checkpoint_io`` is Lightning's default, a plain ``TorchCheckpointIO`` of either namespace (not a
    subclass the user chose)."""
    return type(checkpoint_io) in _each("plugins.io", "TorchCheckpointIO")


#: Lightning's ``DistributedSamplerWrapper`` of each namespace: what ``Trainer(use_distributed_sampler=True)`` puts
#: around a loader's own sampler under DDP.
_SAMPLER_WRAPPERS: tuple[Any, ...] = tuple(
    importlib.import_module(f"{f.__name__}.utilities.distributed").DistributedSamplerWrapper for f in FABRICS
)


def sampler_inside_wrapper(sampler: Any) -> Any | None:
    """The loader's own sampler when Lightning wrapped ``sampler`` in its ``DistributedSamplerWrapper``, else None.
    Checked on :data:`CHECKED_ON`."""
    return sampler.dataset._sampler if isinstance(sampler, _SAMPLER_WRAPPERS) else None


def ddp_kwargs(strategy: Any) -> dict[str, Any] | None:
    """The keyword arguments a ``DDPStrategy`` of either namespace passes to ``DistributedDataParallel`` when it wraps
    the model at ``strategy.setup`` (its ``_ddp_kwargs``, mutable until then); None for another strategy.
    Checked on :data:`CHECKED_ON`."""
    if not isinstance(strategy, _each("strategies", "DDPStrategy")):
        return None
    kwargs: dict[str, Any] = vars(strategy)["_ddp_kwargs"]  # set in DDPStrategy.__init__
    return kwargs


def describe_train_epochs(bar: Any, describe: Callable[[int, str], str]) -> Callable[[], None] | None:
    """Have ``bar``, a Lightning ``RichProgressBar`` of either namespace, describe each train epoch as
    ``describe(current_epoch, lightnings_description)`` (Lightning builds it in ``_get_train_description``). Returns
    the undo, or ``None`` for another callback. Checked on :data:`CHECKED_ON`."""
    if not isinstance(bar, _each("callbacks", "RichProgressBar")):
        return None
    rich_bar: Any = bar  # a RichProgressBar of either namespace (isinstance narrows it to object)
    lightnings = rich_bar._get_train_description
    return patch_method(rich_bar, "_get_train_description", lambda epoch: describe(epoch, lightnings(epoch)))


def world_size(**trainer_options: Any) -> int:
    """The processes a ``Trainer(**trainer_options)`` would run (``trainer.world_size``), without building one: a
    Trainer logs Lightning's device banner, and a command that needs the world size before it builds its Trainer
    would log it twice. Lightning's ``_AcceleratorConnector`` parses the device, node, accelerator and strategy
    arguments as the Trainer does. Checked on :data:`CHECKED_ON`."""
    connectors = importlib.import_module(f"{pl.__name__}.trainer.connectors.accelerator_connector")
    connector = connectors._AcceleratorConnector
    accepted = inspect.signature(connector).parameters
    strategy = connector(**{k: v for k, v in trainer_options.items() if k in accepted}).strategy
    return int(getattr(strategy, "world_size", 1))


def launch_processes(**trainer_options: Any) -> int:
    """Start the processes a ``Trainer(**trainer_options)`` would run and join this one to their process group now,
    as its ``fit`` would (the strategy's launcher, then its ``setup_environment``), for a command whose library code
    needs the process group before the Trainer exists. The processes run the same command; the Trainer each builds
    later finds them launched (``LOCAL_RANK`` is set) and the group initialized. Returns the world size (1: nothing
    started). Checked on :data:`CHECKED_ON`."""
    connectors = importlib.import_module(f"{pl.__name__}.trainer.connectors.accelerator_connector")
    connector = connectors._AcceleratorConnector
    accepted = inspect.signature(connector).parameters
    strategy = connector(**{k: v for k, v in trainer_options.items() if k in accepted}).strategy
    size = int(getattr(strategy, "world_size", 1))
    if size > 1:
        strategy.launcher.launch(strategy.setup_environment)
    return size


_progress = importlib.import_module(f"{pl.__name__}.callbacks.progress")
#: :data:`pl`'s tqdm progress bar, for the package's own entry points.
TQDMProgressBar: type = _progress.TQDMProgressBar


class RichProgressBar(_progress.RichProgressBar):  # type: ignore[name-defined]  # a base chosen at run time
    """:data:`pl`'s rich progress bar with :meth:`train_description` to override: Lightning builds an epoch's
    description in ``_get_train_description(current_epoch)``. Checked on :data:`CHECKED_ON`."""

    @override
    def _get_train_description(self, current_epoch: int) -> str:
        return self.train_description(current_epoch)

    def train_description(self, current_epoch: int) -> str:
        """The text before an epoch's train bar; Lightning's is ``Epoch N/M``."""
        return super()._get_train_description(current_epoch)


#: ``LightningOptimizer`` of every namespace
LIGHTNING_OPTIMIZERS: tuple[type, ...] = _each("core.optimizer", "LightningOptimizer")
#: the optimizer's attributes a ``LightningOptimizer`` answers from its own class (see :func:`direct_optimizer_reads`)
OPTIMIZER_READS = ("param_groups", "state", "defaults")


def _optimizer_attribute(name: str) -> property:
    """A property reading (in C) and writing attribute ``name`` of a ``LightningOptimizer``'s optimizer."""

    def write(wrapper: Any, value: Any) -> None:
        setattr(wrapper._optimizer, name, value)

    return property(operator.attrgetter(f"_optimizer.{name}"), write, doc=f"The optimizer's ``{name}``.")


def direct_optimizer_reads(wrapper: Any) -> Any:
    """``wrapper``, a ``LightningOptimizer``, with its optimizer's ``param_groups``, ``state`` and ``defaults`` read by
    properties of its own class; any other object is returned as it is. Lightning answers them in ``__getattr__``,
    which Python calls only after the ordinary lookup has failed and raised: ~2.5 us a read against ~25 ns on the
    optimizer, and mmcv's and iMIX's hooks read ``runner.optimizer.param_groups`` every iteration. Lightning makes that
    class for each wrapper (``Lightning<Optimizer>``: ``LightningOptimizer`` and the optimizer's class as its bases,
    built in ``__init__``), so no other object changes; the properties read what ``__getattr__`` reads, and a write
    goes to the optimizer, as on the host's optimizer (Lightning's wrapper would keep it apart). Checked on
    :data:`CHECKED_ON`."""
    cls = type(wrapper)
    if cls.__bases__[:1] not in tuple((base,) for base in LIGHTNING_OPTIMIZERS):
        return wrapper  # not a wrapper Lightning made for one optimizer
    for name in OPTIMIZER_READS:
        if name not in vars(cls):
            setattr(cls, name, _optimizer_attribute(name))
    return wrapper


def drop_unset_wandb_anonymous(logger: Any) -> None:
    """Leave ``anonymous`` out of what a ``WandbLogger`` hands ``wandb.init`` (``_wandb_init``) when it was not set:
    Lightning passes ``anonymous=None``, which wandb 0.19 and later warn about whatever its value ("The anonymous
    setting has no effect and will be removed"). Checked on :data:`CHECKED_ON`."""
    if logger._wandb_init.get("anonymous", False) is None:
        del logger._wandb_init["anonymous"]


def wandb_run_made(logger: Any) -> Any:
    """The W&B run a ``WandbLogger`` started (``_experiment``), or None: it starts one when first used, and on rank 0
    only (elsewhere ``experiment`` answers with a dummy and starts nothing). Checked on :data:`CHECKED_ON`."""
    return logger._experiment
