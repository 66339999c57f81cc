"""Lightning's loggers and any ``Trainer`` option on ``lightning-hooks train``, for every family's train command.

A family's train command adds the arguments (``trainer_flags.add_arguments``, which ``add_lightning_arguments``
calls), takes the ``--trainer.KEY VALUE`` items out of its command line before its legacy parser sees it
(``trainer_flags.split_argv``: :mod:`lightning_hooks.core.trainer_flags` imports no Lightning, so a usage error or
``--help`` does not),
reads them (:meth:`TrainerRequest.from_args`) and, where it builds its ``lightning.Trainer``, resolves them against
the options the legacy config owns (:meth:`TrainerRequest.resolve`): an option the config already sets another way is
an error naming both sides.

Example::

    argv, trainer_argv = trainer_flags.split_argv(["cfg.py", "--logger", "csv", "--trainer.max_time", "00:01:00:00"])
    request = TrainerRequest.from_args(parser.parse_args(argv), trainer_argv)
    options = request.resolve({"logger": False}, {"max_epochs": Owned(12, "train_cfg.max_epochs=12")},
                              save_dir="work_dirs/cfg", name="cfg")
"""

from __future__ import annotations

import argparse
import contextlib
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import override

from lightning_hooks.core.errors import InputError, unknown_name
from lightning_hooks.core.lightning_api import drop_unset_wandb_anonymous, pl, rank_zero_only, submodule, wandb_run_made
from lightning_hooks.core.trainer_flags import FLAGS, PREFIX


class TrainerOptionError(InputError, ValueError):
    """A ``Trainer`` option on the command line that is unknown, of the wrong type, or contradicts the legacy
    config or another flag; the message names both sides and what to do."""


@dataclass(frozen=True)
class Owned:
    """A ``Trainer`` option the legacy config (or another flag) already decides.

    Args:
        value: what it decides; :data:`ANY` when any value given another way contradicts it.
        side: that side in words, as the error names it (``"train_cfg.max_epochs=12 (the config's loop)"``).
        way_out: what to do instead (``"change it with --cfg-options train_cfg.max_epochs=N"``).
    """

    value: Any
    side: str
    way_out: str = ""


#: an :class:`Owned` value that every value given another way contradicts
ANY = object()

#: ``Trainer`` options that together say what one setting of a legacy loop says, with Lightning's defaults: how long
#: it runs (a second stop rule beside the config's ``max_epochs`` / ``max_iters`` cuts its loop short) and when it
#: validates. A config that decides one of a group decides the others: each must keep its default.
LOOP_GROUPS: tuple[dict[str, Any], ...] = (
    {"max_epochs": None, "max_steps": -1, "fast_dev_run": False},
    {"check_val_every_n_epoch": 1, "val_check_interval": None},
)


def _parser() -> Any:
    """jsonargparse's parser of ``Trainer.__init__``'s keywords under ``trainer.``, typed by its signature
    (callbacks and loggers as ``class_path`` / ``init_args``), as LightningCLI reads them."""
    from jsonargparse import ArgumentParser

    parser = ArgumentParser(prog="lightning-hooks train", exit_on_error=False, default_env=False)
    parser.add_method_arguments(pl.Trainer, "__init__", "trainer", fail_untyped=False, sub_configs=True)
    return parser


def _trainer_keys() -> list[str]:
    from lightning_hooks.core.introspect import keywords

    return keywords(pl.Trainer.__init__, skip=("self",)) or []


