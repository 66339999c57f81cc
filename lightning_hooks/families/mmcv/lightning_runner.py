"""The runner an OpenMMLab 1.x training API (``train_model`` / ``train_detector`` / ``train_segmentor``) gets from
``lightning-hooks train``: a :class:`LightningRunner`, which collects what the API registers on it and, at
``runner.run(loaders, workflow)``, trains with ``lightning.Trainer`` and an :class:`MMCVAdapter` holding those hooks
(:func:`fit`).

The API builds it through its module's ``build_runner``, which :class:`LightningRunnerSwap` replaces for one call
of the API (and its ``wrap_distributed_model`` / ``build_ddp``, by
:func:`~lightning_hooks.families.mmcv.distributed.wrap_distributed`), with one undo.
"""

from __future__ import annotations

import copy
import functools
import os
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any

from lightning_hooks.core.errors import ConfigError, unknown_name
from lightning_hooks.families.mmcv.library import Library


class LightningRunner:
    """What the library's training API sees as its runner: it collects the hooks registered on it (mmcv's own
    ``register_*`` methods), and its ``run(data_loaders, workflow)`` trains under Lightning (:func:`fit`).

    Built by the ``build_runner`` that :class:`LightningRunnerSwap` hands the training API: ``cfg`` is mmcv's
    ``runner`` config (``type``, ``max_epochs`` / ``max_iters``); the other arguments are ``build_runner``'s
    ``default_args``.
    """

    def __init__(self, cfg: dict[str, Any], model: Any, optimizer: Any = None, work_dir: str | None = None,
                 logger: Any = None, meta: dict[str, Any] | None = None, batch_processor: Any = None,
                 trainer_options: dict[str, Any] | None = None) -> None:  # fmt: skip  # arguments aligned under the call
        from lightning_hooks.families.mmcv.runner import RUNNERS

        self.runner_cfg = dict(cfg)
        if self.runner_cfg.get("type") not in RUNNERS:
            unknown = unknown_name("runner type", str(self.runner_cfg.get("type")), RUNNERS, listed="Accepted")
            raise ConfigError(f"runner.type: {unknown}")
        if batch_processor is not None:
            raise ConfigError("runner: a batch_processor is not supported; give the model a train_step")
        self.model, self.optimizer, self.logger, self.meta = model, optimizer, logger, meta
        self.work_dir = os.path.abspath(work_dir) if isinstance(work_dir, str) else work_dir  # as mmcv's BaseRunner
        self.timestamp: str | None = None
        self._hooks: list[Any] = []
        self.trainer_options = dict(trainer_options or {})
        self.trainer: Any = None
        #: ``(epoch, iter)`` of the mmcv checkpoint :meth:`resume` loaded, where the fit goes on
        self.resumed_at: tuple[int, int] | None = None

    # mmcv's BaseRunner registration methods, on this runner's hook queue
    def __getattr__(self, name: str) -> Any:
        from mmcv.runner import BaseRunner

        if name.startswith("register_") and hasattr(BaseRunner, name):
            return getattr(BaseRunner, name).__get__(self)
        raise AttributeError(
            f"lightning-hooks' LightningRunner (the runner `lightning-hooks train` hands the OpenMMLab training API) "
            f"has no attribute {name!r}; open an issue naming the training function that reads it."
        )

    @property
    def hooks(self) -> list[Any]:
        return self._hooks

    def load_checkpoint(self, filename: str, map_location: Any = "cpu", strict: bool = False,
                        revise_keys: list | None = None) -> dict[str, Any]:  # fmt: skip  # arguments aligned under the call
        """``load_from``: mmcv's ``load_checkpoint`` into the model now, as mmcv's runner does; a local file that is
        not a checkpoint is a :class:`~lightning_hooks.core.errors.CheckpointFileError` naming it."""
        from mmcv.runner import load_checkpoint

        from lightning_hooks.core.checkpoint_files import check_checkpoint_file

        check_checkpoint_file(filename, owner="runner.load_checkpoint (load_from / resume_from)")
        return load_checkpoint(self.model, filename, map_location, strict, self.logger,
                               revise_keys=revise_keys if revise_keys is not None else [(r"^module.", "")])  # fmt: skip  # arguments aligned under the call

    def resume(self, checkpoint: str, resume_optimizer: bool = True, map_location: Any = "default") -> None:
        """mmcv's ``runner.resume`` (``resume_from``) of the runner type: the checkpoint's weights into the model and
        its state into the optimizer now, and the fit goes on after ``meta['epoch']`` / ``meta['iter']``
        (:attr:`resumed_at`). ``EpochBasedRunner``'s also makes the checkpoint's ``meta`` the run's (``hook_msgs``:
        ``last_ckpt``, ``best_score``, ...) and rescales the iteration from the checkpoint's number of GPUs to this run's
        processes; ``IterBasedRunner``'s does neither. A file that is not a whole checkpoint is a
        :class:`~lightning_hooks.core.errors.CheckpointFileError` (:func:`check_resumed_file`)."""
        import mmcv
        from mmcv.runner import get_dist_info

        iter_based = self.runner_cfg.get("type") == "IterBasedRunner"
        location = "cpu" if map_location == "default" else map_location  # Lightning moves the module afterwards
        check_resumed_file(checkpoint)
        loaded = self.load_checkpoint(checkpoint, map_location=location)
        meta = loaded["meta"]
        epoch, iteration = meta["epoch"], meta["iter"]
        if not iter_based:
            previous_gpus = (mmcv.Config.fromstring(meta["config"], file_format=".py").get("gpu_ids") or []
                             if "config" in meta else [])  # fmt: skip  # the condition under its value
            _, world_size = get_dist_info()  # the processes have started (tools_train.train), as under init_dist
            if previous_gpus and len(previous_gpus) != world_size:  # mmcv rescales the iteration count to it
                iteration = int(iteration * len(previous_gpus) / world_size)
                self.logger.info("the iteration number is changed due to change of GPU number")
            self.meta = meta
        if "optimizer" in loaded and resume_optimizer:
            if isinstance(self.optimizer, dict):
                for key, optimizer in self.optimizer.items():
                    optimizer.load_state_dict(loaded["optimizer"][key])
            else:
                self.optimizer.load_state_dict(loaded["optimizer"])
        self.resumed_at = (epoch, iteration)
        if iter_based:
            self.logger.info(f"resumed from epoch: {epoch}, iter {iteration}")
        else:
            self.logger.info("resumed epoch %d, iter %d", epoch, iteration)

    def run(self, data_loaders: list[Any], workflow: list[tuple[str, int]], max_epochs: int | None = None,
            **kwargs: Any) -> None:  # fmt: skip  # arguments aligned under the call
        """mmcv's ``runner.run``: its opening log lines (:meth:`log_start`), then train under Lightning with the
        registered hooks (:func:`fit`)."""
        self.log_start(workflow, max_epochs)
        self.trainer = fit(self, data_loaders, workflow)

    def log_start(self, workflow: list[tuple[str, int]], max_epochs: int | None = None) -> None:
        """The lines mmcv's ``EpochBasedRunner.run`` / ``IterBasedRunner.run`` log before ``before_run``: the host and
        work dir, the hooks of each stage by priority (``get_hook_info``), the workflow and the run's length."""
        from mmcv.runner import BaseRunner
        from mmcv.runner.utils import get_host_info

        if self.logger is None:  # mmcv's runner makes one; the training APIs pass theirs
            return
        work_dir = self.work_dir if self.work_dir is not None else "NONE"
        self.logger.info("Start running, host: %s, work_dir: %s", get_host_info(), work_dir)
        self.logger.info("Hooks will be executed in the following order:\n%s", BaseRunner.get_hook_info(self))
        if self.runner_cfg.get("type") == "IterBasedRunner":
            self.logger.info("workflow: %s, max: %d iters", workflow, self.runner_cfg["max_iters"])
        else:
            epochs = max_epochs if max_epochs is not None else self.runner_cfg["max_epochs"]
            self.logger.info("workflow: %s, max: %d epochs", workflow, epochs)


