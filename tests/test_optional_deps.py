"""The legacy frameworks are not dependencies: lightning-hooks imports and runs compat hooks without any of them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from lh_testing import subprocess_env

ROOT = Path(__file__).parents[1]

SCRIPT = textwrap.dedent(
    """
    import importlib.machinery, sys

    class Hide(importlib.machinery.PathFinder):  # as if the legacy frameworks were not installed
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name.split(".")[0] in {"mmengine", "classy_vision", "imix", "vissl", "fvcore"}:
                return None
            return importlib.machinery.PathFinder.find_spec(name, path, target)

    sys.meta_path = [Hide if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
    import lightning as L
    from lightning_hooks import adapt, build_callbacks
    from lightning_hooks.compat.classy import ClassyHook
    from lightning_hooks.compat.imix import HookBase
    from lh_testing import TinyModule, tiny_loader

    class Steps(ClassyHook):
        on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop
        def __init__(self):
            super().__init__()
            self.state.steps = 0
        def on_step(self, task):
            self.state.steps += 1

    class Iters(HookBase):
        iters = 0
        def after_train_iter(self):
            Iters.iters += 1

    steps = Steps()
    callbacks = adapt([steps, Iters()]) + build_callbacks({"callbacks": [{"_target_": "lightning_hooks.callbacks.EMA"}]})
    L.Trainer(max_steps=3, callbacks=callbacks, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False).fit(TinyModule(), tiny_loader())
    assert steps.state.steps == 3 and Iters.iters == 3, (steps.state.steps, Iters.iters)
    assert not {"mmengine", "classy_vision", "imix"} & set(sys.modules)
    print("ok")
    """
)


def test_package_works_without_any_legacy_framework(tmp_path):
    env = subprocess_env(inherit=False)
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