@dataclass
class TrainerRequest:
    """What the command line asks of the ``Trainer``: the options given (instantiated: callbacks and loggers are
    objects), where each came from, and the ``--logger`` names."""

    options: dict[str, Any] = field(default_factory=dict)
    #: each option's origin on the command line (``"--trainer.max_epochs 3"``, ``"--trainer-config t.yaml"``)
    origins: dict[str, str] = field(default_factory=dict)
    loggers: tuple[str, ...] = ()
    #: the family's own flags given on the command line (:data:`FLAGS`), which a ``--trainer.KEY`` must not contradict
    flags: dict[str, Owned] = field(default_factory=dict)

    @property
    def has_loggers(self) -> bool:
        """Whether the Trainer will have loggers (``--logger``, or a ``--trainer.logger`` other than false)."""
        return bool(self.loggers or self.options.get("logger"))

    @classmethod
    def from_args(cls, args: argparse.Namespace, trainer_argv: Sequence[str] = (),
                  parser: argparse.ArgumentParser | None = None) -> TrainerRequest:  # fmt: skip  # parameters aligned under the signature
        """Read ``--logger``, ``--trainer-config`` and the ``--trainer.KEY VALUE`` items (later ones win), each typed
        by ``Trainer.__init__``'s signature; an unknown key or a value of the wrong type is a :class:`TrainerOptionError`.
        ``parser``: the family's, whose :data:`FLAGS` given other than their defaults are kept in :attr:`flags`.
        With ``--logger mlflow``, MLflow is imported here, before a family opens its log file
        (:func:`_import_mlflow_first`)."""
        config = getattr(args, "trainer_config", None)
        argv = ([f"--trainer={config}"] if config else []) + list(trainer_argv)
        request = cls(loggers=tuple(dict.fromkeys(getattr(args, "logger", None) or ())),
                      flags=given_flags(parser, args, FLAGS) if parser is not None else {})  # fmt: skip  # arguments aligned under the call
        if argv:
            reader = _parser()
            try:
                given = reader.parse_args(argv, defaults=False).trainer
                instantiated = reader.instantiate(reader.parse_args(argv)).trainer
            except (argparse.ArgumentError, ValueError, TypeError) as err:
                raise TrainerOptionError(f"{_explain(err, argv)}") from err
            for key in vars(given):
                if not key.startswith("__"):
                    request.options[key] = getattr(instantiated, key)
                    request.origins[key] = _origin(key, trainer_argv, config)
        _import_mlflow_first(request.loggers)
        return request

    def resolve(self, defaults: Mapping[str, Any], owned: Mapping[str, Owned], *, save_dir: str, name: str,
                callbacks: Sequence[Any] = ()) -> dict[str, Any]:  # fmt: skip  # parameters aligned under the signature
        """The ``Trainer`` keywords: ``defaults`` (the family's), the options asked for, ``owned``'s values, the
        loggers (:func:`build_loggers`, under ``save_dir``, run name ``name``; the W&B runs they start end with the
        fit, :class:`WandbRunsFinished`) and ``callbacks`` before the asked ones. An asked option that ``owned``
        decides otherwise raises a :class:`TrainerOptionError` naming both sides; a ``ModelCheckpoint`` among the asked
        callbacks turns Lightning's checkpointing on."""
        asked = dict(self.options)
        if self.loggers:
            asked_logger = self.origins.get("logger")
            if asked_logger is not None:
                raise TrainerOptionError(
                    f"{asked_logger} contradicts --logger {' --logger '.join(self.loggers)}: "
                    "give the loggers one way (--logger for the built-in ones, --trainer.logger for another class)."
                )
            asked["logger"] = build_loggers(self.loggers, save_dir, name)
        for key, own in {**self.flags, **with_loop_groups(owned)}.items():
            if key in asked and key in self.origins and (own.value is ANY or asked[key] != own.value):
                raise TrainerOptionError(
                    f"{self.origins[key]} contradicts {own.side}"
                    + (f": {own.way_out}" if own.way_out else ": give it one way.")
                )
        options = {**defaults, **asked, **{k: o.value for k, o in owned.items() if o.value is not ANY}}
        options["callbacks"] = [*callbacks, *_as_list(asked.get("callbacks"))]
        if "mlflow" in self.loggers:
            options["callbacks"].append(TrackingUriRestored())
        if "wandb" in self.loggers:
            wandb_loggers = [lg for lg in asked["logger"] if isinstance(lg, submodule("loggers").WandbLogger)]
            options["callbacks"].append(WandbRunsFinished(wandb_loggers))
        if any(isinstance(cb, pl.callbacks.ModelCheckpoint) for cb in options["callbacks"]):
            options["enable_checkpointing"] = True
        return {k: v for k, v in options.items() if v is not None or k in asked}