def check_resumed_file(checkpoint: str) -> None:
    """A :class:`~lightning_hooks.core.errors.CheckpointFileError` naming ``checkpoint`` and the way out, unless it may
    be a whole ``torch.save`` file. Where the host fails too (torch's error as mmcv's ``runner.resume`` loads it): a
    run killed while writing its first checkpoint leaves that file cut short and no ``latest.pth``, and
    ``--auto-resume`` picks it, as the libraries' ``find_latest_checkpoint`` does."""
    from lightning_hooks.core.checkpoint_files import check_checkpoint_file
    from lightning_hooks.core.errors import CheckpointFileError

    try:
        check_checkpoint_file(checkpoint, owner="runner.resume (--resume-from, or --auto-resume's pick)")
    except CheckpointFileError as err:
        raise CheckpointFileError(
            f"{err} (A run killed while writing its first checkpoint leaves that file cut short and no latest.pth, "
            "and --auto-resume picks it: delete it to start afresh.)"
        ) from err


def fit(runner: LightningRunner, data_loaders: list[Any], workflow: list[tuple[str, int]]) -> Any:
    """Train ``runner.model`` on ``data_loaders`` under ``lightning.Trainer`` with ``runner``'s hooks in an
    :class:`MMCVAdapter`; ``workflow`` ``[('train', 1)]`` or ``[('train', 1), ('val', 1)]`` (the val loader's
    ``val_step`` as Lightning's validation). Returns the trainer."""
    from mmcv.runner import LoggerHook

    from lightning_hooks.core import lightning_api
    from lightning_hooks.core.lightning_api import pl
    from lightning_hooks.families.mmcv.adapter import MMCVAdapter
    from lightning_hooks.families.mmcv.distributed import ddp_strategy, distributed_view_class
    from lightning_hooks.families.mmcv.module import MMCVModule

    modes = [mode for mode, _ in workflow]
    if modes not in (["train"], ["train", "val"]) or any(n != 1 for _, n in workflow):
        raise ConfigError(
            f"workflow: {workflow!r} is not supported by lightning-hooks train; write workflow = [('train', 1)] "
            "(evaluation comes from the eval hook, cfg.evaluation) or [('train', 1), ('val', 1)]."
        )
    request = runner.trainer_options.pop("request", None)  # --logger, --trainer.KEY (core/trainer_options.py)
    bridge = None
    if request is not None and (request.has_loggers or request.options.get("callbacks")):
        from lightning_hooks.families.mmcv.lightning_logger import LightningLoggerHook

        # the log buffer's scalars to the Trainer's loggers, its metrics to callback_metrics (for EarlyStopping, ...)
        bridge = LightningLoggerHook.after(runner.hooks)
        runner.register_hook(bridge, priority="VERY_LOW")
    adapter = MMCVAdapter(runner.hooks, runner=runner.runner_cfg, work_dir=runner.work_dir, meta=runner.meta,
                          logger=runner.logger, model="model")  # fmt: skip  # arguments aligned under the call
    if runner.timestamp is not None:
        adapter.runner.timestamp = runner.timestamp
    if runner.resumed_at is not None:
        adapter.start_after(*runner.resumed_at)
    module = MMCVModule(runner.model, runner.optimizer)
    options: dict[str, Any] = dict(
        default_root_dir=runner.work_dir,
        enable_checkpointing=False,  # CheckpointHook writes the checkpoints
        logger=False,  # the logger hooks log
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,  # the library's build_dataloader shards by rank itself
        limit_val_batches=None if "val" in modes else 0,
        # Lightning's own logging (a callback's, e.g. LearningRateMonitor) at the logger hooks' interval
        log_every_n_steps=next((h.interval for h in reversed(runner.hooks) if isinstance(h, LoggerHook)), None),
    )
    options.update(runner.trainer_options)
    options.update(adapter.trainer_kwargs())
    callbacks: list[Any] = [adapter]
    if request is not None:
        meta = runner.meta or {}
        name = os.path.splitext(meta.get("exp_name") or os.path.basename(os.path.abspath(str(runner.work_dir))))[0]
        options = request.resolve(options, owned_options(runner, adapter), save_dir=runner.work_dir, name=name,
                                  callbacks=callbacks)  # fmt: skip  # arguments aligned under the call
        callbacks = options.pop("callbacks")
    if isinstance(runner.model, distributed_view_class()):  # the training API wrapped it for several processes
        options["strategy"] = ddp_strategy(options.get("strategy"), runner.model, lightning_api.world_size(**options))
    trainer = pl.Trainer(callbacks=callbacks, **{k: v for k, v in options.items() if v is not None})
    if bridge is not None:
        bridge.trainer = trainer
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        trainer.fit(module, data_loaders[0], data_loaders[1] if "val" in modes else None)
    return trainer


