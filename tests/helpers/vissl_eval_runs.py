"""VISSL's linear-evaluation integration-test config (``quick_eval_in1k_linear``, vissl_train_runs.py's small
``meters`` one: a frozen ResNet-50 trunk, two linear heads, one ``accuracy_list_meter``), with and without its test
phases (``TEST_MODEL``), trained by VISSL's launcher
and by ``lightning-hooks train config=... --logger csv --logger tensorboard`` without SSLTensorboardHook (subprocess
side); with its test phases in two processes too (VISSL's launcher with ``NUM_PROC_PER_NODE=2`` against
``lightning-hooks train --devices 2``: vissl_train_runs.run_two_processes). Saved per run: stdout.json and metrics.json rows, the checkpoint files (as digests), what each
Lightning logger stored, as ``(step, name, value)`` points, and in two processes each rank's steps and meters."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent

#: the Lightning loggers the user asks for (no VISSL TensorBoard hook: the config leaves it off)
LOGGERS = ["--logger", "csv", "--logger", "tensorboard"]

#: the config's own TEST_MODEL (its test phases: after train phases 0, every TEST_EVERY_NUM_EPOCH=2 and the last:
#: both of its 2 epochs), on synthetic data too: 8 samples, the test transforms at 32 px
TEST_MODEL = ["config.TEST_MODEL=true", "config.DATA.TEST.DATA_SOURCES=[synthetic]", "config.DATA.TEST.LABEL_SOURCES=[]",
              "config.DATA.TEST.DATASET_NAMES=[synthetic]", "config.DATA.TEST.DATA_PATHS=[]",
              "config.DATA.TEST.DATA_LIMIT=8", "config.DATA.TEST.BATCHSIZE_PER_REPLICA=4",
              "config.DATA.TEST.RANDOM_SYNTHETIC_IMAGES=true", "config.DATA.TEST.DEFAULT_GRAY_IMG_SIZE=32",
              "config.DATA.TEST.TRANSFORMS=[{name: Resize, size: 36}, {name: CenterCrop, size: 32}, {name: ToTensor}]"]  # fmt: skip

#: the scenarios: extra overrides on the ``meters`` config (train phases only, from a pretrained trunk:
#: :func:`pretrained`); LogLossLrEtaHook every 4 iterations (and at 1 and every 5 up to 100); with the config's test
#: phases over 3 epochs (its TEST_EVERY_NUM_EPOCH=2: after train phases 0 and 2, none after 1), VISSL's stateful
#: sampler and a checkpoint at iteration 7 (inside train phase 2: the resumed scenarios start from it)
SCENARIOS: dict[str, list[str]] = {"train_only": ["config.LOG_FREQUENCY=4"],
                                   "test_model": [*TEST_MODEL, "config.OPTIMIZER.num_epochs=3",
                                                  "config.DATA.TRAIN.USE_STATEFUL_DISTRIBUTED_SAMPLER=true",
                                                  "config.CHECKPOINT.CHECKPOINT_ITER_FREQUENCY=7"]}  # fmt: skip
#: each resumed scenario's start, a checkpoint file of VISSL's ``test_model`` run, and its rerun's overrides (VISSL
#: resumes from ``model_iteration*`` files only while CHECKPOINT_ITER_FREQUENCY is set)
RESUMED = {"resumed_after_untested_phase": ("model_phase1.torch", ["config.CHECKPOINT.CHECKPOINT_ITER_FREQUENCY=-1"]),
           "resumed_inside_tested_phase": ("model_iteration7.torch", [])}  # fmt: skip

#: (``OPTIMIZER.num_epochs``, ``TEST_EVERY_NUM_EPOCH``) schedules :func:`schedules` compares
SCHEDULES = ((1, 1), (4, 1), (2, 2), (2, 7), (3, 2), (5, 2), (7, 3), (105, 5))

#: the config's test phases in two processes (gloo; vissl_train_runs.run_two_processes, each rank's steps and meters
#: recorded): 12 train and 12 test samples (the heads' 12 classes), each rank its shard of 6 in 2 batches of 3,
#: loaded by a loader worker, which takes its indices from VISSL's shuffling test sampler when the phase's iterator is
#: made: each rank's test batches come in VISSL's order only if that iterator is made where VISSL makes it, with the
#: sampler at VISSL's epoch (the phase's index). The workers are forked, not started from the config's forkserver,
#: which each of the 4 ranks would start, importing torch and VISSL (~4 s CPU each): the order and the workers' seeds
#: do not depend on how they start (the rank draws the base seed, its sampler gives the indices)
TWO_PROCESSES = [*TEST_MODEL, "config.DATA.TRAIN.DATA_LIMIT=12", "config.DATA.TRAIN.BATCHSIZE_PER_REPLICA=3",
                 "config.DATA.TEST.DATA_LIMIT=12", "config.DATA.TEST.BATCHSIZE_PER_REPLICA=3",
                 "config.DATA.NUM_DATALOADER_WORKERS=1", "config.MULTI_PROCESSING_METHOD=fork"]  # fmt: skip


def run(root: Path, name: str) -> dict[str, Any]:
    """Both sides on scenario ``name``; the Lightning run's logger points too."""
    from vissl_train_runs import run_vissl

    out = root / name
    extra = [*SCENARIOS[name], *(pretrained(out) if name == "train_only" else [])]
    vissl = run_vissl("meters", out / "vissl", extra)
    return {"vissl": vissl, "lightning": lightning_with_points(out / "lightning", extra)}