def with_loop_groups(owned: Mapping[str, Owned]) -> dict[str, Owned]:
    """``owned`` and, for each of :data:`LOOP_GROUPS` one of whose options it holds, the group's other options at
    Lightning's defaults, decided by the same side: ``--trainer.max_steps 4`` beside ``max_epochs`` from
    ``train_cfg`` contradicts ``train_cfg``, as ``--trainer.val_check_interval 2`` beside its ``val_interval``."""
    result = dict(owned)
    for group in LOOP_GROUPS:
        decided = next((owned[key] for key in group if key in owned), None)
        if decided is not None:
            for key, default in group.items():
                result.setdefault(key, Owned(default, decided.side, decided.way_out))
    return result


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _origin(key: str, trainer_argv: Sequence[str], config: str | None) -> str:
    """Where ``key`` was given: its last ``--trainer.KEY`` item (with its value), else the YAML file."""
    found = ""
    for i, item in enumerate(trainer_argv):
        head = item.split("=", 1)[0].removesuffix("+")
        if head == f"{PREFIX}{key}" or head.startswith(f"{PREFIX}{key}."):
            value = "" if "=" in item or i + 1 >= len(trainer_argv) else f" {trainer_argv[i + 1]}"
            found = f"{item}{value}"
    return found or f"{key}: in --trainer-config {config}"


def _explain(err: Exception, argv: Sequence[str]) -> str:
    """jsonargparse's message, with the accepted keys named for an unknown ``--trainer.KEY``."""
    text = str(err)
    if "unrecognized arguments" in text:
        keys = _trainer_keys()
        for item in argv:
            key = item.split("=", 1)[0].removesuffix("+").removeprefix(PREFIX).split(".")[0]
            if item.startswith(PREFIX) and key not in keys:
                return f"--trainer.{key}: {unknown_name('lightning.Trainer option', key, keys, listed='Accepted')}"
    return f"a Trainer option ({' '.join(argv)}): {text}"


# ------------------------------------------------------------------------------------------------------ loggers
def _import_mlflow_first(loggers: Sequence[str]) -> None:
    """Import MLflow now where ``loggers`` name ``mlflow``, before a family opens its run's log file (it builds the
    Trainer's loggers later): importing mlflow configures logging (``logging.config.dictConfig``), which closes every
    handler of the process, and a log file opened before (OpenMMLab 1.x's ``{timestamp}.log``, a ``FileHandler`` in
    mode ``w``, which logging does not open again once closed) took no line after it. Without ``mlflow`` it imports
    nothing: MLflow is heavy, and a request without it does not need it."""
    if "mlflow" in loggers:
        import mlflow  # noqa: F401


def build_loggers(names: Sequence[str], save_dir: str, name: str) -> list[Any]:
    """One Lightning logger per ``--logger`` name, each writing under ``save_dir``: ``csv`` in
    ``lightning_logs/version_N``, ``tensorboard`` in ``tensorboard/version_N``, ``wandb`` in ``wandb/`` (offline
    unless ``WANDB_API_KEY``, ``WANDB_BASE_URL`` or ``WANDB_MODE`` is set), ``mlflow`` in a ``file:`` store
    ``mlruns/`` (unless ``MLFLOW_TRACKING_URI`` names one); ``name`` is the W&B run and MLflow experiment."""
    return [_BUILDERS[logger](os.path.abspath(save_dir), name) for logger in names]


def _csv(save_dir: str, name: str) -> Any:
    return submodule("loggers").CSVLogger(save_dir, name="lightning_logs")


def _tensorboard(save_dir: str, name: str) -> Any:
    return submodule("loggers").TensorBoardLogger(save_dir, name="tensorboard", default_hp_metric=False)