def owned_options(runner: LightningRunner, adapter: Any) -> dict[str, Any]:
    """The ``Trainer`` options the config decides, for :meth:`TrainerRequest.resolve`: ``runner``'s epochs or
    iterations, the work dir, ``checkpoint_config``'s checkpoints, the library's samplers, the optimizer hook's step
    (accumulation, clipping, fp16), and the processes, which start before the Trainer (``--devices`` ...)."""
    from lightning_hooks.core.trainer_options import ANY, Owned

    loop = f"runner={runner.runner_cfg!r} (the config's runner, which Lightning runs as Trainer("
    owned = {key: Owned(value, f"{loop}{key}={value!r}))", "change it with --cfg-options runner.KEY=VALUE")
             for key, value in adapter.trainer_kwargs().items()}  # fmt: skip  # the loop under its value
    step = "the config's optimizer_config (its OptimizerHook steps the optimizer itself, under manual optimization)"
    owned.update(
        default_root_dir=Owned(runner.work_dir, f"the work dir {runner.work_dir!r}", "set it with --work-dir"),
        enable_checkpointing=Owned(False, "the config's checkpoint_config (CheckpointHook writes the checkpoints)",
                                   "for Lightning's own, add --trainer.callbacks+=lightning.pytorch.callbacks."
                                   "ModelCheckpoint"),
        use_distributed_sampler=Owned(False, "the library's build_dataloader, which shards by rank itself"),
        accumulate_grad_batches=Owned(1, step, "accumulate with optimizer_config=dict(type="
                                      "'GradientCumulativeOptimizerHook', cumulative_iters=N)"),
        gradient_clip_val=Owned(None, step, "clip with --cfg-options optimizer_config.grad_clip.max_norm=V"),
        gradient_clip_algorithm=Owned(None, step, "clip with --cfg-options optimizer_config.grad_clip.max_norm=V"),
        precision=Owned(None, f"{step}; fp16 = dict(loss_scale=...) in the config is mmcv's mixed precision"),
    )  # fmt: skip  # arguments aligned under the call
    for key in ("devices", "num_nodes", "strategy", "accelerator"):
        flag = "--" + key.replace("_", "-")
        owned[key] = Owned(ANY, f"the processes, started before the Trainer is built ({flag})", f"use {flag}")
    return owned


