"""``lightning-hooks train``: a whole legacy config trained under Lightning, as the family's own entry point did.

Each family lists the entry points it stands in for (:class:`~lightning_hooks.core.family.TrainCommand`); the first
argument (a config file, a Hydra ``config=...``) picks the one that claims it, which parses the rest.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from lightning_hooks import families


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


def main(argv: list[str]) -> None:
    """Run the entry point that claims ``argv[0]`` with the whole of ``argv``."""
    if not argv or argv[0] in ("-h", "--help"):
        if not argv:
            fail("a config is required")
        print(usage())
        return
    for family in families.registered():
        for command in family.train:
            if command.claims(argv[0]):
                command.main(argv)
                return
    fail(f"no registered family trains {argv[0]!r}: give a config file of one of the kinds above")
