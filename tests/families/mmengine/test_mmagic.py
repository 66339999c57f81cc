"""mmagic's engine hooks (``mmagic.engine.hooks``) under MMEngine's real Runner vs ``MMEngineAdapter`` under Lightning,
on a tiny iteration-based run: ``PGGANFetchDataHook`` switching the train data mid-run (the loop's
``dataloader`` and ``dataloader_iterator``), ``ExponentialMovingAverageHook``, ``PickleDataHook``,
``ReduceLRSchedulerHook`` with mmagic's ``ReduceLR`` scheduler and mmagic's ``IterTimerHook``; and an mmagic config's
own ``LogProcessor``, built in the config's scope as the Runner builds it.

mmagic imports without its models (they need diffusers): ``openmmlab_stubs.MMAGIC``. ``BasicVisualizationHook`` runs on
mmagic ``DataSample`` outputs of its editors' ``val_step``, which need ``mmagic.models``: not exercised here.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from mmengine.dataset import DefaultSampler, InfiniteSampler
from mmengine.hooks import Hook
from mmengine_testkit import Points, Toy, assert_same_tensors, hook_of, run_lightning, run_mmengine, unprefixed
from openmmlab_stubs import MMAGIC, import_modules
from torch.utils.data import DataLoader

from lightning_hooks.families.mmengine import MMEngineAdapter

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mmagic") is None, reason="mmagic is not installed")

ITER_CFG = dict(type="IterBasedTrainLoop", max_iters=8, val_interval=4)


@pytest.fixture(scope="module", autouse=True)
def _mmagic() -> None:
    import_modules(MMAGIC)


@pytest.fixture(autouse=True)
def _no_restart_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmengine.runner.loops

    # MMEngine's _InfiniteDataloaderIterator sleeps 2 s whenever it restarts a finite loader
    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))


class ScaledPoints(Points):
    """A PGGAN-style dataset: ``update_annotations(scale)`` switches it to other samples (and another batch size,
    ``samples_per_gpu``) when the scale grows, as mmagic's ``GrowScaleImgDataset``."""

    def __init__(self) -> None:
        super().__init__(16, 1)
        self.scale, self.samples_per_gpu = 4, 4

    def update_annotations(self, scale: int) -> bool:
        if scale == self.scale:
            return False
        other = Points(10, 5)
        self.x, self.y, self.scale, self.samples_per_gpu = other.x, other.y, scale, 3
        return True


class GrowingToy(Toy):
    """``Toy`` whose ``_next_scale_int`` grows from 4 to 8 after 3 train steps (PGGAN grows it in ``train_step``); it
    takes the lists ``pseudo_collate`` makes; ``linear_ema`` is the average ``ExponentialMovingAverageHook`` keeps."""

    def __init__(self) -> None:
        super().__init__()
        self.linear_ema = torch.nn.Linear(4, 1).requires_grad_(False)
        self.linear_ema.load_state_dict(self.linear.state_dict())
        self.steps = 0

    @property
    def _next_scale_int(self) -> torch.Tensor:
        return torch.tensor(4 if self.steps < 3 else 8)

    def train_step(self, data: Any, optim_wrapper: Any) -> dict[str, torch.Tensor]:
        self.steps += 1
        return super().train_step(data, optim_wrapper)

    def forward(self, inputs: Any, labels: Any, mode: str = "tensor") -> Any:
        if isinstance(inputs, (list, tuple)):
            inputs, labels = torch.stack(list(inputs)), torch.stack(list(labels))
        return super().forward(inputs, labels, mode)


class Samples(Hook):
    """Records the first feature of each sample every iteration trains on, and the lr after it."""

    def __init__(self) -> None:
        self.seen: list[list[float]] = []
        self.lrs: list[float] = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        inputs = data_batch["inputs"]
        self.seen.append([round(float(x[0]), 6) for x in inputs])
        self.lrs.append(runner.optim_wrapper.get_lr()["lr"][0])


def _loader(sampler: str) -> DataLoader:
    dataset = ScaledPoints()
    if sampler == "infinite":
        return DataLoader(dataset, batch_size=4, sampler=InfiniteSampler(dataset, shuffle=True, seed=3))
    return DataLoader(dataset, batch_size=4, sampler=DefaultSampler(dataset, shuffle=True, seed=3))


def _hooks() -> dict[str, Any]:
    """mmagic's hooks as a config names them (``_scope_`` for the default scope mmagic's configs set)."""
    mmagic = dict(_scope_="mmagic")
    return dict(
        default_hooks=dict(checkpoint=None, timer=dict(type="IterTimerHook", **mmagic),
                           param_scheduler=dict(type="ReduceLRSchedulerHook", by_epoch=False, interval=2, **mmagic)),
        custom_hooks=[dict(type="PGGANFetchDataHook", **mmagic), Samples(),
                      dict(type="ExponentialMovingAverageHook", module_keys="linear_ema", interval=1,
                           interp_cfg=dict(momentum=0.5), **mmagic),
                      dict(type="PickleDataHook", output_dir="pickles", data_name_list=["seen"], interval=3,
                           after_run=True, **mmagic)],
    )  # fmt: skip


