"""The DeepSpeed config each side hands ``deepspeed.initialize`` for a FlexibleRunner config, as DeepSpeed parses it:
MMEngine's ``FlexibleRunner.from_cfg(cfg).strategy`` (the real host's ``DeepSpeedStrategy``, built on CPU) and
``lightning_hooks``'s Lightning ``DeepSpeedStrategy`` (``strategy.from_config``) inside a CPU ``Trainer``, with the
config Lightning completes at setup (batch size, accumulation, clipping, precision).

Run with ``.venv/deepspeed-site`` on ``PYTHONPATH`` (``scripts/setup.sh test`` installs DeepSpeed there, outside the
venv's import path: MMEngine imports DeepSpeed, and with it mlflow, in every process that imports ``mmengine.runner``
when it is importable, ~5-12 s each)::

    python deepspeed_strategies.py OUT.json CONFIG...

writes, per config, ``{"mmengine": {attribute: repr}, "lightning": {attribute: repr}, "built": {...}}``: every
attribute of DeepSpeed's ``DeepSpeedConfig`` for each side's config, and facts of the Lightning strategy object.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from openmmlab_stubs import import_openmmlab

#: ``DeepSpeedConfig`` attributes that are not the config's: the process's rank and world size, and the dict itself
NOT_OPTIONS = ("global_rank", "world_size", "_param_dict", "mpu", "mesh_device")


def parsed(config: dict) -> dict[str, str]:
    """Every attribute of DeepSpeed's own parse of ``config`` (``DeepSpeedConfig``, which ``deepspeed.initialize``
    builds from it), as its repr."""
    from deepspeed.runtime.config import DeepSpeedConfig

    found = vars(DeepSpeedConfig(json.loads(json.dumps(config))))
    return {key: _repr(value) for key, value in sorted(found.items()) if key not in NOT_OPTIONS}


def _repr(value: object) -> str:
    """``repr``, or for an object without one of its own (``DeepSpeedCommsConfig``) its attributes'."""
    text = repr(value)
    return repr(sorted(vars(value).items())) if " object at 0x" in text else text


def mmengine_config(cfg, work_dir: str) -> dict:
    """The config MMEngine's ``DeepSpeedStrategy`` passes ``deepspeed.initialize`` (``FlexibleRunner`` builds it at
    construction; the engine is built at ``train()``)."""
    from mmengine._strategy import deepspeed
    from mmengine.runner import FlexibleRunner

    # each DeepSpeedStrategy registers DeepSpeed's optimizers in MMEngine's OPTIMIZERS, and a second registration
    # raises (FlexibleRunner builds one per process; this builds one per config): the first one stands for all
    if "DeepSpeedCPUAdam" in deepspeed.OPTIMIZERS.module_dict:
        deepspeed.register_deepspeed_optimizers = list
    cfg = cfg.copy()
    cfg.work_dir = work_dir
    return dict(FlexibleRunner.from_cfg(cfg).strategy.config)


def lightning_config(cfg) -> tuple[dict, dict]:
    """The config Lightning's ``DeepSpeedStrategy`` from ``strategy.from_config`` passes ``deepspeed.initialize``, as
    its setup completes it (``_init_config_if_needed``, with a module connected) in a CPU ``Trainer``, and facts of
    the strategy object."""
    from lightning_hooks.core.lightning_api import pl
    from lightning_hooks.families.mmengine import strategy

    built = strategy.from_config(cfg)
    trainer = pl.Trainer(strategy=built, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    module = pl.LightningModule()
    module.trainer = trainer
    trainer.strategy.connect(module)
    trainer.strategy._init_config_if_needed()
    facts = {"class": [c.__name__ for c in type(trainer.strategy).__mro__],
             "is_trainers": trainer.strategy is built, "zero_stage_3": built.zero_stage_3,
             "inputs_to_half": list(built.inputs_to_half or []), "precision": trainer.precision}  # fmt: skip
    return dict(built.config), facts


def main(out: str, *configs: str) -> None:
    import_openmmlab(("mmpretrain",))
    from mmengine.config import Config

    results = {}
    for path in configs:
        cfg = Config.fromfile(path)
        reference = mmengine_config(cfg, tempfile.mkdtemp(prefix="ds-runner-"))
        ours, facts = lightning_config(cfg)
        results[path] = {"mmengine": parsed(reference), "lightning": parsed(ours), "built": facts,
                         "lightning_config": ours}  # fmt: skip
    Path(out).write_text(json.dumps(results, indent=1, default=repr))


if __name__ == "__main__":
    main(*sys.argv[1:])