@functools.cache
def runner_classes() -> dict[str, type[LightningRunner]]:
    """For each runner type, a :class:`LightningRunner` that counts as mmcv's runner of that type in the training
    APIs' ``isinstance`` checks (mmdet's and mmseg's register ``DistSamplerSeedHook`` only on an
    ``EpochBasedRunner``): registered as a virtual subclass of mmcv's class (``ABCMeta.register``), it inherits none
    of its code."""
    from mmcv.runner import EpochBasedRunner, IterBasedRunner

    classes: dict[str, type[LightningRunner]] = {}
    for base in (EpochBasedRunner, IterBasedRunner):
        doc = f"A :class:`LightningRunner` for ``type='{base.__name__}'``, an instance of mmcv's class for ``isinstance``."
        classes[base.__name__] = runner = type(f"Lightning{base.__name__}", (LightningRunner,), {"__doc__": doc})
        base.register(runner)
    return classes


class LightningRunnerSwap:
    """A run-scoped change to the library's training API module: its ``build_runner`` builds a
    :class:`LightningRunner` (appended to :attr:`runners`) and its distributed wrapper (:attr:`Library.ddp`) builds a
    :class:`~lightning_hooks.families.mmcv.distributed.DistributedView`. :meth:`install` returns its one undo, which
    puts both library functions back; as a context manager it is installed inside and undone on the way out, after
    a failure too.

    Example::

        with LightningRunnerSwap(library, trainer_options) as swap:
            train_model(model, datasets, cfg, ...)
        trainer = swap.runners[-1].trainer
    """

    def __init__(self, library: Library, trainer_options: dict[str, Any]) -> None:
        self.library = library
        self.trainer_options = trainer_options
        #: the runners the training API built, in order
        self.runners: list[LightningRunner] = []
        self._undo: Callable[[], None] | None = None

    def build_runner(self, cfg: dict[str, Any], default_args: dict[str, Any] | None = None) -> LightningRunner:
        """mmcv's ``build_runner(cfg, default_args)``: a :class:`LightningRunner` for the ``runner`` config, an
        instance of mmcv's runner class of its type (:func:`runner_classes`)."""
        runner_class = runner_classes().get(str(cfg.get("type")), LightningRunner)
        runner = runner_class(copy.deepcopy(dict(cfg)), **(default_args or {}), trainer_options=self.trainer_options)
        self.runners.append(runner)
        return runner

    def install(self) -> Callable[[], None]:
        """Replace the two functions on the training API's module; returns the function that restores them."""
        from lightning_hooks.families.mmcv.distributed import wrap_distributed

        module, ddp = self.library.train_module, self.library.ddp
        originals = {"build_runner": module.build_runner, ddp: getattr(module, ddp)}
        module.build_runner = self.build_runner
        setattr(module, ddp, wrap_distributed)

        def undo() -> None:
            for name, original in originals.items():
                setattr(module, name, original)

        return undo

    def __enter__(self) -> LightningRunnerSwap:
        self._undo = self.install()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:  # fmt: skip  # arguments aligned under the call
        undo, self._undo = self._undo, None
        if undo is not None:
            undo()
