"""``lightning_hooks.compat.classy``: Classy's hook contract and registry, and the opt-in import alias."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lightning_hooks.compat import classy as compat

ROOT = Path(__file__).resolve().parents[3]

HIDE_CLASSY = """
import importlib.machinery, sys

class HideClassy(importlib.machinery.PathFinder):
    # stands in for an environment without classy_vision: the path finder no longer sees the installed package
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "classy_vision" or name.startswith("classy_vision."):
            return None
        return super().find_spec(name, path, target)

sys.meta_path = [HideClassy if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""

HOOK_FILE = """
from classy_vision.hooks import ClassyHook, register_hook

@register_hook("counting")
class Counting(ClassyHook):
    on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

    def __init__(self, start=0):
        super().__init__()
        self.state.count = start

    def on_step(self, task):
        self.state.count += 1
"""


def _run(tmp_path: Path, script: str) -> str:
    (tmp_path / "my_hooks.py").write_text(HOOK_FILE)
    env_path = f"{ROOT}:{ROOT / 'tests' / 'helpers'}:{tmp_path}"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_classy_alias_serves_hook_files_without_classy_vision(tmp_path):
    out = _run(tmp_path, HIDE_CLASSY + """
    try:
        import classy_vision
        raise SystemExit("classy_vision still importable")
    except ModuleNotFoundError:
        pass
    from lightning_hooks.compat.classy import install_import_alias, ClassyHook
    assert install_import_alias() and install_import_alias()  # idempotent
    from my_hooks import Counting
    from classy_vision.hooks import build_hooks, register_hook
    assert issubclass(Counting, ClassyHook)
    try:
        register_hook("counting")(Counting)
        raise SystemExit("duplicate name accepted")
    except ValueError:
        pass
    hooks = build_hooks([{"name": "counting", "start": 1}])
    from classy_testkit import Net, loader, make_trainer
    from lightning_hooks import adapt
    (adapter,) = adapt(hooks)
    make_trainer("run", [adapter], max_epochs=1).fit(Net(), loader(), loader(8, seed=1))
    print(type(adapter).__name__, hooks[0].state.count, "classy_vision.generic" in sys.modules)
    """.replace("\n    ", "\n"))
    assert out == "ClassyAdapter 7 False"  # 1 + 4 train + 2 eval steps; the real package never loaded


def test_classy_alias_never_shadows_an_installed_classy_vision(tmp_path):
    out = _run(tmp_path, """
    from lightning_hooks.compat.classy import install_import_alias, ClassyHook
    installed = install_import_alias()
    import classy_vision.hooks as hooks
    from my_hooks import Counting
    print(installed, hooks.ClassyHook is ClassyHook, "site-packages" in hooks.__file__, Counting.__mro__[1].__module__)
    """.replace("\n    ", "\n"))
    assert out == "False False True classy_vision.hooks.classy_hook"


def test_classy_compat_contracts():
    @compat.register_hook("lightning_hooks_compat_probe")
    class Probe(compat.ClassyHook):
        on_start = on_phase_start = on_step = on_phase_end = compat.ClassyHook._noop

        def __init__(self, value: int = 0) -> None:
            super().__init__()
            self.state.value = value

        def on_end(self, task):
            self.state.value += 1

    hook = compat.build_hook({"name": "lightning_hooks_compat_probe", "value": 3})
    assert hook.get_classy_state() == {"value": 3} and Probe.name() == "Probe"
    hook.set_classy_state({"value": 5, "extra": 1})
    assert hook.state.value == 5 and hook.state.extra == 1
    assert [h.state.value for h in compat.build_hooks([{"name": "lightning_hooks_compat_probe"}] * 2)] == [0, 0]
    with pytest.raises(ValueError, match="duplicate class name"):
        compat.register_hook("other_name")(Probe)
    with pytest.raises(ValueError, match="must extend ClassyHook"):
        compat.register_hook("not_a_hook")(object)
    with pytest.raises(KeyError, match="Unregistered hook 'missing'"):
        compat.build_hook({"name": "missing"})

    class Incomplete(compat.ClassyHook):
        on_start = compat.ClassyHook._noop

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()
    assert [f.value for f in compat.ClassyHookFunctions] == [
        "on_start", "on_phase_start", "on_forward", "on_loss_and_meter", "on_step", "on_phase_end", "on_end"]
