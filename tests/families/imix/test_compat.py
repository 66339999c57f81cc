"""Levels, the compat registry and build_hook, the import alias, the Autograd hooks and facade errors."""

from __future__ import annotations

import json
import subprocess
import sys
import weakref
from pathlib import Path

import imix.engine.hooks as real
import pytest
import torch

from lightning_hooks import IMIXAdapter
from lightning_hooks.compat import imix as compat


class Named(real.HookBase):
    def __init__(self, name):
        super().__init__()
        self.name = name


def names(adapter):
    return [getattr(h, "name", type(h).__name__) for h in adapter.hooks]


def test_levels_order_hooks_after_the_last_hook_of_lower_or_equal_level():
    hooks = [Named("a"), real.OptimizerHook(), Named("b"), real.IterationTimerHook()]
    custom = compat.build_custom_hooks(
        [
            dict(type=Named, name="low", level="LOW"),
            dict(type=Named, name="first", level=real.PriorityStatus.HIGHEST),  # crashes imix's add_custom_hooks
            dict(type=Named, name="high", level="high"),
            dict(type=Named, name="normal", level=30),
        ]
    )
    adapter = IMIXAdapter(hooks + custom)
    assert names(adapter) == ["first", "OptimizerHook", "high", "a", "b", "IterationTimerHook", "normal", "low"]
    assert custom[1].level is real.PriorityStatus.HIGHEST  # the hook keeps imix's own enum


def test_imix_level_setter_crashes_on_upper_case_names_upstream_but_not_in_compat():
    with pytest.raises(ValueError, match="'HIGH' is not a valid PriorityStatus"):
        Named("x").level = "HIGH"  # imix 0.1.0 bug: isinstance() tests the list of names, not the value
    hook = compat.HookBase()
    hook.level = "HIGH"
    assert hook.level is compat.PriorityStatus.HIGH
    with pytest.raises(ValueError, match="unknown iMIX level 'SOON'"):
        hook.level = "SOON"