def lightning_with_points(folder: Path, extra: list[str]) -> dict[str, Any]:
    """``lightning-hooks train`` of the ``meters`` config with :data:`LOGGERS` into ``folder``: what it wrote, and
    what each logger stored (``points``)."""
    from tracker_stores import csv_points, tensorboard_points
    from vissl_train_runs import run_lightning

    lightning = run_lightning("meters", folder, LOGGERS, extra)
    lightning["points"] = {
        "csv": [csv_points(p) for p in sorted(folder.glob("lightning_logs/version_*/metrics.csv"))],
        "tensorboard": [tensorboard_points(p) for p in sorted(folder.glob("tensorboard/version_*"))],
    }
    return lightning


def resumed(root: Path, name: str) -> dict[str, Any]:
    """Each side auto-resumes (the config's AUTO_RESUME) from a folder holding only VISSL's :data:`RESUMED` file of
    the ``test_model`` scenario: ``model_phase1.torch`` (the end of train phase 1, which VISSL does not test: it
    trains phase 2, then tests) or ``model_iteration7.torch`` (inside phase 2: its last 2 batches, then its test);
    the Lightning run's logger points too."""
    import shutil

    from vissl_train_runs import run_vissl

    file, rerun = RESUMED[name]
    extra = [*SCENARIOS["test_model"], *rerun]
    for side in ("vissl", "lightning"):
        (root / name / side).mkdir(parents=True)
        shutil.copy(root / "test_model" / "vissl" / file, root / name / side / file)
    with iterators_made() as theirs:
        vissl = run_vissl("meters", root / name / "vissl", extra)
    with iterators_made() as ours:
        lightning = lightning_with_points(root / name / "lightning", extra)
    return {"vissl": {**vissl, "iterators": theirs}, "lightning": {**lightning, "iterators": ours}}


@contextlib.contextmanager
def iterators_made() -> Iterator[list[tuple[str, Any, Any]]]:
    """The loader iterators made meanwhile (``DataLoader.__iter__``), each as its sampler's class, ``epoch`` and
    ``start_iter`` then: what a loader worker would take its indices from (VISSL's samplers shuffle by epoch)."""
    from torch.utils.data import DataLoader

    made: list[tuple[str, Any, Any]] = []
    original = DataLoader.__iter__

    def recording(loader: Any) -> Any:
        sampler = loader.sampler
        made.append((type(sampler).__name__, getattr(sampler, "epoch", None), getattr(sampler, "start_iter", None)))
        return original(loader)

    DataLoader.__iter__ = recording  # type: ignore[method-assign]  # restored below
    try:
        yield made
    finally:
        DataLoader.__iter__ = original  # type: ignore[method-assign]


