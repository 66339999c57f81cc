"""``MMEngineModule``: an OpenMMLab model trained, validated and tested as MMEngine's loops run it, under Lightning.

The model, its ``data_preprocessor``, the ``optim_wrapper`` and the evaluators are built from an MMEngine config as
``Runner.from_cfg`` builds them; each step calls the model's own ``train_step`` / ``val_step`` / ``test_step`` with
MMEngine's ``OptimWrapper`` (Lightning's manual optimization), so ``clip_grad``, ``accumulative_counts`` and
``AmpOptimWrapper`` do exactly what they do under the Runner.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import numbers
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from mmengine.config import Config
from mmengine.evaluator import Evaluator
from mmengine.logging import print_log
from mmengine.model import BaseDataPreprocessor, BaseModel, revert_sync_batchnorm
from mmengine.optim import AmpOptimWrapper, OptimWrapper, OptimWrapperDict, build_optim_wrapper
from mmengine.registry import EVALUATOR, MODELS, DefaultScope
from mmengine.runner import set_random_seed
from mmengine.runner.loops import _parse_losses, _update_losses
from typing_extensions import override

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.mmengine.vis_backend import sends_scalars

#: the seed a config without one draws, shared with the processes Lightning launches for DDP (they inherit the
#: launching process's environment). Not Lightning's ``PL_GLOBAL_SEED``: Lightning re-seeds every generator from that
#: one when the process group starts, after the model's initialisation drew from them, where the Runner does not.
SEED_ENV = "LIGHTNING_HOOKS_MMENGINE_SEED"


def scope(cfg: Mapping[str, Any]) -> contextlib.AbstractContextManager:
    """The config's ``default_scope`` made current, as it is while ``Runner.from_cfg`` builds (``"mmdet"``, ...)."""
    return DefaultScope.overwrite_default_scope(cfg.get("default_scope"))


def seed_from_config(cfg: Mapping[str, Any]) -> int:
    """Seed ``random``, ``numpy`` and ``torch`` as ``Runner(randomness=...)`` does and return the seed.

    ``randomness=dict(seed=None)`` (or none) draws a seed, as the Runner does; it is kept in :data:`SEED_ENV` so
    that the processes Lightning launches for DDP draw the same one. ``diff_rank_seed=True`` adds the process's
    global rank (from the launcher's ``RANK`` / ``LOCAL_RANK`` environment, as the process group is not up yet).
    """
    randomness = dict(cfg.get("randomness") or {})
    seed = randomness.get("seed")
    if seed is None:
        seed = int(os.environ.get(SEED_ENV) or torch.randint(2**31, ()).item())
    os.environ[SEED_ENV] = str(seed)
    rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0"))) if randomness.get("diff_rank_seed") else 0
    set_random_seed(seed + rank, deterministic=randomness.get("deterministic", False))
    return seed


def build_model(cfg: Mapping[str, Any], init_weights: bool = True) -> BaseModel:
    """``model`` (with the config's top-level ``data_preprocessor``) through ``MODELS``, as ``Runner.from_cfg`` builds
    it, then ``init_weights()`` (``init_cfg``) as ``Runner.train`` initialises it (:func:`init_model_weights`)."""
    model_cfg = copy.deepcopy(cfg["model"])
    if isinstance(model_cfg, dict) and cfg.get("data_preprocessor") is not None:
        model_cfg.setdefault("data_preprocessor", copy.deepcopy(cfg["data_preprocessor"]))
    with scope(cfg):
        model = MODELS.build(model_cfg) if isinstance(model_cfg, dict) else model_cfg
    if init_weights:
        init_model_weights(model, cfg)
    return model


def converts_to_sync_bn(model: torch.nn.Module, model_cfg: Any) -> bool:
    """Whether ``model``, built from ``model_cfg`` in one process, would have converted its batch norms to
    ``SyncBatchNorm`` had it been built among several, as under the Runner, whose processes exist before the model:
    OpenMMLab's ``use_syncbn`` models (mmdet's ``RTMDet``, True by default; mmpose's pose estimators) convert
    themselves when ``get_world_size() > 1`` as they are built. False for a model the config gives built."""
    from mmengine.dist import get_world_size

    use_syncbn = inspect.signature(type(model).__init__).parameters.get("use_syncbn")
    if use_syncbn is None or not isinstance(model_cfg, Mapping) or get_world_size() > 1:
        return False
    return bool(model_cfg.get("use_syncbn", use_syncbn.default))


