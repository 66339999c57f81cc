"""``lightning-hooks train``: a whole legacy config trained under Lightning, as the family's own entry point did.

Each family lists the entry points it stands in for (:class:`~lightning_hooks.core.family.TrainCommand`); the kind
of the first argument (a config file, a Hydra ``config=...``), decided once by
:func:`~lightning_hooks.core.config_kind.config_kind`, picks the one that trains it, which parses the rest.

A bad input (a file that does not exist or does not parse, a checkpoint that is not one, a name no registry knows)
is one short message on stderr naming it and the way out, and exit status 1: an
:class:`~lightning_hooks.core.errors.InputError`, or the legacy library's own error that the entry point's
``explain`` turns into one. Other errors keep their traceback.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from lightning_hooks import families
from lightning_hooks.core.config_kind import config_kind
from lightning_hooks.core.errors import ConfigError, InputError
from lightning_hooks.core.family import TrainCommand


def usage() -> str:
    """The synopsis of every registered family's entry points."""
    lines = ["usage: lightning-hooks train CONFIG [options]", "", "Trains a legacy config under Lightning:"]
    for family in families.registered():
        for command in family.train:
            lines.append(f"  lightning-hooks train {command.usage}\n      as {command.legacy}")
    lines.append("\nlightning-hooks train CONFIG --help lists the options of that config's entry point.")
    return "\n".join(lines)


def fail(message: str) -> NoReturn:
    print(f"{usage()}\nlightning-hooks train: error: {message}", file=sys.stderr)
    sys.exit(2)


def bad_input(err: InputError) -> NoReturn:
    """Print ``err``'s message (no traceback: the user fixes the input, not the code) and exit with status 1."""
    print(f"lightning-hooks train: error: {err}", file=sys.stderr)
    sys.exit(1)


def command_for(first: str) -> TrainCommand | None:
    """The registered entry point that trains configs of ``first``'s kind (a bad file: :class:`InputError`)."""
    kind = config_kind(first)
    return next((c for family in families.registered() for c in family.train if c.kind == kind), None)


def explain(command: TrainCommand, err: BaseException) -> InputError | None:
    """The short error of ours behind ``err``: a config we refuse (a :class:`ConfigError`, whose message names the
    option and the way out), a checkpoint file that is not one (for every family), or what the entry point's
    ``explain`` makes of its library's error (a name no registry knows); None: ``err`` stands."""
    from lightning_hooks.core.checkpoint_files import checkpoint_error  # imports torch, which --help does not

    if isinstance(err, InputError):
        return None  # raised as it is
    if isinstance(err, ConfigError):
        return InputError(str(err))
    return checkpoint_error(err) or (command.explain(err) if command.explain is not None else None)


def process_group_started() -> bool:
    """Whether this process has joined a ``torch.distributed`` process group (without importing torch for it)."""
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def end_process_group(started_before: bool) -> None:
    """Leave the process group the run started (Lightning's DDP strategy, or the entry point's ``--launcher``), unless
    it was there before the command. Lightning destroys only an NCCL group at exit; a gloo group left to the
    interpreter's exit has aborted ranks whose training had finished (SIGABRT after "terminate called without an
    active exception"), and torchrun then reports the whole run failed."""
    if not started_before and process_group_started():
        sys.modules["torch.distributed"].destroy_process_group()


def main(argv: list[str]) -> None:
    """Run the entry point that trains ``argv[0]``'s kind of config with the whole of ``argv``; then leave the
    process group the run started (:func:`end_process_group`)."""
    if not argv or argv[0] in ("-h", "--help"):
        if not argv:
            fail("a config is required")
        print(usage())
        return
    try:
        command = command_for(argv[0])
        if command is None:
            fail(f"no registered family trains {argv[0]!r}: give a config file of one of the kinds above")
        from lightning_hooks.core.console import quiet_upstream_notices

        quiet_upstream_notices()
        started_before = process_group_started()
        try:
            command.main(argv)
        except Exception as err:
            explained = explain(command, err)
            if explained is None:
                raise
            raise explained from err
        end_process_group(started_before)
    except InputError as err:
        bad_input(err)