def direct_adapter(root: Path) -> dict[str, Any]:
    """The meters of ``ClassyAdapter([], vissl=overrides)`` built directly, of ``VisslConfigModule.adapter()`` and of
    VISSL's own ``SelfSupervisionTask`` on the same config (its ``_build_meters``, what its ``prepare`` sets), each as
    ``(class, name, state)`` (tensors as digests)."""
    from vissl.trainer.train_task import SelfSupervisionTask
    from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict
    from vissl_train_runs import digest, overrides

    from lightning_hooks.families.classy.adapter import ClassyAdapter
    from lightning_hooks.families.classy.vissl_module import VisslConfigModule

    config = overrides("meters", root / "direct_adapter")
    _, composed = convert_to_attrdict(compose_hydra_configuration(config))

    def described(meters: list[Any]) -> list[Any]:
        return [(type(m).__name__, m.name, digest(m.get_classy_state())) for m in meters]

    return {"adapter": described(ClassyAdapter([], vissl=config).task.meters),
            "given": described(ClassyAdapter([], vissl=config, meters=[]).task.meters),
            "module": described(VisslConfigModule(config).adapter().task.meters),
            "vissl": described(SelfSupervisionTask.from_config(composed)._build_meters())}  # fmt: skip


def pretrained(root: Path) -> list[str]:
    """A pretrained trunk for the ``meters`` config (a ResNet-50 of seed 3, saved as a VISSL pretraining
    checkpoint: ``classy_state_dict.base_model.model.trunk``) at ``root/pretrained.torch``, and the override that
    starts from it (``MODEL.WEIGHTS_INIT.PARAMS_FILE``, which VISSL's ``_build_model`` loads)."""
    import torch
    from vissl.models import build_model
    from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict
    from vissl_train_runs import overrides

    _, config = convert_to_attrdict(compose_hydra_configuration(overrides("meters", root)))
    torch.manual_seed(3)
    trunk = build_model(config.MODEL, config.OPTIMIZER).trunk.base_model.state_dict()
    root.mkdir(parents=True, exist_ok=True)
    torch.save({"classy_state_dict": {"base_model": {"model": {"trunk": trunk, "heads": {}}}}}, root / "pretrained.torch")
    return [f"config.MODEL.WEIGHTS_INIT.PARAMS_FILE={root / 'pretrained.torch'}"]


def memory_bank(root: Path) -> dict[str, Any]:
    """PIRL's loss (``quick_pirl``, whose ``num_train_samples`` VISSL's ``_build_loss`` sets to the dataset's length,
    the config saying -1) as ``VisslConfigModule.setup`` on a Trainer builds it and as VISSL's ``SelfSupervisionTask``
    does: the shapes of its state (the memory bank's rows)."""
    from vissl.trainer.train_task import SelfSupervisionTask
    from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict
    from vissl_train_runs import overrides

    from lightning_hooks.core.lightning_api import pl
    from lightning_hooks.families.classy.vissl_module import VisslConfigModule

    config = overrides("pirl", root / "pirl")
    task = SelfSupervisionTask.from_config(convert_to_attrdict(compose_hydra_configuration(config))[1])
    task.datasets, task.data_and_label_keys = task.build_datasets()
    module = VisslConfigModule(config)
    module.trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False)
    module.setup("fit")
    losses = {"vissl": task._build_loss(), "lightning": module.criterion}
    return {side: {key: tuple(value.shape) for key, value in loss.state_dict().items()} for side, loss in losses.items()}