def init_model_weights(model: torch.nn.Module, cfg: Mapping[str, Any]) -> None:
    """``model.init_weights()`` where it has one (its ``init_cfg``), in the config's scope."""
    init_weights = getattr(model, "init_weights", None)
    if init_weights is not None:
        with scope(cfg):
            init_weights()


def build_evaluator(evaluator: Any) -> Evaluator | None:
    """``Runner.build_evaluator``: an ``Evaluator``, a metric config, a list of them, or ``dict(metrics=...)``."""
    if evaluator is None or isinstance(evaluator, Evaluator):
        return evaluator
    evaluator = copy.deepcopy(evaluator)
    if isinstance(evaluator, dict) and "metrics" in evaluator:
        evaluator.setdefault("type", "Evaluator")
        return EVALUATOR.build(evaluator)
    return Evaluator(evaluator)


#: mmagic's evaluation loops: one evaluator per dataloader, each feeding the metrics of its sampler groups
MULTI_LOOPS = ("MultiValLoop", "MultiTestLoop")


def loop_type(loop_cfg: Any) -> str:
    """The class name a ``val_cfg`` / ``test_cfg`` names (``""`` without one): ``"MultiValLoop"``, ``"ValLoop"``."""
    kind = loop_cfg.get("type", "") if isinstance(loop_cfg, Mapping) else ""
    return (kind if isinstance(kind, str) else getattr(kind, "__name__", "")).rpartition(".")[2]


def build_multi_evaluators(evaluator: Any) -> list[Evaluator]:
    """The evaluators of mmagic's ``MultiValLoop`` / ``MultiTestLoop`` (its ``_build_evaluators``): one evaluator
    (config, list of metric configs, or instance) or a list of them, one per dataloader; each config gets mmagic's
    checks (``update_and_check_evaluator``) and is built as ``Runner.build_evaluator`` builds it (in the current
    scope: mmagic's ``Evaluator``)."""
    from mmagic.engine.runner.loop_utils import is_evaluator, update_and_check_evaluator

    evaluator = copy.deepcopy(evaluator)
    if is_evaluator(evaluator):
        configs = [update_and_check_evaluator(evaluator)]
    elif isinstance(evaluator, (list, tuple)) and all(is_evaluator(cfg) for cfg in evaluator):
        configs = [update_and_check_evaluator(cfg) for cfg in evaluator]
    else:
        raise ValueError(
            f"MMEngineModule: {evaluator!r} is no evaluator of mmagic's MultiValLoop / MultiTestLoop: give an "
            "evaluator (dict(type='Evaluator', metrics=[...]), a list of metric configs, or an Evaluator) or a list of "
            "them, one per dataloader."
        )
    return [build_evaluator(cfg) for cfg in configs]


