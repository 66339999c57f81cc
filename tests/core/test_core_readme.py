"""The README's two commands are the contract; CI must run the test command exactly."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_ci_runs_the_readme_test_command_verbatim():
    demo, test = _commands()
    assert "lightning-hooks demo" in demo and "pytest" in test
    assert test in (ROOT / ".ci" / "run").read_text().splitlines()