def schedules() -> dict[str, Any]:
    """Per schedule of :data:`SCHEDULES`, the phases (train: True, test: False, in order) VISSL's
    ``SelfSupervisionTask._build_phases`` builds with ``TEST_MODEL``, and those ``lightning-hooks train`` runs: each
    epoch, then a validation where :func:`~lightning_hooks.families.classy.vissl.tests_after` says so."""
    from vissl.config import AttrDict
    from vissl.trainer.train_task import SelfSupervisionTask

    from lightning_hooks.families.classy.vissl import tests_after

    result = {}
    for epochs, every in SCHEDULES:
        config = AttrDict({"TEST_ONLY": False, "TEST_MODEL": True, "TEST_EVERY_NUM_EPOCH": every,
                           "OPTIMIZER": {"num_epochs": epochs}})  # fmt: skip
        host = SimpleNamespace(config=config, num_train_phases=epochs, num_train_phases_per_epoch=1)
        vissl = [phase["train"] for phase in SelfSupervisionTask._build_phases(host)]
        ours = [train for phase in range(epochs) for train in (True, *(False,) * tests_after(config, phase))]
        result[f"{epochs} epochs, every {every}"] = {"vissl": vissl, "lightning": ours}
    return result


def lars_step() -> dict[str, Any]:
    """VISSL's LARS (``OPTIMIZER.name=lars``, Barlow Twins; its ``step`` takes no closure) on a small linear layer, two
    steps each: as VISSL's train step calls it (backward, then ``step()``) and as Lightning does through
    :func:`~lightning_hooks.families.classy.vissl_module.closure_step` (``step(closure=...)``); the weights as digests."""
    import torch
    import vissl.optimizers  # noqa: F401  (registers VISSL's optimizers)
    from classy_vision.optim import build_optimizer
    from vissl_train_runs import digest

    from lightning_hooks.families.classy.vissl_module import closure_step

    weights = {}
    for side in ("vissl", "lightning"):
        torch.manual_seed(0)
        layer, data = torch.nn.Linear(4, 3), torch.randn(5, 4)
        optimizer = build_optimizer({"name": "lars", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4,
                                     "exclude_bias_and_norm": True, "num_epochs": 1})  # fmt: skip
        optimizer.set_param_groups(layer.parameters())
        torch_optimizer = optimizer.optimizer

        def closure() -> Any:
            torch_optimizer.zero_grad()
            loss = layer(data).square().mean()
            loss.backward()
            return loss

        for _ in range(2):
            if side == "vissl":
                closure()
                torch_optimizer.step()
            else:
                closure_step(torch_optimizer).step(closure=closure)
        weights[side] = digest(layer.state_dict())
    return weights


def refusals(root: Path) -> dict[str, Any]:
    """``lightning-hooks train`` (:func:`vissl_train_runs.run_command`) where it refuses a config before training,
    each in its own checkpoint folder: VISSL's shipped ``pretrain/swav/swav_8node_resnet`` (Apex's amp) and the
    ``swav`` config with VISSL's FSDP task; per case, the command's exit code, stdout, stderr and the json files in its
    folder."""
    from vissl_train_runs import overrides, run_command

    cases = {"apex": lambda folder: ["config=pretrain/swav/swav_8node_resnet", f"config.CHECKPOINT.DIR={folder}"],
             "fsdp": lambda folder: [*overrides("swav", folder), "config.TRAINER.TASK_NAME=self_supervision_fsdp_task"]}
    results = {}
    for case, arguments in cases.items():
        folder = root / case
        folder.mkdir(parents=True)
        result = run_command(arguments(folder))
        results[case] = {**result, "folder": str(folder), "json": sorted(p.name for p in folder.glob("*.json"))}
    return results


def child_main(out: str) -> None:
    sys.path.insert(0, str(HERE))
    from vissl_train_runs import prepare_child, run_scenarios, run_two_processes

    prepare_child()
    root = Path(out)
    scenarios = {name: (lambda name=name: run(root, name)) for name in SCENARIOS}
    starts = {name: (lambda name=name: resumed(root, name)) for name in RESUMED}
    run_scenarios(root, {**scenarios, **starts, "direct_adapter": lambda: direct_adapter(root),
                         "memory_bank": lambda: memory_bank(root), "lars_step": lars_step,
                         "schedules": schedules, "refusals": lambda: refusals(root / "refusals"),
                         "test_model_two_processes": lambda: run_two_processes(root, "meters", "test_model_two_processes",
                                                                               TWO_PROCESSES)},
                  keep={"test_model": tuple(f"vissl/{file}" for file, _ in RESUMED.values())})  # fmt: skip