class _EvaluationPlan:
    """How an evaluation epoch of a stage feeds its evaluators: ``ValLoop`` / ``TestLoop``'s one evaluator, or
    mmagic's ``MultiValLoop`` / ``MultiTestLoop``'s evaluator per dataloader, each given the metrics of its sampler
    groups with every batch (``evaluator.process(outputs, data_batch, metrics)``)."""

    def __init__(self, evaluators: list[Evaluator], multi: bool) -> None:
        self.evaluators, self.multi = evaluators, multi
        #: per dataloader, the metric groups its batches feed (multi); set at each epoch's start
        self.groups: list[list[Any]] = []

    def start(self, model: torch.nn.Module, loaders: list[Any]) -> None:
        """``MultiValLoop.run``'s preparation: per dataloader, its evaluator's ``prepare_metrics`` and
        ``prepare_samplers``, and its dataset's ``metainfo`` as the evaluator's (and the visualizer's)
        ``dataset_meta``. A metric group that samples inputs of its own (mmagic's generative metrics: FID, IS, PPL,
        ...) is refused: Lightning's evaluation loop iterates the dataloaders only."""
        if not self.multi:
            return
        if len(loaders) != len(self.evaluators):
            raise ValueError(
                f"MMEngineModule (mmagic's MultiValLoop / MultiTestLoop): {len(loaders)} dataloaders and "
                f"{len(self.evaluators)} evaluators; give one evaluator per dataloader, as the loop requires."
            )
        self.groups = []
        for evaluator, loader in zip(self.evaluators, loaders, strict=True):
            evaluator.prepare_metrics(model, loader)
            groups = []
            pairs = evaluator.prepare_samplers(model, loader) if evaluator.metrics is not None else []
            for metrics, sampler in pairs:
                if sampler is not loader:
                    names = ", ".join(type(metric).__name__ for metric in metrics)
                    raise NotImplementedError(
                        f"MMEngineModule (mmagic's MultiValLoop / MultiTestLoop): the metrics {names} draw their "
                        "inputs from a sampler of their own (generated samples), which Lightning's evaluation loop "
                        "does not iterate: it iterates the dataloaders. Evaluate them with mmagic's tools/test.py, or "
                        "keep the metrics that read the dataloader's batches (PSNR, SSIM, MAE, ...) in this config."
                    )
                groups.append(metrics)
            self.groups.append(groups)
            meta = getattr(loader.dataset, "metainfo", None)
            if meta:
                evaluator.dataset_meta = meta
                _set_visualizer_meta(meta)

    def process(self, outputs: Any, batch: Any, dataloader_idx: int) -> None:
        """One batch's outputs into the evaluator(s), as the loop's ``run_iter`` feeds them."""
        if not self.multi:
            self.evaluators[0].process(data_samples=outputs, data_batch=batch)
            return
        for metrics in self.groups[dataloader_idx]:
            self.evaluators[dataloader_idx].process(outputs, batch, metrics)

    def evaluate(self, loaders: list[Any]) -> dict[str, Any]:
        """The epoch's metrics: ``evaluate(len(dataset))`` of the one evaluator, or each mmagic evaluator's
        ``evaluate()`` merged (their names told apart by prefixes, as ``MultiValLoop`` requires)."""
        if not self.multi:
            return self.evaluators[0].evaluate(len(loaders[0].dataset))
        merged: dict[str, Any] = {}
        for evaluator in self.evaluators:
            metrics = evaluator.evaluate()
            if metrics.keys() & merged.keys():
                raise ValueError(
                    f"MMEngineModule (mmagic's MultiValLoop / MultiTestLoop): the metrics "
                    f"{sorted(metrics.keys() & merged.keys())} come from two evaluators; give each evaluator's metrics a "
                    "prefix of their own (prefix='Set5'), as the loop requires."
                )
            merged.update(metrics)
        return merged


def _set_visualizer_meta(meta: Any) -> None:
    """The current visualizer's ``dataset_meta``, as ``MultiValLoop`` sets the runner's (none built: nothing)."""
    from mmengine.visualization import Visualizer

    if Visualizer._instance_dict:
        Visualizer.get_current_instance().dataset_meta = meta


def _unprefixed(state_dict: Mapping[str, Any], prefix: str) -> OrderedDict[str, Any]:
    """The entries of ``state_dict`` under ``prefix``, without it, with their ``_metadata`` (the modules' versions
    that ``load_state_dict`` reads)."""
    out = OrderedDict((k[len(prefix):], v) for k, v in state_dict.items() if k.startswith(prefix))
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        versions = OrderedDict((k[len(prefix):], v) for k, v in metadata.items() if k.startswith(prefix))
        out._metadata = versions  # type: ignore[attr-defined]  # the attribute torch sets on the state dicts it makes
    return out


