"""iMIX's own engine, the reference of the iMIX differential tests.

``imix/engine/imix_engine.py`` (``CommonEngine``, ``imixEngine``) and ``imix/engine/organizer.py`` (``Organizer``: the
settings, the hook list, ``add_custom_hooks``, ``resume_or_load``) are loaded from the installed files and run as
they are, on torch 2.x. The Organizer imports iMIX's model zoo, data, solver and loss packages, which need what the
wheel lacks (allennlp, transformers, cytoolz, data files); only those builders are stood in for while it loads:

- ``build_model(cfg)``: ``MODELS[cfg.model.type]``; ``Losser(cfg.loss)``: iMIX's ``Losser`` sums and logs the losses
  ``LOSSES[cfg.loss.type]`` returns (``{name: value.item(), "total_loss": float, "loss": tensor}``);
- ``build_imix_train_loader(cfg)``: ``DATASETS[cfg.dataset_type](cfg)``; the type ``IMIXLoader`` is iMIX's own
  ``build_imix_train_loader`` (``imix/data/builder.py`` and its sampler builder, loaded from the installed files:
  ``cfg.train_data``'s batch size, workers and sampler, a ``DistributedSampler`` of the rank in several processes)
  on a dataset of iMIX's registry (:class:`RegisteredSamples`);
- ``build_optimizer(cfg.optimizer, model)`` / ``build_lr_scheduler(cfg.lr_config, optimizer)``: the torch optimizer
  and scheduler of that ``type`` name.

The engine sleeps 2 s per epoch and 1 s at the end (``time.sleep``): patched out in this module's copy. In several
processes the Organizer wraps its model in ``DistributedDataParallel`` with the rank's GPU as device, which torch
refuses on CPU: there it is built without device ids (:func:`_cpu_ddp`). While an
Organizer is built, the imix logger is at INFO and iMIX's work dir is the config's, as iMIX's ``default_setup`` leaves
them. iMIX's evaluation (``Organizer.test``: ``inference_on_dataset`` with its ``Evaluator``) runs as it is, with a
metric and a dataset converter of this module (:data:`EVALUATION`).

:func:`train` runs ``imixEngine(cfg).train()``; :func:`fit` builds the same config with the real Organizer and hands
its model, loader, optimizer and hooks to Lightning through ``IMIXAdapter``, as a user moving from iMIX would;
:func:`assert_runs_as_imix` runs both and compares all they showed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import re
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import imix.engine
import imix.utils.config
import lightning as L
import torch
from imix.engine.hooks import HookBase, PriorityStatus
from imix.evaluation.dataset_evaluator import BaseDatasetConverter
from imix.evaluation.metric import BaseMetric
from imix.utils.config import Config
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks import IMIXAdapter

BATCH = 4
TIMINGS = ("data_time", "iter_time", "epoch_time")  # wall-clock values: differ between any two runs
#: what iMIX's ``Organizer.resume_or_load`` logs while the resumed run's Organizer is built with ``resume_from``
#: (its checkpointer's line among them); under Lightning the Organizer is built as for a fresh run and the fit resumes
#: (``fit(ckpt_path=...)``), which Lightning logs
RESUME_OR_LOAD = ("loading : ", "Loading checkpoint form ", "current epoch: ", "current iteration :",
                  "checkpoint loaded")  # fmt: skip  # one line too long: the names go on under the first


# ------------------------------------------------------------------------------------------ the config's zoo
class TinyNet(torch.nn.Module):
    """An iMIX model: ``forward(batch, cur_epoch, cur_iter, inner_iter)`` returns what the loss reads."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(4, 1)

    def forward(self, batch: Any, cur_epoch: Any = None, cur_iter: Any = None, inner_iter: Any = None) -> dict:
        x, y = batch
        return {"scores": self.net(x), "target": y}

    def init_ema(self) -> None:  # the model API iMIX's EMAIterHook calls
        self.ema = {k: v.detach().clone() for k, v in self.state_dict().items()}

    def update_ema(self, decay: float = 0.5) -> None:
        for k, v in self.state_dict().items():
            self.ema[k].mul_(decay).add_(v.detach(), alpha=1 - decay)


