"""``MMEngineData``: the dataloaders of an MMEngine config, built as ``Runner.build_dataloader`` builds them."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from mmengine.runner import Runner
from torch.utils.data import DataLoader
from typing_extensions import override

from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.mmengine.module import scope

_STAGES = ("train", "val", "test")


class MMEngineData(pl.LightningDataModule):
    """``train_dataloader`` / ``val_dataloader`` / ``test_dataloader`` configs (or loaders) as a LightningDataModule.

    Each loader is built by MMEngine's own ``Runner.build_dataloader`` the first time Lightning asks for it, inside
    the run, once the process group is up: the dataset through ``DATASETS`` (``full_init``), the sampler
    (``DefaultSampler`` / ``InfiniteSampler`` with the run's ``seed``, sharding by rank), ``batch_sampler``,
    ``collate_fn``, ``worker_init_fn`` and workers, all as the Runner does. The samplers shard the data themselves:
    build the Trainer with ``use_distributed_sampler=False``, or Lightning replaces them under DDP.

    Example::

        data = MMEngineData.from_config(Config.fromfile("configs/my_config.py"))
        Trainer(use_distributed_sampler=False, ...).fit(MMEngineModule.from_config(cfg), datamodule=data)
    """

    def __init__(
        self,
        train_dataloader: Mapping[str, Any] | DataLoader | None = None,
        val_dataloader: Mapping[str, Any] | DataLoader | None = None,
        test_dataloader: Mapping[str, Any] | DataLoader | None = None,
        seed: int | None = None,
        diff_rank_seed: bool = False,
        default_scope: str | None = None,
        by_epoch: bool = True,
    ) -> None:
        super().__init__()
        self._configs = {"train": train_dataloader, "val": val_dataloader, "test": test_dataloader}
        self._built: dict[str, DataLoader] = {}
        self._started: list[Any] = []  # the train iterator start_train_iterator() started, until the loader's first iter()
        self.seed, self.diff_rank_seed, self.default_scope = seed, diff_rank_seed, default_scope
        #: the train loop is epoch-based: each pass runs the loader to its end (``IterBasedTrainLoop`` restarts it)
        self.by_epoch = by_epoch
        #: the next fit's :meth:`setup` starts the train iterator (:meth:`start_train_iterator`): under DDP, where the
        #: samplers need the process group that build time lacks
        self.start_iterator_at_setup = False

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], seed: int | None = None) -> MMEngineData:
        """The loaders of a whole MMEngine config; a stage whose loop is not configured (``val_cfg=None``) has none.

        ``seed`` is the run's seed (``seed_from_config``, which a config without ``randomness.seed`` draws), passed
        to the samplers as the Runner passes its own; by default the config's ``randomness.seed``."""
        randomness = dict(cfg.get("randomness") or {})
        loops = {"train": cfg.get("train_cfg"), "val": cfg.get("val_cfg"), "test": cfg.get("test_cfg")}
        loaders = {
            stage: copy.deepcopy(cfg.get(f"{stage}_dataloader")) if loops[stage] is not None else None
            for stage in _STAGES
        }
        return cls(
            **{f"{stage}_dataloader": loader for stage, loader in loaders.items()},
            seed=randomness.get("seed") if seed is None else seed,
            diff_rank_seed=bool(randomness.get("diff_rank_seed", False)),
            default_scope=cfg.get("default_scope"),
            by_epoch=_by_epoch(cfg.get("train_cfg")),
        )

    def has(self, stage: str) -> bool:
        """Whether ``stage`` (``"train"``, ``"val"``, ``"test"``) has a loader."""
        return self._configs[stage] is not None

    def loader(self, stage: str) -> DataLoader:
        """The ``stage`` loader, built on first use (``Runner.build_dataloader``) and kept for the later epochs."""
        if stage not in self._built:
            config = self._configs[stage]
            if config is None:
                raise ValueError(
                    f"MMEngineData has no {stage}_dataloader: give MMEngineData({stage}_dataloader=dict(dataset=..., "
                    f"sampler=..., batch_size=...)) or a config with {stage}_dataloader and {stage}_cfg."
                )
            with scope({"default_scope": self.default_scope}):
                loader = Runner.build_dataloader(copy.deepcopy(config), seed=self.seed, diff_rank_seed=self.diff_rank_seed)
            if stage == "train" and isinstance(loader, DataLoader):
                loader.__class__ = _runner_iteration(type(loader), exhaust=self.by_epoch, started=self._started)
            self._built[stage] = loader
        return self._built[stage]

    def start_train_iterator(self) -> None:
        """Build the train loader and start iterating it now, as the Runner's ``IterBasedTrainLoop`` does when it is
        built (before the model's ``init_weights``, which draws from the same random generators): the loader's first
        ``iter()`` then returns this iterator. Only for one process: under DDP the samplers need the process group."""
        loader = self.loader("train")
        self._started[:] = [iter(loader)]

    @override
    def setup(self, stage: str) -> None:
        """A fit starts the train iterator if :attr:`start_iterator_at_setup` (before the hooks' ``before_run`` and
        the model's ``init_weights``, as the Runner's ``IterBasedTrainLoop`` starts it when built)."""
        if stage == "fit" and self.start_iterator_at_setup:
            self.start_iterator_at_setup = False
            self.start_train_iterator()

    @override
    def train_dataloader(self) -> DataLoader:
        return self.loader("train")

    @override
    def val_dataloader(self) -> DataLoader | list:
        return self.loader("val") if self.has("val") else []

    @override
    def test_dataloader(self) -> DataLoader:
        return self.loader("test")



def _runner_iteration(cls: type[DataLoader], *, exhaust: bool, started: list[Any]) -> type:
    """A subclass of the loader class ``cls`` that iterates as the Runner's loops do, for what Lightning does not:

    - its first ``iter()`` returns the iterator :meth:`MMEngineData.start_train_iterator` started (taken from
      ``started``), if any;
    - with ``exhaust``, each pass runs the loader's iterator to its end once it has given ``len()``
      batches, as ``EpochBasedTrainLoop``'s ``for`` loop does and Lightning, which stops at ``len()``, does not: a
      batch sampler that resets its state at the end (mmdet's ``AspectRatioBatchSampler``) starts the next epoch
      clean. Batches beyond ``len()`` (which the Runner would train on) are an error.
    """

    def __iter__(self: Any) -> Any:
        iterator = started.pop() if started else cls.__iter__(self)
        if not exhaust:
            return iterator
        return _exhausting(iterator, len(self))

    return type(f"Runner{cls.__name__}", (cls,), {"__iter__": __iter__, "__module__": __name__})


def _exhausting(iterator: Any, length: int) -> Any:
    for i, batch in enumerate(iterator):
        if i == length - 1:
            extra = sum(1 for _ in iterator)
            if extra:
                raise RuntimeError(
                    f"MMEngineData: the train loader gave {extra} batches beyond its len() of {length}; MMEngine's "
                    "EpochBasedTrainLoop would train on them and Lightning stops at len(). Give the batch sampler "
                    "a __len__ that counts every batch it yields."
                )
        yield batch


def _by_epoch(train_cfg: Mapping[str, Any] | None) -> bool:
    if not train_cfg:
        return True
    from lightning_hooks.families.mmengine.iter_based import EpochLoopConfig, parse_train_cfg

    return isinstance(parse_train_cfg(dict(train_cfg)), EpochLoopConfig)