class MMEngineModule(pl.LightningModule):
    """An MMEngine ``BaseModel`` trained by Lightning as MMEngine's ``Runner`` trains it.

    ``training_step`` runs ``model.train_step(batch, optim_wrapper)``: the model's data preprocessor, forward, loss
    parsing and MMEngine's ``OptimWrapper.update_params`` (backward, ``clip_grad``, ``accumulative_counts``, AMP loss
    scaling, step) under Lightning's manual optimization; it returns the model's ``log_vars``, which ``MMEngineAdapter``
    hands to ``after_train_iter`` hooks. Validation and test run ``model.val_step`` / ``test_step`` into the
    evaluator, as ``ValLoop`` / ``TestLoop`` do, and log its metrics (``accuracy/top1``, ``mIoU``, ...).

    Batches reach the steps as the dataloader yields them: the model's data preprocessor moves them to its device.

    Example::

        cfg = Config.fromfile("configs/resnet/resnet18_8xb16_cifar10.py")
        module, data = MMEngineModule.from_config(cfg), MMEngineData.from_config(cfg)
        adapter = MMEngineAdapter.from_config(**runtime_keys, cfg=cfg)  # see docs/migration-mmengine.md
        Trainer(callbacks=[adapter], **adapter.trainer_kwargs(), use_distributed_sampler=False).fit(module, data)
    """

    def __init__(
        self,
        model: BaseModel,
        optim_wrapper: Mapping[str, Any] | OptimWrapper | OptimWrapperDict | None = None,
        val_evaluator: Any = None,
        test_evaluator: Any = None,
        auto_scale_lr: Mapping[str, Any] | None = None,
        train_batch_size: int | None = None,
        val_fp16: bool = False,
        test_fp16: bool = False,
        val_loop: str = "ValLoop",
        test_loop: str = "TestLoop",
        default_scope: str | None = None,
    ) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.model = model
        self._optim_cfg = optim_wrapper
        #: the ``OptimWrapper`` (or ``OptimWrapperDict``) the model's ``train_step`` updates; built at each fit
        self.optim_wrapper: OptimWrapper | OptimWrapperDict | None = None
        self._evaluator_cfgs = {"val": val_evaluator, "test": test_evaluator}
        self._multi = {"val": val_loop in MULTI_LOOPS, "test": test_loop in MULTI_LOOPS}
        self._default_scope = default_scope
        self._plans: dict[str, _EvaluationPlan] = {}
        #: a config whose ``init_weights`` the next fit's :meth:`setup` runs (after the hooks' ``before_run``), where
        #: the weights could not be initialised when the module was built (:func:`~.train.build`); None: nothing to run
        self.init_weights_at_setup: Mapping[str, Any] | None = None
        #: the next fit's :meth:`setup` converts the model's batch norms to ``SyncBatchNorm`` in several processes, as
        #: its constructor would have there (:func:`converts_to_sync_bn`); set by :meth:`from_config`
        self.sync_bn_at_setup = False
        self._plan("val")  # Runner.train builds the val loop's evaluator; the test loop's only Runner.test builds
        self._auto_scale_lr = dict(auto_scale_lr or {})
        self._train_batch_size = train_batch_size
        self._fp16 = {"val": val_fp16, "test": test_fp16}
        self._eval_losses: dict[str, Any] = {}
        #: the evaluator's last metrics as it returned them (non-scalar entries included)
        self.last_metrics: dict[str, Any] = {}

    @classmethod
    def from_config(
        cls, cfg: Config | Mapping[str, Any], *, seed: bool = True, model: BaseModel | None = None
    ) -> MMEngineModule:
        """The module a whole MMEngine config describes (``model``, ``data_preprocessor``, ``optim_wrapper``,
        ``auto_scale_lr``, ``val_evaluator`` / ``test_evaluator``, ``val_cfg`` / ``test_cfg`` ``fp16``).

        With ``seed=True`` the config's ``randomness`` seeds ``random``, ``numpy`` and ``torch`` first, as the Runner
        does before it builds the model (:func:`seed_from_config`), so the initial weights are the Runner's. ``model``:
        the config's model, already built (:func:`build_model`).
        """
        if seed:
            seed_from_config(cfg)
        train_loader = cfg.get("train_dataloader") or {}
        with scope(cfg):
            model = build_model(cfg) if model is None else model
            module = cls(
                model,
                optim_wrapper=copy.deepcopy(cfg.get("optim_wrapper")),
                val_evaluator=cfg.get("val_evaluator") if cfg.get("val_cfg") is not None else None,
                test_evaluator=cfg.get("test_evaluator") if cfg.get("test_cfg") is not None else None,
                auto_scale_lr=cfg.get("auto_scale_lr"),
                train_batch_size=train_loader.get("batch_size") if isinstance(train_loader, Mapping) else None,
                val_fp16=bool((cfg.get("val_cfg") or {}).get("fp16", False)),
                test_fp16=bool((cfg.get("test_cfg") or {}).get("fp16", False)),
                val_loop=loop_type(cfg.get("val_cfg")) or "ValLoop",
                test_loop=loop_type(cfg.get("test_cfg")) or "TestLoop",
                default_scope=cfg.get("default_scope"),
            )
        module.sync_bn_at_setup = converts_to_sync_bn(model, cfg.get("model"))
        return module

    # ------------------------------------------------------------------------------------------ optimizers
    @override
    def setup(self, stage: str) -> None:
        """One process: MMEngine's ``SyncBatchNorm`` layers become plain batch norm, as ``Runner.wrap_model`` reverts
        them when training is not distributed. Several: a model built in one process that its constructor would have
        converted to ``SyncBatchNorm`` among several (:attr:`sync_bn_at_setup`) is converted now, the process group
        up, before the strategy wraps it, as under the Runner. A fit runs the ``init_weights`` left to it
        (:attr:`init_weights_at_setup`)."""
        if self.trainer.world_size == 1:
            self.model = revert_sync_batchnorm(self.model)
        elif self.sync_bn_at_setup:
            self.sync_bn_at_setup = False
            self.model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(self.model)
            print_log("Using SyncBatchNorm()", "current")  # the line the model's constructor logs
        if stage == "fit" and self.init_weights_at_setup is not None:
            cfg, self.init_weights_at_setup = self.init_weights_at_setup, None
            init_model_weights(self.model, cfg)

    @override
    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """The model's weights as ``Runner.load_checkpoint`` loads them (resume, ``load_from``): MMEngine's
        ``load_state_dict``, not strict: keys that the file holds and the model does not (DDQ-DETR's decoder holds
        its head's auxiliary branches only once it has run), or the reverse, are printed, not refused. The
        LightningModule's other entries load as ``strict`` says."""
        from lightning_hooks.families.mmengine.checkpoint import load_into_model

        ours = _unprefixed(state_dict, "model.")
        load_into_model(self.model, {"state_dict": ours}, strict=False)
        others = {k: v for k, v in state_dict.items() if not k.startswith("model.")}
        result = super().load_state_dict(others, strict=False, assign=assign)
        missing = [k for k in result.missing_keys if not k.startswith("model.")]
        if strict and (missing or result.unexpected_keys):
            raise RuntimeError(f"{type(self).__name__}.load_state_dict: the checkpoint's entries outside the model "
                               f"differ from the module's: missing {missing}, unexpected {result.unexpected_keys}")
        return result

    def _record_device(self) -> None:
        """MMEngine's data preprocessors move each batch to the device their own ``to()`` recorded, which
        ``BaseModel.to`` records when the Runner moves the model. Lightning's strategies move the tensors without
        calling it (``nn.Module.to`` recurses through ``_apply``; FSDP and DeepSpeed move them themselves), so batches
        would stay on the CPU beside weights on the GPU: once the strategy placed the model, record its device. A model
        whose class has a ``to()`` of its own (mmdet's distillation detectors keep their teacher outside the module
        tree and move it there) gets that call too, as ``Runner.wrap_model`` moves the model."""
        device = self.trainer.strategy.root_device
        if isinstance(self.model, BaseModel) and type(self.model).to is not BaseModel.to:
            self.model.to(device)
        for module in self.modules():
            if isinstance(module, BaseDataPreprocessor):
                module._device = device

    @override
    def on_fit_start(self) -> None:
        self._record_device()

    @override
    def on_validation_start(self) -> None:
        self._record_device()

    @override
    def on_test_start(self) -> None:
        self._record_device()

    @override
    def on_predict_start(self) -> None:
        self._record_device()

    @override
    def configure_optimizers(self) -> Any:
        """Build the ``optim_wrapper`` config on the model (``Runner.build_optim_wrapper``), scale its learning rates
        for ``auto_scale_lr=dict(enable=True)`` (``Runner.scale_lr``) and hand Lightning its optimizers."""
        if self._optim_cfg is None:
            raise ValueError(
                "MMEngineModule: training needs an optim_wrapper; give MMEngineModule(optim_wrapper=dict(optimizer=...)) "
                "or a config with optim_wrapper."
            )
        built = isinstance(self._optim_cfg, (OptimWrapper, OptimWrapperDict))  # its optimizer holds the parameters
        self.optim_wrapper = self._build_optim_wrapper(self._optim_cfg if built else copy.deepcopy(self._optim_cfg))
        self._scale_lr()
        return [wrapper.optimizer for wrapper in self._wrappers()]

    def _build_optim_wrapper(self, cfg: Any) -> OptimWrapper | OptimWrapperDict:
        if isinstance(cfg, (OptimWrapper, OptimWrapperDict)):
            return cfg
        _check_amp(cfg)
        if cfg.get("optimizer") is not None or "constructor" in cfg:
            return build_optim_wrapper(self.model, cfg)
        return OptimWrapperDict(**cfg)  # already built wrappers by name

    def _wrappers(self) -> list[OptimWrapper]:
        wrapper = self.optim_wrapper
        return list(wrapper.values()) if isinstance(wrapper, OptimWrapperDict) else [wrapper]

    def _scale_lr(self) -> None:
        cfg = self._auto_scale_lr
        if not cfg.get("enable", False):
            return
        if "base_batch_size" not in cfg or self._train_batch_size is None:
            raise ValueError(
                f"MMEngineModule: auto_scale_lr={cfg} needs base_batch_size and the train batch size "
                "(train_dataloader.batch_size in the config, or MMEngineModule(train_batch_size=...))."
            )
        ratio = float(self.trainer.world_size * self._train_batch_size) / float(cfg["base_batch_size"])
        for wrapper in self._wrappers():
            for group in wrapper.optimizer.param_groups:
                group["lr"] = group["lr"] * ratio

    @override
    def on_train_start(self) -> None:
        """Step through Lightning's optimizers (so ``trainer.global_step`` counts the steps) and start the
        gradient-accumulation count at the iterations done (``OptimWrapper.initialize_count_status(model, iter,
        max_iters)``, as ``Runner.train``: a run resumed inside an ``accumulative_counts`` window updates where the
        window ends, not after as many iterations as a whole window, which counting the optimizer steps gave);
        ``model.train()`` before the first iteration, as MMEngine's train loops: a fit resumed inside an epoch (an
        ``IterBasedTrainLoop`` fit always is) gets no ``on_train_epoch_start``, and its model would train in the modes
        it was built with (a backbone's ``norm_eval`` batch norms in train mode)."""
        self.train()
        optimizers = self.optimizers()
        optimizers = optimizers if isinstance(optimizers, list) else [optimizers]
        done = lightning_api.train_batches_fetched(self.trainer)  # iterations so far (the Runner's runner.iter)
        for wrapper, optimizer in zip(self._wrappers(), optimizers, strict=False):
            wrapper.optimizer = optimizer
            wrapper.initialize_count_status(self.model, done, int(self.trainer.estimated_stepping_batches))
            if "backward" not in vars(wrapper):
                wrapper.backward = _strategy_backward(wrapper.backward, self.trainer.strategy)

    # ------------------------------------------------------------------------------------------- modes
    @override
    def on_train_epoch_start(self) -> None:
        """``model.train()``, as ``EpochBasedTrainLoop`` at each epoch and ``IterBasedTrainLoop`` at its start: the
        model's own ``train()`` runs (a backbone with ``norm_eval=True`` keeps its batch norms in eval mode)."""
        self.train()

    @override
    def on_validation_model_zero_grad(self) -> None:
        """Keep the gradients across validation, as the Runner does: with ``accumulative_counts`` an update can span
        a validation (Lightning would release them here)."""

    @override
    def on_validation_model_train(self) -> None:
        """After validation, ``train()`` again, as MMEngine's train loops before the next iteration (Lightning would
        restore each submodule's flag without calling the model's ``train()``)."""
        self.train()

    # ------------------------------------------------------------------------------------------- steps
    @override
    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        """Batches stay as the loader yields them: the model's ``data_preprocessor`` casts them to its device."""
        return batch

    @override
    def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        return self.model.train_step(batch, optim_wrapper=self.optim_wrapper)

    # --------------------------------------------------------------------------------------------- evaluators
    @property
    def val_evaluator(self) -> Evaluator | None:
        """The val loop's evaluator (mmagic's ``MultiValLoop``: the first dataloader's)."""
        evaluators = self._plan("val").evaluators
        return evaluators[0] if evaluators else None

    @property
    def test_evaluator(self) -> Evaluator | None:
        """The test loop's evaluator, built when first needed, as ``Runner.test`` builds it (``Runner.train`` never
        does); mmagic's ``MultiTestLoop``: the first dataloader's."""
        evaluators = self._plan("test").evaluators
        return evaluators[0] if evaluators else None

    def _plan(self, stage: str) -> _EvaluationPlan:
        """The stage's evaluators, built once (in the config's scope) as its loop builds them."""
        if stage not in self._plans:
            cfg = self._evaluator_cfgs[stage]
            with DefaultScope.overwrite_default_scope(self._default_scope):
                if self._multi[stage] and cfg is not None:
                    evaluators = build_multi_evaluators(cfg)
                else:
                    built = build_evaluator(cfg)
                    evaluators = [] if built is None else [built]
            self._plans[stage] = _EvaluationPlan(evaluators, self._multi[stage])
        return self._plans[stage]

    def _evaluation(self, stage: str) -> _EvaluationPlan:
        plan = self._plan(stage)
        if not plan.evaluators:
            raise ValueError(
                f"MMEngineModule: {stage} needs an evaluator; give MMEngineModule({stage}_evaluator=dict(type=...)) "
                f"or a config with {stage}_cfg and {stage}_evaluator."
            )
        return plan

    # ------------------------------------------------------------------------------------------ evaluation
    @override
    def on_validation_epoch_start(self) -> None:
        self._start_evaluation("val", self.trainer.val_dataloaders)

    @override
    def on_test_epoch_start(self) -> None:
        self._start_evaluation("test", self.trainer.test_dataloaders)

    def _start_evaluation(self, stage: str, loaders: Any) -> None:
        self._eval_losses = {}
        self._evaluation(stage).start(self.model, _as_list(loaders))

    @override
    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:  # the data samples
        return self._eval_step("val", self.model.val_step, batch, dataloader_idx)

    @override
    def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:  # the data samples
        return self._eval_step("test", self.model.test_step, batch, dataloader_idx)

    def _eval_step(self, stage: str, step: Any, batch: Any, dataloader_idx: int) -> list:
        """One ``ValLoop`` / ``TestLoop`` iteration: the step (autocast with ``fp16``), its losses kept aside, the
        outputs into the evaluator; mmagic's ``MultiValLoop`` / ``MultiTestLoop``: into the dataloader's evaluator,
        for each of its metric groups, without losses."""
        plan = self._evaluation(stage)
        with _autocast(self._fp16[stage]):
            outputs = step(batch)
        if not plan.multi:
            outputs, self._eval_losses = _update_losses(outputs, self._eval_losses)
        plan.process(outputs, batch, dataloader_idx)
        return outputs

    @override
    def on_validation_epoch_end(self) -> None:
        self._log_metrics("val", self.trainer.val_dataloaders)

    @override
    def on_test_epoch_end(self) -> None:
        self._log_metrics("test", self.trainer.test_dataloaders)

    def _log_metrics(self, stage: str, loaders: Any) -> None:
        """The evaluator's metrics over the whole dataset (``evaluate(len(dataset))``, all ranks' results; mmagic's
        evaluators merged), plus the mean of each loss the steps returned, logged in float64 so hooks and loggers see
        the evaluator's numbers."""
        metrics = self._evaluation(stage).evaluate(_as_list(loaders))
        if self._eval_losses:
            metrics.update(_parse_losses(self._eval_losses, stage))
        self.last_metrics = metrics
        scalars = {k: torch.tensor(float(v), dtype=torch.float64) for k, v in metrics.items() if _is_scalar(v)}
        # every rank has the same values; a LightningLoggerVisBackend sends them to the loggers at LoggerHook's step
        # (None, not True: Lightning's default, which warns of no logger configured only when asked for one)
        to_loggers = False if sends_scalars(self.trainer) else None
        self.log_dict(scalars, batch_size=1, sync_dist=self.trainer.world_size > 1, logger=to_loggers)