def _wandb(save_dir: str, name: str) -> Any:
    configured = any(os.environ.get(v) for v in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_MODE"))
    os.makedirs(save_dir, exist_ok=True)
    logger = submodule("loggers").WandbLogger(name=name, save_dir=save_dir, offline=not configured)
    drop_unset_wandb_anonymous(logger)  # else wandb warns on every run that a setting nobody gave will go away
    return logger


class TrackingUriRestored(pl.Callback):
    """Puts MLflow's tracking URI back as it was before the run, when the run ends: Lightning's ``MLFlowLogger``
    calls ``mlflow.set_tracking_uri`` with the run's store, which MLflow also exports as ``MLFLOW_TRACKING_URI``, so a
    later run in the process (a notebook, a test) took that variable as the user's and logged into this run's store.

    Example::

        Trainer(logger=MLFlowLogger(...), callbacks=[TrackingUriRestored()])"""

    def __init__(self) -> None:
        self.before = os.environ.get("MLFLOW_TRACKING_URI")

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        import mlflow

        if os.environ.get("MLFLOW_TRACKING_URI") != self.before:
            mlflow.set_tracking_uri(self.before)  # type: ignore[arg-type]  # MLflow's code takes None: it unsets both


class WandbRunsFinished(pl.Callback):
    """Ends the W&B runs of ``loggers`` (the ``WandbLogger`` s ``lightning-hooks train`` built) when the run ends:
    finished (exit code 0) or failed (1), as a W&B user's script calls ``wandb.finish()``. Lightning's logger leaves its
    run to wandb's exit hook, which hands the exit record to wandb's service after the interpreter has begun to exit:
    under torchrun the agent ends a finished rank's process group (``os.killpg``) and can take the service with it
    before it writes the record, and a later run in the process would find this one still open.

    Example::

        logger = WandbLogger(save_dir="work_dirs/run", offline=True)
        Trainer(logger=logger, callbacks=[WandbRunsFinished([logger])])"""

    def __init__(self, loggers: Sequence[Any]) -> None:
        self.loggers = list(loggers)

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._finish(0)

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._finish(1)

    def _finish(self, exit_code: int) -> None:
        for logger in self.loggers:
            run = wandb_run_made(logger)
            if run is not None:
                run.finish(exit_code=exit_code)


def _mlflow(save_dir: str, name: str) -> Any:
    with _client_made_when_used():
        return _mlflow_logger(save_dir, name)


def _mlflow_logger(save_dir: str, name: str) -> Any:
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return submodule("loggers").MLFlowLogger(experiment_name=name, tracking_uri=uri)
    with warnings.catch_warnings():
        # MLflow 3.x warns that the file: store (which the logger opens here) is deprecated: a store the user did not
        # choose; MLFLOW_TRACKING_URI (e.g. sqlite:///mlflow.db) chooses one, and then the warning is theirs
        warnings.filterwarnings("ignore", message="The filesystem tracking backend", category=FutureWarning)
        return submodule("loggers").MLFlowLogger(experiment_name=name,
                                                 tracking_uri=f"file:{os.path.join(save_dir, 'mlruns')}")  # fmt: skip  # arguments aligned under the call


@contextlib.contextmanager
def _client_made_when_used() -> Iterator[None]:
    """On a rank other than 0, ``MLFlowLogger``'s ``MlflowClient`` made when first used rather than when the logger is
    built: making it makes a ``file:`` store (its folders and default experiment), which rank 0 alone writes, as every
    store of the run; Lightning uses the client on rank 0 only (``experiment``, ``log_*``). Ranks that start before
    the Trainer is built (torchrun, mmcv's processes) would otherwise race rank 0 to make the store."""
    import importlib

    tracking: Any = importlib.import_module("mlflow.tracking")
    real = tracking.MlflowClient
    if getattr(rank_zero_only, "rank", 0) == 0:  # the process's rank, which Lightning reads at import
        yield
        return

    class MadeWhenUsed:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._arguments = (args, kwargs)

        def __getattr__(self, key: str) -> Any:
            if key.startswith("__") or key == "_arguments":
                raise AttributeError(key)
            if "_client" not in vars(self):
                self._client = real(*self._arguments[0], **self._arguments[1])
            return getattr(self._client, key)

    tracking.MlflowClient = MadeWhenUsed  # only while Lightning's MLFlowLogger.__init__ imports it
    try:
        yield
    finally:
        tracking.MlflowClient = real


_BUILDERS: dict[str, Callable[[str, str], Any]] = {"csv": _csv, "tensorboard": _tensorboard, "wandb": _wandb,
                                                   "mlflow": _mlflow}  # fmt: skip  # one builder per logger, wrapped at 120


def given_flags(parser: argparse.ArgumentParser, args: argparse.Namespace, flags: Mapping[str, str]) -> dict[str, Owned]:
    """The ``Trainer`` options a family's own flags set (``{"devices": "--devices"}``: the flag's ``dest`` is the
    option's name): those given a value other than their default (a number as an ``int``: ``--devices 2`` is 2)."""
    owned = {}
    for key, flag in flags.items():
        value = getattr(args, key, None)
        if value is not None and value != parser.get_default(key):
            number = isinstance(value, str) and value.lstrip("-").isdigit()
            owned[key] = Owned(int(value) if number else value, f"{flag} {value}")
    return owned