class MSELoss(torch.nn.Module):
    """An iMIX loss: ``forward(model_output)``, named by ``str()``."""

    loss_name = "mse_loss"

    def forward(self, output: dict) -> torch.Tensor:
        return torch.nn.functional.mse_loss(output["scores"], output["target"])

    def __str__(self) -> str:
        return self.loss_name


def tiny_data(cfg: Any) -> DataLoader:
    """``cfg.train_data.batches`` batches of ``BATCH`` samples, in a fixed order."""
    n = cfg.train_data.batches * BATCH
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(n, 4, generator=g) * 3, torch.randn(n, 1, generator=g) * 3
    return DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=False)


class NoisySamples(torch.utils.data.Dataset):
    """Samples ``(x, y)`` whose ``x`` gets noise drawn from torch's generator, times ``noise`` (a random augmentation;
    in a loader worker, torch seeds it from the base seed the loader's iterator drew)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y, self.noise = x, y, 1.0

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i] + self.noise * torch.randn(4), self.y[i]


def noisy_data(cfg: Any) -> DataLoader:
    """:func:`tiny_data`'s samples with noise (:class:`NoisySamples`), shuffled, through ``cfg.train_data.workers``
    loader workers."""
    fixed = tiny_data(cfg).dataset
    return DataLoader(NoisySamples(*fixed.tensors), batch_size=BATCH, shuffle=True,
                      num_workers=cfg.train_data.get("workers", 0))  # fmt: skip  # arguments aligned under the call


class TinyConverter(BaseDatasetConverter):
    """iMIX's dataset converter for the evaluator: per sample, the prediction and its label."""

    def evaluation(self, batch_data: Any, model_outputs: dict, *args: Any, **kwargs: Any) -> tuple[list, list]:
        return list(model_outputs["scores"]), list(model_outputs["target"])

    def submit(self, batch_data: Any, model_outputs: dict, *args: Any, **kwargs: Any) -> list:
        return list(model_outputs["scores"])

    predict = submit

    def data_pre_process(self, model_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        return model_outputs

    def __str__(self) -> str:
        return "tiny_converter"


class NegativeMSE(BaseMetric):
    """An iMIX metric, the higher the better (EvaluateHook keeps the highest)."""

    metric_name = "negative_mse"

    def calculate(self, predictions: torch.Tensor, labels: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        return -torch.nn.functional.mse_loss(predictions, labels)


#: the config keys that make iMIX's Organizer add EvaluateHook (iMIX's evaluator on the train data, here)
EVALUATION = dict(
    test_data=dict(is_run_eval=True),
    test_datasets=["TinyData"],
    post_processor=dict(type="Evaluator", metrics=[dict(type=NegativeMSE)],
                        dataset_converters=[dict(type=TinyConverter)]),
)

MODELS: dict[str, Callable[..., torch.nn.Module]] = {"TinyNet": TinyNet}
LOSSES: dict[str, Callable[..., torch.nn.Module]] = {"MSELoss": MSELoss}
DATASETS: dict[str, Callable[[Any], Any]] = {"TinyData": tiny_data, "NoisyData": noisy_data}


def config(work_dir: Path, **overrides: Any) -> Config:
    """An iMIX config for the zoo above (iMIX's own ``Config``); ``overrides`` replace top-level keys, ``None``
    removes one (``fp16``, ``by_iter`` and ``checkpoint_config`` act by their presence, as in iMIX)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, Any] = dict(
        model=dict(type="TinyNet"),
        dataset_type="TinyData",
        train_data=dict(batches=6),
        loss=dict(type="MSELoss"),
        optimizer=dict(type="SGD", lr=0.1),
        optimizer_config=dict(grad_clip=None),
        lr_config=dict(type="StepLR", step_size=4, gamma=0.5),
        total_epochs=2,
        log_config=dict(period=1),
        work_dir=str(work_dir),
        custom_hooks=[dict(type=Recorder, level=PriorityStatus.LOWEST)],
    )
    cfg.update(overrides)
    return Config({k: v for k, v in cfg.items() if v is not None})


class SwitchOffNoise(HookBase):
    """From epoch ``epoch`` (0-based) on, the train dataset's noise is off (:class:`NoisySamples`): set in
    ``before_train_epoch``, before iMIX's engine iterates the loader, as mmdet 2.x's ``YOLOXModeSwitchHook`` turns
    its random mosaic off for the last epochs."""

    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.epoch = epoch

    def before_train_epoch(self) -> None:
        if self.trainer.epoch >= self.epoch:
            self.trainer.data_loader.dataset.noise = 0.0


# ------------------------------------------------------------------------------------------ what a run showed
class Recorder(HookBase):
    """Records, at every mount point, the engine's counters and the log buffer's; after each iteration the scalars
    the iteration put (but the timings) and the learning rate; in ``after_train`` the buffer's whole history.
    Runs last (LOWEST), after every hook the Organizer built."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []
        self.scalars: list[dict[str, float]] = []
        self.lrs: list[float] = []
        self.history: dict[str, list[tuple[float, int]]] = {}

    def _record(self, event: str) -> None:
        trainer, buffer = self.trainer, self.trainer.log_buffer
        self.events.append((
            event, trainer.iter, getattr(trainer, "inner_iter", None), getattr(trainer, "epoch", None),
            trainer.start_iter, trainer.max_iter, trainer.max_epoch,
            buffer.iter, buffer.epoch, buffer.epoch_inner_iter,
        ))  # fmt: skip

    def before_train(self) -> None:
        self._record("before_train")

    def before_train_epoch(self) -> None:
        self._record("before_train_epoch")

    def before_train_iter(self) -> None:
        self._record("before_train_iter")

    def after_train_iter(self) -> None:
        self._record("after_train_iter")
        scalars = self.trainer.log_buffer.scalars
        self.scalars.append({k: float(v) for k, v in scalars.items() if k not in TIMINGS})
        self.lrs.append(self.trainer.optimizer.param_groups[0]["lr"])

    def after_train_epoch(self) -> None:
        self._record("after_train_epoch")

    def after_train(self) -> None:
        self._record("after_train")
        history = self.trainer.log_buffer.histories()
        self.history = {k: list(h.data) for k, h in history.items() if k not in TIMINGS}


class LightningStep(HookBase):
    """Lightning's automatic optimisation, put in OptimizerHook's place (first of the HIGH hooks) in iMIX's engine:
    the reference for a hook list without a step-owning hook, where the adapter leaves backward and step to Lightning
    (which runs them right after the forward, before ``after_train_iter``). Transcribed from Lightning's automatic
    loop, the only lines here that are: backward of ``loss / accumulate_grad_batches``; every that many iterations
    ``step`` then ``zero_grad`` (epoch lengths are multiples of it: the adapter requires so)."""

    def __init__(self, grad_clip: Any = None) -> None:
        super().__init__()
        self._level = PriorityStatus.HIGH

    def after_train_iter(self) -> None:
        accumulate = self.trainer.gradient_accumulation_steps
        (self.trainer.output["loss"] / accumulate).backward()
        if (self.trainer.iter + 1) % accumulate == 0:
            self.trainer.optimizer.step()
            self.trainer.optimizer.zero_grad()


def recorder(hooks: list[Any]) -> Recorder:
    return next(h for h in hooks if isinstance(h, Recorder))


# ------------------------------------------------------------------------------------------ loading iMIX's files
_ENGINE_DIR = Path(imix.engine.__path__[0])


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name, "stand-in for a package iMIX's Organizer imports (see imix_reference)")
    vars(module).update(attributes)
    return module


def _build_optimizer(cfg: Any, model: torch.nn.Module) -> torch.optim.Optimizer:
    args = dict(cfg)
    return getattr(torch.optim, args.pop("type"))(model.parameters(), **args)


def _build_lr_scheduler(cfg: Any, optimizer: torch.optim.Optimizer) -> Any:
    args = {k: v for k, v in cfg.items() if k not in ("use_warmup", "warmup_iterations")}
    return getattr(torch.optim.lr_scheduler, args.pop("type"))(optimizer, **args)


def _build_loss(cfg: Any) -> torch.nn.Module:
    args = dict(cfg)
    return LOSSES[args.pop("type")](**args)


def _build_model(cfg: Any) -> torch.nn.Module:
    args = dict(cfg.model)
    return MODELS[args.pop("type")](**args)


def _load(name: str, path: Path, stand_ins: dict[str, types.ModuleType]) -> types.ModuleType:
    """Execute the installed ``path`` as module ``name`` with ``stand_ins`` importable meanwhile; sys.modules is left
    as it was (the module keeps what it imported)."""
    saved = {n: sys.modules.get(n) for n in (*stand_ins, name)}
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.update(stand_ins)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
    return module


def _cpu_ddp(module: torch.nn.Module, device_ids: Any = None, output_device: Any = None, **kwargs: Any) -> Any:
    """The Organizer's ``DistributedDataParallel(model, device_ids=[local_rank], output_device=local_rank, ...)`` on
    CPU, where torch refuses device ids (iMIX runs on GPUs only): without them, as DDP takes a CPU module."""
    if all(p.device.type == "cpu" for p in module.parameters()):
        device_ids = output_device = None
    return torch.nn.parallel.DistributedDataParallel(module, device_ids=device_ids, output_device=output_device, **kwargs)


def _load_data_builder() -> types.ModuleType:
    """iMIX's ``imix/data/builder.py`` (``build_imix_train_loader``: the dataset from its registry, then the loader
    with the config's sampler, through ``imix/data/sampler/builder.py``, which makes it a ``DistributedSampler`` of
    this rank once the process group is up), without ``imix.data``'s package, whose dataset readers and samplers
    need what the wheel lacks (cytoolz, data files)."""
    data = _ENGINE_DIR.parent / "data"
    adaptor = _load("imix.data.sampler.sampler_adaptor", data / "sampler/sampler_adaptor.py", {})
    samplers = _load("imix.data.sampler.builder", data / "sampler/builder.py",
                     {"imix.data.sampler.sampler_adaptor": adaptor})  # fmt: skip
    sampler = _module("imix.data.sampler", build_sampler=samplers.build_sampler,
                      build_batch_sampler=samplers.build_batch_sampler)  # fmt: skip
    return _load("imix.data.builder", data / "builder.py", {"imix.data.sampler": sampler})


def _load_imix() -> tuple[types.ModuleType, types.ModuleType]:
    builder = _module("imix.models.builder", build_loss=_build_loss)
    base_loss = _load("imix.models.losses.base_loss", _ENGINE_DIR.parent / "models/losses/base_loss.py",
                      {"imix.models.builder": builder})  # fmt: skip
    zoo = {
        "imix.models": _module("imix.models", build_loss=_build_loss, build_model=_build_model),
        "imix.solver": _module("imix.solver", build_lr_scheduler=_build_lr_scheduler, build_optimizer=_build_optimizer),
        "imix.data": _module("imix.data", build_imix_train_loader=lambda cfg: DATASETS[cfg.dataset_type](cfg),
                             build_imix_test_loader=lambda cfg, name: DATASETS[name](cfg)),
        "imix.models.losses.base_loss": base_loss,
    }  # fmt: skip
    organizer = _load("imix.engine.organizer", _ENGINE_DIR / "organizer.py", zoo)
    engine = _load("imix.engine.imix_engine", _ENGINE_DIR / "imix_engine.py", {"imix.engine.organizer": organizer})
    engine.time = _module("time", sleep=lambda seconds: None)  # the loop's sleeps, only
    organizer.DistributedDataParallel = _cpu_ddp
    return organizer, engine


ORGANIZER, ENGINE = _load_imix()
DATA_BUILDER = _load_data_builder()


@DATA_BUILDER.DATASETS.register_module()
class RegisteredSamples(NoisySamples):
    """:class:`NoisySamples` as a dataset of iMIX's registry, for a config's ``train_data.data``: ``samples`` samples
    of :func:`tiny_data`'s values."""

    def __init__(self, samples: int) -> None:
        g = torch.Generator().manual_seed(1)
        super().__init__(torch.randn(samples, 4, generator=g) * 3, torch.randn(samples, 1, generator=g) * 3)


DATASETS["IMIXLoader"] = DATA_BUILDER.build_imix_train_loader  # iMIX's own loader of cfg.train_data
Losser = ORGANIZER.Losser  # iMIX's, importable from here: EvaluateHook pickles the LightningModule that holds one
Losser.__module__ = __name__


@contextlib.contextmanager
def _set_up(cfg: Config) -> Iterator[None]:
    """What iMIX's ``default_setup`` leaves for the Organizer: the imix logger at INFO (else the Organizer adds a
    handler) and iMIX's work dir (EvaluateHook opens its ``eval_result.json`` there); both restored after."""
    logger = logging.getLogger("imix")
    level, work_dir = logger.level, imix.utils.config.get_imix_work_dir()
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    imix.utils.config.set_imix_work_dir(cfg.work_dir)
    try:
        yield
    finally:
        logger.setLevel(level)
        imix.utils.config.set_imix_work_dir(work_dir)


def organize(cfg: Config) -> Any:
    """iMIX's ``Organizer(cfg)``, as a fresh process builds it (mixed precision off until ``cfg.fp16`` sets it)."""
    ORGANIZER._AUTOMATIC_imixED_PRECISION = False
    with _set_up(cfg):
        return ORGANIZER.Organizer(cfg)


def train(cfg: Config, lightning_steps: bool = False) -> Any:
    """``imixEngine(cfg).train()``, iMIX's ``tools/run.py`` minus its setup; returns the engine. ``lightning_steps``:
    the Organizer builds :class:`LightningStep` where it builds OptimizerHook."""
    ORGANIZER._AUTOMATIC_imixED_PRECISION = False
    hooks = ORGANIZER.hooks
    if lightning_steps:
        ORGANIZER.hooks = types.SimpleNamespace(**{**vars(hooks), "OptimizerHook": LightningStep})
    try:
        with _set_up(cfg):
            engine = ENGINE.imixEngine(cfg)
    finally:
        ORGANIZER.hooks = hooks
    engine.train()
    return engine


class IMIXModule(L.LightningModule):
    """iMIX's ``run_train_iter`` as a LightningModule: the model's forward, then the Organizer's ``losses_fn``."""

    def __init__(self, organizer: Any) -> None:
        super().__init__()
        model = organizer.model  # wrapped in DDP where the process group was up: Lightning's strategy wraps its own
        self.model = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
        self.losses_fn = organizer.losses_fn
        self.optimizer = organizer.optimizer

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        engine = next(c for c in self.trainer.callbacks if isinstance(c, IMIXAdapter)).engine
        output = self.model(batch, cur_epoch=getattr(engine, "epoch", None), cur_iter=engine.iter,
                            inner_iter=getattr(engine, "inner_iter", None))  # as iMIX's run_train_iter passes them
        return self.losses_fn(output)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer

    def init_ema(self) -> None:  # hooks reach the LightningModule as trainer.model: it offers the model's EMA API
        self.model.init_ema()

    def update_ema(self) -> None:
        self.model.update_ema()


def fit(cfg: Config, ckpt_path: str | None = None, lightning_steps: bool = False,
        **trainer_kwargs: Any) -> tuple[Any, IMIXModule, L.Trainer]:
    """The same config under Lightning: the Organizer's model, loader, optimizer and hooks, driven by IMIXAdapter
    (epochs from ``total_epochs``; by iteration one pass over the loader, as iMIX's ``train_by_iter``).
    ``lightning_steps``: without the Organizer's OptimizerHook, Lightning accumulating as the config says."""
    organizer = organize(cfg)
    if lightning_steps:
        organizer.hooks = [h for h in organizer.hooks if type(h).__name__ != "OptimizerHook"]
        trainer_kwargs.setdefault("accumulate_grad_batches", organizer.gradient_accumulation_steps)
    module = IMIXModule(organizer)
    adapter = IMIXAdapter(organizer.hooks, cfg=cfg, work_dir=cfg.work_dir)
    options = dict(
        max_epochs=cfg.total_epochs if organizer.by_epoch else 1, logger=False, enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False, default_root_dir=cfg.work_dir, accelerator="cpu",
    )  # fmt: skip
    options.update(trainer_kwargs)
    options["callbacks"] = [adapter, *options.get("callbacks", [])]
    trainer = L.Trainer(**options)
    trainer.fit(module, organizer.train_data_loader, ckpt_path=ckpt_path)
    return organizer, module, trainer


# ------------------------------------------------------------------------------------------ comparing two runs
class LogLines(logging.Handler):
    """The imix loggers' messages, work dirs and wall-clock figures (seconds, durations) masked; not the Organizer's
    list of the hooks it built (which names LightningStep under iMIX)."""

    def __init__(self, work_dir: str) -> None:
        super().__init__(logging.INFO)
        self.work_dir, self.lines = str(work_dir), []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("hook name:"):
            return
        message = record.getMessage().replace(self.work_dir, "WORK_DIR")
        self.lines.append((record.name, re.sub(r"\d+\.\d{4,}|\d+:\d\d:\d\d", "T", message)))


def logged(runner: Callable[[], Any], work_dir: str) -> tuple[Any, list[tuple[str, str]]]:
    """``runner()``'s result and the imix loggers' lines meanwhile (:class:`LogLines`)."""
    logger = logging.getLogger("imix")
    lines, level = LogLines(work_dir), logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        result = runner()
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    return result, lines.lines


def checkpoints(work_dir: Path) -> dict[str, Any]:
    """The checkpoint files in ``work_dir`` (not EvaluateHook's pickled model_best.pth)."""
    files = sorted(p for p in work_dir.glob("*.pth") if p.name != "model_best.pth")
    return {p.name: torch.load(p, weights_only=False) for p in files}


def status_rows(work_dir: Path) -> list[dict[str, Any]]:
    """JSONLoggerHook's rows (but the timings)."""
    rows = [json.loads(line) for line in (work_dir / "training_status.json").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in rows]


def tensorboard(work_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """TensorboardLoggerHook's scalars (but the timings): tag -> [(step, value)]."""
    events = EventAccumulator(str(work_dir / "runs")).Reload()
    tags = [t for t in events.Tags()["scalars"] if t not in TIMINGS]
    return {t: [(e.step, e.value) for e in events.Scalars(t)] for t in tags}


def assert_same(mine: Any, ref: Any, path: str = "checkpoint") -> None:
    """Nested checkpoint content: equal tensors, equal everything else."""
    if isinstance(ref, torch.Tensor):
        assert torch.equal(mine, ref), path
    elif isinstance(ref, dict):
        assert mine.keys() == ref.keys(), path
        for key in ref:
            assert_same(mine[key], ref[key], f"{path}[{key!r}]")
    elif isinstance(ref, (list, tuple)):
        assert len(mine) == len(ref), path
        for i, (m, r) in enumerate(zip(mine, ref)):
            assert_same(m, r, f"{path}[{i}]")
    else:
        assert mine == ref, path


class Run(NamedTuple):
    """What one run left: its hooks (the engine's or the adapter's), the iMIX model, the log lines, its work dir."""

    hooks: list[Any]
    model: torch.nn.Module
    log: list[tuple[str, str]]
    work_dir: Path


def assert_runs_as_imix(tmp_path: Path, lightning_steps: bool = False, **overrides: Any) -> tuple[Run, Run]:
    """Train ``config(**overrides)`` with iMIX's engine and with Lightning; assert that both show the same event
    stream (mount points; iter / inner_iter / epoch, limits and the log buffer's counters at each), the same scalars
    per iteration, learning rates, log buffer history, weights, checkpoint files, JSON rows, TensorBoard scalars and
    log lines. Returns (iMIX's run, Lightning's run) for checks of their own."""
    runs = []
    for name, runner in (("imix", lambda cfg: train(cfg, lightning_steps)),
                         ("lightning", lambda cfg: fit(cfg, lightning_steps=lightning_steps)[0])):  # fmt: skip
        cfg = config(tmp_path / name, **overrides)
        host, log = logged(lambda: runner(cfg), cfg.work_dir)
        hooks = host._hooks if name == "imix" else host.hooks
        runs.append(Run(hooks, host.model, log, tmp_path / name))
    imix, lightning = runs
    ref, mine = recorder(imix.hooks), recorder(lightning.hooks)
    assert [type(h) for h in lightning.hooks] == [type(h) for h in imix.hooks if not isinstance(h, LightningStep)]
    assert mine.events == ref.events
    assert mine.scalars == ref.scalars
    assert mine.lrs == ref.lrs
    assert mine.history == ref.history
    assert_same(lightning.model.state_dict(), imix.model.state_dict(), "weights")
    imix_files, lightning_files = checkpoints(imix.work_dir), checkpoints(lightning.work_dir)
    assert list(lightning_files) == list(imix_files)
    assert_same(lightning_files, imix_files)
    assert status_rows(lightning.work_dir) == status_rows(imix.work_dir)
    assert tensorboard(lightning.work_dir) == tensorboard(imix.work_dir) and "total_loss" in tensorboard(imix.work_dir)
    assert lightning.log == imix.log
    return imix, lightning
