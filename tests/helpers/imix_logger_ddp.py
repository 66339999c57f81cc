"""One rank of a tiny iMIX training under Lightning DDP (gloo, CPU) with ``LightningLoggerHook`` and every Lightning
logger (``csv``, ``tensorboard``, ``mlflow``, ``wandb`` offline, as ``lightning-hooks train --logger`` builds them),
launched as iMIX launches its ranks: the process group is up before the hooks are built, and the writers iMIX's
``Organizer.build_hooks`` adds on the main process only (``PeriodicLogger`` with ``JSONLoggerHook`` and
``TensorboardLoggerHook``) are built on rank 0 only; Lightning's DDP strategy joins that group. (The Organizer itself
wraps its model in iMIX's DistributedDataParallel once the group is up: under Lightning the model stays unwrapped, so
its parts are built here, those of ``imix_reference``'s config.)

    python -m torch.distributed.run --nproc_per_node 2 imix_logger_ddp.py WORK_DIR
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import torch.distributed as dist

PERIOD = 2  # log_config.period
EPOCHS = 2
BATCHES = 8  # 4 a rank: PeriodicLogger writes at each epoch's 2nd and 4th iteration and at its end


def main(work_dir: Path) -> None:
    dist.init_process_group("gloo")  # iMIX's launch: the group first, then the hooks
    import imix.utils.distributed_info as comm
    import lightning as L
    import torch
    from imix.engine.hooks import (
        IterationTimerHook,
        JSONLoggerHook,
        LRSchedulerHook,
        OptimizerHook,
        PeriodicLogger,
        TensorboardLoggerHook,
    )
    from imix_reference import IMIXModule, Losser, TinyNet, config, tiny_data

    from lightning_hooks import IMIXAdapter
    from lightning_hooks.core.trainer_options import build_loggers
    from lightning_hooks.families.imix.lightning_logger import LightningLoggerHook

    cfg = config(work_dir, train_data=dict(batches=BATCHES), log_config=dict(period=PERIOD), total_epochs=EPOCHS)
    model = TinyNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.optimizer.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=cfg.lr_config.step_size, gamma=cfg.lr_config.gamma)
    hooks = [OptimizerHook(), LRSchedulerHook(optimizer, scheduler), IterationTimerHook(), LightningLoggerHook()]
    if comm.is_main_process():  # as Organizer.build_hooks
        writers = [JSONLoggerHook(str(work_dir / "training_status.json")), TensorboardLoggerHook(str(work_dir))]
        hooks.append(PeriodicLogger(writers, PERIOD))
    module = IMIXModule(types.SimpleNamespace(model=model, losses_fn=Losser(cfg.loss), optimizer=optimizer))
    trainer = L.Trainer(
        accelerator="cpu", strategy="ddp", devices=2, max_epochs=EPOCHS, enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False, default_root_dir=str(work_dir),
        logger=build_loggers(["csv", "tensorboard", "mlflow", "wandb"], str(work_dir), "imix"),
        callbacks=[IMIXAdapter(hooks, cfg=cfg, work_dir=str(work_dir))],
    )  # fmt: skip
    trainer.fit(module, tiny_data(cfg))
    import wandb

    wandb.finish()  # as a W&B user's script ends its run: torchrun may end the rank's process group before atexit's
    dist.destroy_process_group()  # the group this script started: at the interpreter's exit gloo once aborted a rank


if __name__ == "__main__":
    main(Path(sys.argv[1]))