#: mmagic's ReduceLR, stepped by ReduceLRSchedulerHook from the mean train loss of each 2 iterations
REDUCE_LR = [dict(type="ReduceLR", _scope_="mmagic", by_epoch=False, factor=0.5, patience=0, threshold=0.5)]


@pytest.mark.parametrize(("sampler", "last"), [("infinite", [3, 3, 3, 3]), ("default", [3, 3, 3, 1])])
def test_mmengine_mmagic_hooks_and_the_pggan_data_switch_match_the_runner(tmp_path, sampler, last):
    torch.manual_seed(0)
    model = GrowingToy()
    runner = run_mmengine(tmp_path / "mm", train_cfg=ITER_CFG, train=_loader(sampler), model=model,
                          param_scheduler=REDUCE_LR, log_processor=dict(window_size=2), val=False,
                          **_hooks())  # fmt: skip
    _, adapter, module = run_lightning(tmp_path / "lt", train_cfg=ITER_CFG, train=_loader(sampler), model=model,
                                       param_schedulers=REDUCE_LR, log_processor=dict(window_size=2),
                                       val=False, **_hooks())  # fmt: skip

    mm, lt = hook_of(runner.hooks, Samples), hook_of(adapter.hooks, Samples)
    assert lt.seen == mm.seen
    # the loader PGGANFetchDataHook built at iteration 3 (10 samples, 3 a batch) feeds iteration 4 on
    assert [len(s) for s in mm.seen] == [4] * 4 + last
    assert lt.lrs == mm.lrs and min(mm.lrs) < max(mm.lrs)  # ReduceLR reduced it
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())  # weights and the EMA copy
    assert not torch.equal(runner.model.linear_ema.weight, runner.model.linear.weight)
    mm_pickles = sorted(os.listdir(tmp_path / "mm" / "pickles"))
    assert sorted(os.listdir(tmp_path / "lt" / "pickles")) == mm_pickles == ["iter_3.pkl", "iter_6.pkl", "iter_9.pkl"]
    for name in mm_pickles:
        with open(tmp_path / "mm" / "pickles" / name, "rb") as mm_file, open(tmp_path / "lt" / "pickles" / name, "rb") as lt_file:
            assert pickle.load(lt_file).keys() == pickle.load(mm_file).keys()
    # mmagic's IterTimerHook: the eta of every log_processor window (2 iterations here)
    assert "eta" in adapter.runner.message_hub.runtime_info and "eta" in runner.message_hub.runtime_info


def test_mmengine_mmagic_config_builds_its_log_processor_in_its_scope_as_the_runner(tmp_path):
    from mmagic.engine.runner import LogProcessor

    # mmagic's configs name type='LogProcessor' under default_scope='mmagic': mmagic's own class, not mmengine's
    adapter = MMEngineAdapter.from_config(default_scope="mmagic", log_processor=dict(type="LogProcessor"),
                                          default_hooks=dict(checkpoint=None), work_dir=str(tmp_path))  # fmt: skip
    assert type(adapter.runner.log_processor) is LogProcessor


class TotalLength(Hook):
    """Records ``runner.val_loop.total_length`` (None where the loop has none) after each validation batch."""

    def __init__(self) -> None:
        self.seen: list[int | None] = []

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.seen.append(getattr(runner.val_loop, "total_length", None))


@pytest.mark.parametrize(("val_cfg", "expected"), [(dict(type="MultiValLoop"), 3), (dict(), None)])
def test_mmengine_mmagic_multi_val_loop_total_length_feeds_mmagics_iter_timer_hook(tmp_path, val_cfg, expected):
    # mmagic's configs validate with MultiValLoop, whose total_length (the batches of all its dataloaders) mmagic's
    # IterTimerHook reads after each validation batch; MMEngine's ValLoop has none (the hook then needs MultiValLoop)
    import lightning.pytorch as pl
    from mmengine.config import Config
    from mmengine_testkit import LitToy, loaders, make_model

    from lightning_hooks.families.mmengine import build_hooks

    probe = TotalLength()
    timer = dict(type="IterTimerHook", _scope_="mmagic") if expected else dict(type="IterTimerHook")
    adapter = MMEngineAdapter(build_hooks(default_hooks=dict(checkpoint=None, timer=timer), custom_hooks=[probe]),
                              work_dir=tmp_path, log_processor=dict(window_size=1),
                              cfg=Config(dict(val_cfg=val_cfg)))  # fmt: skip
    train, _ = loaders()
    val = DataLoader(Points(10, 2), batch_size=4)
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)  # fmt: skip
    trainer.fit(LitToy(make_model()), train, val)
    assert probe.seen == [expected] * 3
    assert "eta" in adapter.runner.message_hub.runtime_info
