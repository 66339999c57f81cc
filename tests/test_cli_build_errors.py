"""``lightning-hooks fit --config``: an object that refuses its arguments ends the command on one line.

The three bad configs run as ``python -m lightning_hooks fit --config bad.yaml`` one after the other in one child
process (``lh_testing.commands_in_one_process``), which imports Lightning and the families once instead of three times.
"""

from __future__ import annotations

import pytest
from lh_testing import commands_in_one_process, subprocess_env

CONFIG = """trainer:
  callbacks:
    - class_path: lightning_hooks.{adapter}
      init_args:
        hooks: [{hook}]
seed_everything: 0
"""
CASES = [
    ("MMEngineAdapter", "{type: EMAHok}", "MMEngineAdapter: build_hooks: hook type 'EMAHok' is not registered"),
    ("ClassyAdapter", "{name: precise_bn_hok}", "ClassyAdapter: unknown Classy hook name 'precise_bn_hok'"),
    ("IMIXAdapter", "{type: IterationTimerHok}", "IMIXAdapter: unknown iMIX hook type 'IterationTimerHok'"),
]  # fmt: skip


@pytest.fixture(scope="module")
def commands(tmp_path_factory) -> dict[str, tuple[int, str]]:
    """Each bad config's command: its exit status and stderr, by adapter name."""
    folder = tmp_path_factory.mktemp("bad_configs")
    for adapter, hook, _ in CASES:
        (folder / f"{adapter}.yaml").write_text(CONFIG.format(adapter=adapter, hook=hook))
    adapters = [adapter for adapter, _, _ in CASES]
    runs = [(folder, ["fit", "--config", f"{adapter}.yaml"]) for adapter in adapters]
    return dict(zip(adapters, commands_in_one_process(runs, subprocess_env()), strict=True))


@pytest.mark.parametrize("adapter, hook, expected", CASES)
def test_cli_unknown_hook_type_is_one_line_with_did_you_mean(adapter, hook, expected, commands):
    code, stderr = commands[adapter]
    lines = [line for line in stderr.splitlines() if "error" in line or "Traceback" in line]
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith(f"lightning-hooks fit: error: {expected}"), stderr[-3000:]
    assert "Did you mean" in lines[0]