def test_build_hook_uses_the_compat_registry_then_imix_registry():
    assert isinstance(compat.build_hook(dict(type="AutogradAnomalyDetectHook")), compat.AutogradAnomalyDetectHook)
    timer = compat.build_hook(dict(type="IterationTimerHook"), default_args=dict(warmup_iter=3))
    assert type(timer) is real.IterationTimerHook and timer._warmup_iter == 3
    assert {"AutogradAnomalyDetectHook", "AutogradProfilerHook"} <= compat.HOOKS.module_dict.keys()
    with pytest.raises(KeyError, match="unknown iMIX hook type 'NoSuchHook'.*Registered: .*IterationTimerHook"):
        compat.build_hook(dict(type="NoSuchHook"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'\n.*while building iMIX hook IterationTimerHook"):
        compat.build_hook(dict(type="IterationTimerHook", bogus=1))


def test_import_alias_never_shadows_an_installed_imix():
    assert compat.install_import_alias() is False
    assert sys.modules["imix.engine.hooks"] is real


HOOK_FILE = """
from imix.engine.hooks import HOOKS, HookBase, PriorityStatus, build_hook


@HOOKS.register_module()
class CountHook(HookBase):
    def __init__(self):
        super().__init__()
        self.level = PriorityStatus.HIGH
        self.iters = []

    def after_train_iter(self):
        self.iters.append(self.trainer.iter)
"""

ALIAS_SCRIPT = """
import importlib.machinery, sys

class Hide(importlib.machinery.PathFinder):  # imix is installed here: hide it from every import
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.split(".")[0] == "imix" else super().find_spec(name, path, target)

sys.meta_path = [Hide if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
try:
    import imix
    raise SystemExit("imix still importable")
except ModuleNotFoundError:
    pass

from lightning_hooks.compat.imix import install_import_alias
assert install_import_alias() and install_import_alias()
import lightning as L, torch
from torch.utils.data import DataLoader, TensorDataset
from lightning_hooks import IMIXAdapter, adapt
import count_hook
from imix.engine.hooks import build_hook

class M(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(2, 1)
    def training_step(self, batch, batch_idx):
        return self.net(batch[0]).pow(2).mean()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

hook = build_hook(dict(type="CountHook"))
[adapter] = adapt([hook])
assert isinstance(adapter, IMIXAdapter)
L.Trainer(max_epochs=1, callbacks=[adapter], logger=False, enable_progress_bar=False, enable_model_summary=False,
          enable_checkpointing=False).fit(M(), DataLoader(TensorDataset(torch.randn(6, 2)), batch_size=2))
print("ITERS", hook.iters, "imix" in sys.modules and sys.modules["imix.engine.hooks"].__name__)
"""


def test_import_alias_runs_an_imix_hook_file_without_imix(tmp_path):
    (tmp_path / "count_hook.py").write_text(HOOK_FILE)
    root = Path(__file__).resolve().parents[3]
    env_path = f"{tmp_path}:{root}"
    result = subprocess.run(
        [sys.executable, "-c", ALIAS_SCRIPT], capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ITERS [0, 1, 2] lightning_hooks.compat.imix" in result.stdout


def test_autograd_anomaly_detect_hook_turns_detection_on_for_training(module, loader, make_trainer):
    seen = []

    def training_step(batch, batch_idx):
        seen.append(torch.is_anomaly_enabled())
        x, y = batch
        out = module.net(x)
        return (out - out.detach() - 1).sqrt().nan_to_num().sum()  # NaN gradient in SqrtBackward0

    module.training_step = training_step
    make_trainer([IMIXAdapter([real.OptimizerHook()])], max_epochs=1).fit(module, loader)  # NaN passes silently
    assert seen and not any(seen)
    hook = compat.AutogradAnomalyDetectHook()
    with pytest.raises(RuntimeError, match="SqrtBackward0' returned nan values"):
        make_trainer([IMIXAdapter([real.OptimizerHook(), hook])], max_epochs=1).fit(module, loader)
    assert seen[-1] is True
    assert not torch.is_anomaly_enabled()  # restored by after_train, which iMIX runs on failure too


def test_autograd_profiler_hook_traces_the_chosen_iterations(module, loader, make_trainer, tmp_path):
    hook = compat.AutogradProfilerHook(lambda trainer: trainer.iter in (2, 7), output_dir=tmp_path / "traces")
    make_trainer([IMIXAdapter([real.OptimizerHook(), hook])]).fit(module, loader)
    traces = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert traces == ["profiler-trace-iter2.json", "profiler-trace-iter7.json"]
    events = {e.get("name") for e in json.loads((tmp_path / "traces" / traces[0]).read_text())["traceEvents"]}
    assert "aten::addmm" in events  # the forward
    assert any("AddmmBackward0" in str(name) for name in events)  # OptimizerHook's backward (a higher level)


def test_facade_is_a_weak_proxy_and_names_missing_attributes(module, loader, make_trainer):
    hook = Named("x")
    adapter = IMIXAdapter([hook])
    assert isinstance(hook.trainer, weakref.ProxyType)
    with pytest.raises(AttributeError, match="no attribute 'scheduler'.*It provides: .*log_buffer"):
        hook.trainer.scheduler
    with pytest.raises(AttributeError, match="'cfg' is not available because IMIXAdapter got no cfg"):
        hook.trainer.cfg
    with pytest.raises(AttributeError, match="'log_buffer' is not available before training starts"):
        hook.trainer.log_buffer
    adapter = IMIXAdapter([real.PeriodicLogger([], 1)])
    with pytest.raises(AttributeError, match="got no cfg") as err:
        make_trainer([adapter]).fit(module, loader)
    assert any("PeriodicLogger in mount point 'before_train'" in note for note in err.value.__notes__)


class Epochs(real.HookBase):
    def __init__(self):
        super().__init__()
        self.seen = []

    def before_train(self):
        self.seen.append(("max_epoch", self.trainer.max_epoch))

    def after_train(self):
        self.seen.append(("epoch", self.trainer.epoch))


class Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        while True:
            yield torch.randn(4, generator=g), torch.randn(1, generator=g)


def test_by_epoch_needs_a_sized_dataloader(module, make_trainer):
    loader = torch.utils.data.DataLoader(Stream(), batch_size=2)
    hook = Epochs()
    with pytest.raises(ValueError) as err:
        make_trainer([IMIXAdapter([real.OptimizerHook(), hook])], max_steps=4).fit(module, loader)
    assert str(err.value) == (
        "IMIXAdapter: by_epoch=True needs a sized train dataloader (iMIX's epoch-based hooks and log buffer read "
        "len(data_loader)); this one has no length. Use IMIXAdapter(by_epoch=False)."
    )
    assert hook.seen == []  # refused before before_train
    trainer = make_trainer([IMIXAdapter([real.OptimizerHook()], by_epoch=False)], max_steps=4)
    trainer.fit(module, loader)
    assert trainer.global_step == 4


class Settings(real.HookBase):
    def before_train(self):
        self.seen = (self.trainer.by_epoch, self.trainer.gradient_accumulation_steps, self.trainer.is_lr_accumulation)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # iMIX's Organizer: by_epoch = not hasattr(cfg, 'by_iter'), cfg.get('gradient_accumulation_steps', 1),
        # cfg.get('is_lr_accumulation', True)
        (dict(), (True, 1, True)),
        (dict(cfg=dict(by_iter=True, gradient_accumulation_steps=2, is_lr_accumulation=False)), (False, 2, False)),
        (dict(gradient_accumulation_steps=2, cfg=dict(gradient_accumulation_steps=2)), (True, 2, True)),
        (dict(by_epoch=False, is_lr_accumulation=False, cfg=dict(by_iter=True)), (False, 1, False)),
    ],
)
def test_settings_come_from_the_keyword_else_the_cfg_else_imix_defaults(module, loader, make_trainer, options,
                                                                       expected):
    hook = Settings()
    trainer = make_trainer([IMIXAdapter([real.OptimizerHook(), hook], **options)], max_epochs=1)
    trainer.fit(module, loader)
    assert hook.seen == expected
    assert trainer.global_step == 6 // expected[1]  # OptimizerHook accumulates as the settings say


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(gradient_accumulation_steps=2, cfg=dict(gradient_accumulation_steps=4)),
         ("IMIXAdapter(gradient_accumulation_steps=2) disagrees with its cfg, which sets gradient_accumulation_steps=4."
          " Set it in one place (the keyword or the cfg) or to the same value in both.")),
        (dict(is_lr_accumulation=False, cfg=dict(is_lr_accumulation=True)),
         "IMIXAdapter(is_lr_accumulation=False) disagrees with its cfg, which sets is_lr_accumulation=True."),
        (dict(by_epoch=True, cfg=dict(by_iter=False)),
         ("IMIXAdapter(by_epoch=True) disagrees with its cfg, which has a by_iter key (iMIX then trains by iteration, "
          "whatever its value).")),
    ],
)  # fmt: skip
def test_a_keyword_and_a_cfg_key_that_disagree_are_an_error(options, message):
    with pytest.raises(ValueError) as err:
        IMIXAdapter([real.OptimizerHook()], **options)
    assert str(err.value).startswith(message)


def test_training_step_must_return_a_loss(module, loader, make_trainer):
    module.training_step = lambda batch, batch_idx: {"acc": 1.0}
    with pytest.raises(TypeError, match="training_step must return the loss tensor"):
        make_trainer([IMIXAdapter([real.OptimizerHook()])]).fit(module, loader)


def test_counters_a_hook_sets_are_the_loops():
    """iMIX's ``iter`` and ``inner_iter`` are plain attributes a hook may set: the engine loop counts on from them."""
    hook = Named("x")
    adapter = IMIXAdapter([hook])
    hook.trainer.iter, hook.trainer.inner_iter = 7, 3
    assert (adapter.loop.iter, adapter.loop.inner_iter) == (7, 3)
    assert (hook.trainer.iter, hook.trainer.inner_iter) == (7, 3)