def _as_list(loaders: Any) -> list[Any]:
    return list(loaders) if isinstance(loaders, (list, tuple)) else [loaders]


def _check_amp(cfg: Mapping[str, Any]) -> None:
    """An ``AmpOptimWrapper`` in the ``optim_wrapper`` config (what ``--amp`` selects, as ``tools/train.py``) needs a
    device MMEngine's AMP runs on; without one, a clear error instead of the wrapper's bare ``AssertionError``."""
    from mmengine.device import is_cuda_available, is_mlu_available, is_musa_available, is_npu_available

    if not _names_amp(cfg) or any(f() for f in (is_cuda_available, is_npu_available, is_mlu_available, is_musa_available)):
        return
    raise RuntimeError(
        "MMEngineModule: the optim_wrapper is an AmpOptimWrapper (`lightning-hooks train --amp` selects it, as "
        "tools/train.py does: type='AmpOptimWrapper', loss_scale='dynamic'), and MMEngine's AMP runs only on a CUDA, "
        "NPU, MLU or MUSA device, which this machine lacks; the Runner refuses it here too. Train on such a device, "
        "or without --amp (type='OptimWrapper'). Lightning's --precision bf16-mixed autocasts on CPU, which is "
        "Lightning's mixed precision, not MMEngine's AmpOptimWrapper."
    )


