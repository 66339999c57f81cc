"""LightningDataModules for a Classy task config's datasets and a VISSL config's ``DATA``.

Both return the dataloaders the legacy task builds, with the legacy samplers (Classy's ``DistributedSampler`` with
``shuffle_seed + epoch``, VISSL's ``StatefulDistributedSampler`` seeded by ``SEED_VALUE``): train with
``Trainer(use_distributed_sampler=False)`` so that Lightning keeps them; Lightning sets their epoch every train epoch,
as the legacy task does at every train phase.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from typing_extensions import override

from lightning_hooks.core.lightning_api import pl


def load_task_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    """A Classy task config: a JSON file (as ``classy_train.py --config_file``) or a dict (deep-copied)."""
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if not path.is_file():
            raise FileNotFoundError(f"Classy task config {path}: no such file")
        return json.loads(path.read_text())
    return copy.deepcopy(dict(config))


class ClassyTaskData(pl.LightningDataModule):
    """The ``train`` and ``test`` datasets of a Classy task config (Classy's registry, ``batchsize_per_replica``,
    ``use_shuffle``, ``transforms``, ``num_samples``), loaded as ``ClassificationTask`` loads them
    (``ClassyDataset.iterator``: its sampler, batch size and worker count, Classy's ``dataloader_mp_context``).

    ``source``: a ``ClassificationTask`` (``ClassyTaskModule.task``, whose ``from_config`` built the datasets), or a
    task config (file or dict), whose ``dataset`` section is built here with Classy's ``build_dataset``. The test
    dataset is both the validation data of ``fit`` (Classy's test phases) and the data of ``trainer.test``.

    Example::

        data = ClassyTaskData("my_task.json")
        trainer.fit(module, datamodule=data)
    """

    def __init__(self, source: Any) -> None:
        super().__init__()
        if hasattr(source, "datasets"):
            self.datasets = dict(source.datasets)
            self.mp_context = getattr(source, "dataloader_mp_context", None)
        else:
            from classy_vision.dataset import build_dataset

            config = load_task_config(source)
            self.datasets = {phase: build_dataset(config["dataset"][phase])
                             for phase in ("train", "test") if phase in config.get("dataset", {})}  # fmt: skip  # the comprehension's for clause under its value
            self.mp_context = "spawn"  # ClassificationTask's default

    def loader(self, phase: str) -> Any:
        """Classy's ``build_dataloader_from_dataset`` for ``phase`` (epoch 0; Lightning sets the epoch)."""
        dataset = self.datasets[phase]
        workers = getattr(dataset, "num_workers", 0)
        context = multiprocessing.get_context(self.mp_context) if workers and self.mp_context else None
        return dataset.iterator(phase_type=phase, current_phase_id=0, pin_memory=False, multiprocessing_context=context)

    @override
    def train_dataloader(self) -> Any:
        return self.loader("train")

    @override
    def val_dataloader(self) -> Any:
        return self.loader("test") if "test" in self.datasets else []

    @override
    def test_dataloader(self) -> Any:
        return self.loader("test")


class VisslConfigData(pl.LightningDataModule):
    """A VISSL config's ``DATA.TRAIN`` (and ``DATA.TEST`` with ``TEST_MODEL``: the validation data of ``fit``, VISSL's
    test phases) through VISSL's own ``build_dataset`` and ``build_dataloader``: its data sources (``synthetic``
    included), transforms, collator, ``DATA_LIMIT``, batch size, workers and sampler seed (VISSL's
    SetDataSamplerEpochHook then sets the samplers' epoch to its phase index, test phases counted).

    Example::

        data = VisslConfigData(module.config)
        trainer.fit(module, datamodule=data)
    """

    def __init__(self, config: Any) -> None:
        from lightning_hooks.families.classy.vissl import compose

        super().__init__()
        self.config = compose(config)
        self.datasets: dict[str, Any] = {}

    @property
    def splits(self) -> list[str]:
        """VISSL's ``available_splits``, in its order: ``TEST`` with ``TEST_MODEL``, then ``TRAIN`` unless
        ``TEST_ONLY``."""
        return [split for split, on in (("TEST", self.config.TEST_MODEL), ("TRAIN", not self.config.TEST_ONLY)) if on]

    @override
    def setup(self, stage: str) -> None:
        from vissl.data import build_dataset

        if not self.datasets:
            self.datasets = {split: build_dataset(self.config, split) for split in self.splits}

    def loader(self, split: str) -> Any:
        """VISSL's ``build_dataloader`` for ``split`` (``TRAIN`` or ``TEST``)."""
        from vissl.data import build_dataloader

        config = self.config
        device = self.trainer.strategy.root_device if self.trainer is not None else None
        return build_dataloader(
            dataset=self.datasets[split],
            dataset_config=config.DATA[split],
            num_dataloader_workers=config.DATA.NUM_DATALOADER_WORKERS,
            pin_memory=config.DATA.PIN_MEMORY,
            multi_processing_method=config.MULTI_PROCESSING_METHOD,
            device=device,
            sampler_seed=config.SEED_VALUE,
            split=split.lower(),
        )

    @override
    def train_dataloader(self) -> Any:
        return self.loader("TRAIN")

    @override
    def val_dataloader(self) -> Any:
        return self.loader("TEST") if "TEST" in self.datasets else []


