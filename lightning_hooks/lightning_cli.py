"""``lightning-hooks fit/validate/test``: LightningCLI with the demo's model and data as defaults, short errors."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from jsonargparse import Namespace

from lightning_hooks.console import ProgressBar, configure_logging
from lightning_hooks.core.errors import close_names
from lightning_hooks.core.lightning_api import submodule

if TYPE_CHECKING:  # the type checker reads `lightning.pytorch`; at run time the namespace lightning_api picked
    from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
else:
    LightningArgumentParser = submodule("cli").LightningArgumentParser
    LightningCLI = submodule("cli").LightningCLI

DEMO_MODEL, DEMO_DATA = "lightning_hooks.demo.DemoNet", "lightning_hooks.demo.SyntheticData"
BAR = f"{ProgressBar.__module__}.{ProgressBar.__qualname__}"


def short_error(message: str, options: Sequence[str] = ()) -> str:
    """The cause in a jsonargparse error, on one line, with "Did you mean" for an unknown option.

    jsonargparse reports a bad entry of a list of classes as a tree: every type it tried, each with its reason,
    then the value. The useful line is the reason for the class that was named (``class_path``). ``options`` are
    the parser's own keys, suggested for an unknown one.
    """
    lines = [line.strip().removeprefix("- ") for line in message.splitlines() if line.strip()]
    key = re.match(r'Parser key "([^"]+)":\s*(.*)', lines[0])
    where = f"{key.group(1)}: " if key else ""
    for i, line in enumerate(lines[:-1]):
        named = re.match(r"Problem with given class_path '([^']+)':", line)
        if named:
            reason = lines[i + 1]
            return f"{where}{named.group(1)}: {reason}{_did_you_mean(named.group(1), reason)}"
    if key:
        return where + (key.group(2) or (lines[1] if len(lines) > 1 else ""))
    unknown = re.search(r"does not accept option '([^']+)'|unrecognized arguments: --(\S+)", lines[0])
    close = close_names(unknown.group(1) or unknown.group(2), options, n=1) if unknown else []
    return lines[0] + (f". Did you mean '{close[0]}'?" if close else "")


def _did_you_mean(class_path: str, reason: str) -> str:
    unknown = re.search(r"Option '([^']+)' is not accepted|Key '([^']+)' is not expected", reason)
    if not unknown:
        return ""
    module, _, name = class_path.rpartition(".")
    try:
        params = list(inspect.signature(getattr(importlib.import_module(module), name)).parameters)
    except (ImportError, AttributeError, TypeError, ValueError):
        return ""
    close = close_names(unknown.group(1) or unknown.group(2), params, n=1)
    return f". Did you mean '{close[0]}'?" if close else f". {name} accepts: {', '.join(params)}"


def root_cause(err: BaseException) -> BaseException:
    """The first exception in ``err``'s chain (``raise ... from``, or raised while handling)."""
    while (err.__cause__ or err.__context__) is not None:
        err = err.__cause__ or err.__context__  # type: ignore[assignment]  # the loop condition says it is not None
    return err


def built_by(err: BaseException) -> str:
    """``"MMEngineAdapter: "`` for the innermost ``__init__`` of a lightning-hooks class in ``err``'s traceback."""
    name = ""
    tb = err.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if tb.tb_frame.f_code.co_name == "__init__" and type(owner).__module__.startswith("lightning_hooks."):
            name = f"{type(owner).__name__}: "
        tb = tb.tb_next
    return name


def message_of(err: BaseException) -> str:
    """An exception's message on one line, without the quotes ``KeyError`` adds."""
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    return " ".join(text.split()) or type(err).__name__


class ShortErrorParser(LightningArgumentParser):
    """LightningCLI's parser, printing a usage error as two lines instead of the whole usage."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:
            super().error(message, ex)
        parser = getattr(ex, "subcommand_parser", None) or self
        prog = parser.prog.replace(" [options]", "")
        options = [action.dest for action in parser._actions]
        sys.stderr.write(f"{prog}: error: {short_error(message, options)}\n(all options: {prog} --help)\n")
        sys.exit(2)


class LightningHooksCLI(LightningCLI):
    """LightningCLI whose model and data are any LightningModule and LightningDataModule named by ``class_path``.

    ``model`` defaults to the demo's ``DemoNet``; ``data`` is optional (a model may bring its own loaders) and
    defaults to the demo's ``SyntheticData`` when the model is ``DemoNet``. The progress bar is
    :data:`lightning_hooks.console.ProgressBar` unless the config names one, and logging is set up as the legacy
    hosts' entry points did (:func:`lightning_hooks.console.configure_logging`).
    """

    def __init__(self, args: list[str] | None = None) -> None:
        super().__init__(
            args=args, save_config_kwargs={"overwrite": True}, parser_class=ShortErrorParser,
            parser_kwargs={"prog": "lightning-hooks"},
        )  # fmt: skip  # options two a line

    def instantiate_classes(self) -> None:
        """Build the config's objects; an object that refuses its arguments (an unknown hook type, a bad option)
        ends the command with its own message on one line, as a misspelt option does, not a traceback."""
        try:
            super().instantiate_classes()
        except Exception as err:  # jsonargparse wraps the object's own error in its type-matching report
            cause = root_cause(err)
            if cause is err:
                raise
            prog = " ".join(filter(None, [self.parser.prog, self.subcommand]))
            sys.stderr.write(f"{prog}: error: {built_by(cause)}{message_of(cause)}\n")
            sys.exit(2)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.set_defaults({"model": {"class_path": DEMO_MODEL}})

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        if config.get("data") is None and config.model.class_path == DEMO_MODEL:
            config.data = Namespace(class_path=DEMO_DATA)
        callbacks = config.trainer.callbacks or []
        if config.trainer.enable_progress_bar is not False and not any("ProgressBar" in c.class_path for c in callbacks):
            config.trainer.callbacks = [*callbacks, Namespace(class_path=BAR, init_args=Namespace())]

    def before_fit(self) -> None:
        configure_logging(self.trainer)

    before_validate = before_test = before_fit