def _names_amp(cfg: Any) -> bool:
    """Whether ``cfg`` (an ``optim_wrapper`` config, or one wrapper's of a multi-optimizer config) names
    ``AmpOptimWrapper`` (by name or class)."""
    if not isinstance(cfg, Mapping):
        return False
    kind = cfg.get("type")
    if kind == "AmpOptimWrapper" or (isinstance(kind, type) and issubclass(kind, AmpOptimWrapper)):
        return True
    return any(_names_amp(value) for value in cfg.values())


def _strategy_backward(backward: Any, strategy: Any) -> Any:
    """``OptimWrapper.backward`` (its loss scaling and count included) between the strategy's ``pre_backward`` and
    ``post_backward``: under DDP the model's ``train_step`` runs its backward inside the strategy's forward, and
    ``pre_backward`` readies the gradient all-reduce as ``manual_backward`` does."""

    def strategy_backward(loss: torch.Tensor, **kwargs: Any) -> None:
        strategy.pre_backward(loss)
        backward(loss, **kwargs)
        strategy.post_backward(loss)

    return strategy_backward


def _is_scalar(value: Any) -> bool:
    """A number Lightning can log (evaluators may also return lists or tables, which stay in ``last_metrics``)."""
    if isinstance(value, torch.Tensor):
        return value.numel() == 1
    return isinstance(value, numbers.Number) and not isinstance(value, (bool, complex))


@contextlib.contextmanager
def _autocast(enabled: bool) -> Iterator[None]:
    """MMEngine's ``autocast`` when ``fp16`` is set, as ``ValLoop`` / ``TestLoop`` run the step."""
    if not enabled:
        yield
        return
    from mmengine.runner import autocast

    with autocast(enabled=True):
        yield

