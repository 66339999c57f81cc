"""Equal stateful callbacks are numbered by their position in ``trainer.callbacks`` at setup, so a new process with
the same callbacks in the same order resumes each one from its own state, whatever the order they were constructed
in and whatever instances of the class an earlier fit left alive.

Run as a script, this file is the resuming process::

    python tests/core/test_state_keys.py CHECKPOINT OUT.json

It builds two adapters and two ``AnomalyDetector``\\ s (roles ``a`` and ``b``), resumes from CHECKPOINT with
``trainer.callbacks`` ordered ``[b, a]`` as the saving process had them, once with ``b`` constructed first and once
with ``a`` first, and writes the state each instance resumed with to OUT.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lh_testing import TinyModule, load_options, tiny_loader

from lightning_hooks import ClassyAdapter
from lightning_hooks.callbacks import AnomalyDetector
from lightning_hooks.compat import classy as compat_classy
from lightning_hooks.core.adapter_state import base_state_key
from lh_testing import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


class Tag(compat_classy.ClassyHook):
    """A hook whose only state is a tag (saved in the adapter's checkpoint state)."""

    on_start = on_phase_start = on_step = on_phase_end = on_end = compat_classy.ClassyHook._noop

    def __init__(self) -> None:
        super().__init__()
        self.state.tag = None


def _build(order: str) -> dict[str, tuple[ClassyAdapter, AnomalyDetector]]:
    """The instances of roles ``a`` and ``b``, constructed in ``order`` (``first-a`` or ``first-b``)."""
    built = {}
    for role in ("a", "b") if order == "first-a" else ("b", "a"):
        built[role] = (ClassyAdapter([Tag()]), AnomalyDetector(policy="skip"))
    return built


def _fit(callbacks: list[Any], root: Path, max_epochs: int, ckpt_path: Path | None = None) -> pl.Trainer:
    trainer = pl.Trainer(callbacks=callbacks, max_epochs=max_epochs, default_root_dir=root, accelerator="cpu",
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)  # fmt: skip
    trainer.fit(TinyModule(), tiny_loader(), tiny_loader(n=4), ckpt_path=ckpt_path, **load_options(None))
    return trainer


def _in_trainer_order(built: dict[str, tuple[ClassyAdapter, AnomalyDetector]]) -> list[Any]:
    """``[b, a]`` for each class: the reverse of the construction order of the saving process."""
    return [built["b"][0], built["a"][0], built["b"][1], built["a"][1]]


def _resumed_state(built: dict[str, tuple[ClassyAdapter, AnomalyDetector]]) -> dict[str, list[Any]]:
    return {role: [adapter.hooks[0].state.tag, detector.skipped_steps] for role, (adapter, detector) in built.items()}


def _resume(checkpoint: Path, out: Path) -> None:
    """Resume twice in this process, building the instances in either order; the second resume has the first one's
    instances alive, as the saving process had its stale ones."""
    resumed = {}
    for order in ("first-b", "first-a"):
        built = _build(order)
        _fit(_in_trainer_order(built), out.parent / order, max_epochs=2, ckpt_path=checkpoint)
        resumed[order] = _resumed_state(built)
    out.write_text(json.dumps(resumed))


def test_equal_callbacks_resume_their_own_state_in_a_new_process(tmp_path):
    # the saving process: a stale instance of each class alive (from an earlier fit), then two new instances of each
    # class given to the Trainer in the reverse of their construction order
    stale = ClassyAdapter([Tag()]), AnomalyDetector(policy="skip")
    _fit(list(stale), tmp_path / "stale", max_epochs=1)
    stale[0].hooks[0].state.tag, stale[1].skipped_steps = "stale", 9
    built = _build("first-a")
    callbacks = _in_trainer_order(built)
    trainer = _fit(callbacks, tmp_path / "run", max_epochs=1)
    for role, steps in (("a", 1), ("b", 2)):
        built[role][0].hooks[0].state.tag, built[role][1].skipped_steps = role, steps
    checkpoint = tmp_path / "run.ckpt"
    trainer.save_checkpoint(checkpoint)
    assert stale[0].hooks[0].state.tag == "stale"  # alive until the checkpoint is written

    out = tmp_path / "resumed.json"
    env = subprocess_env()
    proc = subprocess.run([sys.executable, __file__, str(checkpoint), str(out)], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    resumed = json.loads(out.read_text())
    own = {"a": ["a", 1], "b": ["b", 2]}  # [Tag's state, skipped_steps]
    assert resumed == {"first-b": own, "first-a": own}, f"each instance must resume its own state, got {resumed}"
    assert [c.state_key for c in callbacks] == [
        base_state_key("ClassyAdapter", ["Tag"]), base_state_key("ClassyAdapter", ["Tag"]) + "#1", "AnomalyDetector",
        "AnomalyDetector#1",
    ]  # numbered by position in trainer.callbacks  # fmt: skip



def test_a_key_read_before_setup_follows_the_position_setup_gives(tmp_path):
    """The key is kept in the instance once read (Lightning reads it at every callback call): the index setup gives
    replaces the one claimed at construction, and a new claim replaces the kept key too."""
    first, second = AnomalyDetector(policy="skip"), AnomalyDetector(policy="skip")
    assert first.state_key != second.state_key  # claimed at construction (instances of other tests may hold some)
    _fit([second, first], tmp_path, max_epochs=1)
    assert (second.state_key, first.state_key) == ("AnomalyDetector", "AnomalyDetector#1")
    first._init_state_key("Other")
    assert first.state_key == "Other"

if __name__ == "__main__":
    _resume(Path(sys.argv[1]), Path(sys.argv[2]))
