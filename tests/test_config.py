"""build_callbacks: each family's own config format, interpolation, allow-listed targets, errors naming the path."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import classy_vision.hooks as classy_hooks
import imix.engine.hooks as imix_hooks
import mmengine.hooks as mm_hooks
import pytest
from lightning.pytorch.callbacks import LearningRateMonitor
from mmengine.runner import Runner
from omegaconf import OmegaConf

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter, build_callbacks
from lightning_hooks.callbacks import EMA
from lightning_hooks.config import ConfigError

CONFIG = """
mmengine:
  work_dir: {work_dir}
  default_hooks: {{logger: null, checkpoint: {{type: CheckpointHook, interval: 2}}}}
  custom_hooks: [{{type: EMAHook, priority: 40}}, {{type: EmptyCacheHook}}]
classy:
  - {{name: loss_lr_meter_logging, log_freq: 4}}
  - {{name: checkpoint, checkpoint_folder: "${{mmengine.work_dir}}", input_args: {{}}}}
  - {{name: ema_model_weights, decay: 0.9, device: cpu}}
imix:
  by_epoch: false
  custom_hooks: [{{type: IterationTimerHook, level: LOW}}, {{type: TextLoggerHook, level: HIGHEST}}]
callbacks:
  - {{_target_: lightning_hooks.callbacks.EMA, decay: 0.5}}
  - {{_target_: lightning.pytorch.callbacks.LearningRateMonitor, logging_interval: step}}
"""


def test_sections_build_as_their_own_frameworks_would(tmp_path):
    path = tmp_path / "hooks.yaml"
    path.write_text(CONFIG.format(work_dir=tmp_path))
    config = OmegaConf.load(path)
    for cfg in (path, config, OmegaConf.to_container(config)):  # interpolations resolve in each form
        mm, classy, imix, ema, lr = build_callbacks(cfg)
        runner = types.SimpleNamespace(_hooks=[])  # MMEngine's own merge with its defaults and priority queue
        for name in ("register_default_hooks", "register_custom_hooks", "register_hook"):
            setattr(runner, name, types.MethodType(getattr(Runner, name), runner))
        Runner.register_hooks(runner, dict(logger=None, checkpoint=dict(type="CheckpointHook", interval=2)),
                              [dict(type="EMAHook", priority=40), dict(type="EmptyCacheHook")])  # fmt: skip
        assert isinstance(mm, MMEngineAdapter) and mm.runner.work_dir == str(tmp_path)
        assert [type(h) for h in mm.hooks] == [type(h) for h in runner._hooks]
        assert [h.interval for h in mm.hooks if isinstance(h, mm_hooks.CheckpointHook)] == [2]
        assert isinstance(classy, ClassyAdapter)
        assert [type(h) for h in classy.hooks] == [  # Classy's registry names; CheckpointHook last, as set_hooks does
            classy_hooks.LossLrMeterLoggingHook, classy_hooks.ExponentialMovingAverageModelHook,
            classy_hooks.CheckpointHook,
        ]  # fmt: skip
        assert classy.hooks[-1].checkpoint_folder == str(tmp_path)  # ${mmengine.work_dir} resolved
        assert isinstance(imix, IMIXAdapter) and imix.engine.by_epoch is False
        assert [type(h) for h in imix.hooks] == [imix_hooks.TextLoggerHook, imix_hooks.IterationTimerHook]
        assert isinstance(ema, EMA) and ema.decay == 0.5
        assert isinstance(lr, LearningRateMonitor) and lr.logging_interval == "step"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"mmengine": {"custom_hooks": [{"type": "EMAHook"}, {"type": "EMAHok"}]}},
         r"^mmengine\.custom_hooks\[1\]: .*'EMAHok'.*Did you mean 'EMAHook'"),
        ({"mmengine": {"default_hooks": {"timer": {"type": "IterTimer"}}}},
         r"^mmengine\.default_hooks\.timer: .*'IterTimer'.*IterTimerHook"),
        ({"mmengine": {"workdir": "x"}}, r"^mmengine\.workdir: unknown MMEngineAdapter option.*Did you mean: work_dir"),
        ({"classy": [{"name": "precise"}]}, r"^classy\[0\]: unknown Classy hook name 'precise'.*Did you mean: precise_bn"),
        ({"classy": [{"name": "precise_bn", "num_sample": 128}]},
         r"^classy\[0\]: unknown key 'num_sample' for Classy hook 'precise_bn' \(PreciseBatchNormHook\)\. Did you mean: "
         r"num_samples"),
        ({"classy": [{"name": "tensorboard_plot", "summary_writer": {}, "log_periods": 1}]},
         r"^classy\[0\]: unknown key 'log_periods' .*Did you mean: log_period"),  # from_config would drop it silently
        ({"imix": {"custom_hooks": [{"type": "IterationTimerHook", "level": "MEDIUM"}]}},
         r"^imix\.custom_hooks\[0\]: unknown iMIX level 'MEDIUM'"),
        ({"imix": {"custom_hooks": [{"type": "IterTimerHook"}]}}, r"^imix\.custom_hooks\[0\]: .*Did you mean: IterationTimerHook"),
        ({"callbacks": [{"_target_": "lightning_hooks.callbacks.EMA", "decai": 0.9}]},
         r"^callbacks\[0\]\.decai: unknown EMA option 'decai'\. Did you mean: decay"),
        ({"callbacks": [{"_target_": "lightning_hooks.callbacks.EMA", "decay": "high"}]}, r"(?s)^callbacks\[0\]: .*'high'.*decay"),
        ({"callbacks": [{"decay": 0.9}]}, r"^callbacks\[0\]: a callback entry needs a '_target_'"),
        ({"mmengin": {}}, r"^mmengin: unknown config section 'mmengin'\. Did you mean: mmengine"),
    ],
)  # fmt: skip
def test_errors_name_the_config_path_and_the_nearest_valid_names(config, message):
    with pytest.raises(ConfigError, match=message):
        build_callbacks(config)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"mmengine": [{"type": "EMAHook"}]}, r"^mmengine: expected a dict, got list"),
        ({"mmengine": {"custom_hooks": {"type": "EMAHook"}}}, r"^mmengine\.custom_hooks: expected a list, got dict .*Write e\.g\."),
        ({"mmengine": {"default_hooks": [{"type": "CheckpointHook"}]}}, r"^mmengine\.default_hooks: expected a dict, got list"),
        ({"classy": "precise_bn"}, r"^classy: expected a list or dict, got str"),
        ({"classy": {"hooks": {"name": "precise_bn"}}}, r"^classy\.hooks: expected a list, got dict"),
        ({"imix": [{"type": "IterationTimerHook"}]}, r"^imix: expected a dict, got list"),
        ({"imix": {"work_dir": "x"}}, r"^imix\.custom_hooks: missing; IMIXAdapter needs at least one hook"),
        ({"callbacks": {"_target_": "lightning_hooks.callbacks.EMA"}}, r"^callbacks: expected a list, got dict"),
    ],
)  # fmt: skip
def test_a_section_of_the_wrong_structure_names_its_path_and_what_to_write(config, message):
    with pytest.raises(ConfigError, match=message):
        build_callbacks(config)


def test_only_allow_listed_targets_are_imported_or_called(tmp_path):
    marker = tmp_path / "ran"
    evil = {"_target_": "pathlib.Path.touch", "self": str(marker)}
    with pytest.raises(ConfigError, match=r"^callbacks\[0\]\._target_: 'pathlib\.Path\.touch' is not an allowed target"):
        build_callbacks({"callbacks": [evil]})
    nested = {"_target_": "lightning_hooks.callbacks.PreciseBN", "forward_fn": evil}
    with pytest.raises(ConfigError, match=r"^callbacks\[0\]\.forward_fn\._target_: 'pathlib\.Path\.touch'"):
        build_callbacks({"callbacks": [nested]})
    assert not marker.exists()
    with pytest.raises(ConfigError, match=r"'pathlib\.Path' is not a Callback class"):  # allowed, but not called
        build_callbacks({"callbacks": [{"_target_": "pathlib.Path", "_args_": [str(marker)]}]}, allow_targets=["pathlib.*"])


@pytest.mark.parametrize(
    ("target", "args", "message"),
    [
        ("lightning_hooks.config.os.makedirs", ["{out}"], r"reaches module os through an attribute"),
        ("lightning.pytorch.callbacks.model_checkpoint.os.makedirs", ["{out}"], r"reaches module os through an attribute"),
        ("lightning_hooks.config.OmegaConf.save", [{"a": 1}, "{out}"], r"\(omegaconf\.omegaconf\.OmegaConf\.save\), which is not an allowed"),
    ],
)  # fmt: skip
def test_allowed_prefixes_do_not_reach_other_objects_and_nothing_is_called(target, args, message, tmp_path):
    out = tmp_path / "made"
    entry = {"_target_": target, "_args_": [a.format(out=out) if isinstance(a, str) else a for a in args]}
    nested = {"_target_": "lightning_hooks.callbacks.PreciseBN", "forward_fn": entry}
    for config in ({"callbacks": [entry]}, {"callbacks": [nested]}):
        with pytest.raises(ConfigError, match=rf"^callbacks\[0\](\.forward_fn)?\._target_: .*{message}"):
            build_callbacks(config)
        assert not out.exists()


@pytest.mark.parametrize("where", ["custom_hooks", "default_hooks"])
@pytest.mark.parametrize("kind", ["subprocess.Popen", "antigravity", "mmengine.hooks.hook.Hook.__init__"])
def test_mmengine_types_resolve_in_the_hook_registry_only(where, kind, tmp_path):
    marker = tmp_path / "ran"
    hook = {"type": kind, "args": ["touch", str(marker)]}
    section = {"custom_hooks": [hook]} if where == "custom_hooks" else {"default_hooks": {"checkpoint": hook}}
    with pytest.raises(ConfigError, match=rf"^mmengine\.{where}(\[0\]|\.checkpoint): build_hooks: hook type '{kind}' is not registered"):
        build_callbacks({"mmengine": section})
    assert not marker.exists() and "antigravity" not in sys.modules
    with pytest.raises(KeyError, match="is not registered"):
        MMEngineAdapter.from_config(custom_hooks=[hook])
    assert not marker.exists()


def test_a_yaml_file_that_does_not_parse_is_named(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("mmengine:\n  custom_hooks: [{type: EMAHook\n")
    with pytest.raises(ConfigError, match=rf"(?s)^{path} does not parse: .*line 2"):
        build_callbacks(path)


@pytest.mark.parametrize("name", ["mixed", "mmengine", "imix", "classy"])
def test_hook_configs_build_on_their_own_as_the_docstring_shows(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    callbacks = build_callbacks(Path(__file__).parents[1] / "configs" / "hydra" / "hooks" / f"{name}.yaml")
    mm = [c for c in callbacks if isinstance(c, MMEngineAdapter)]
    assert all(c.runner.work_dir == "work_dirs/hydra" for c in mm)  # train.yaml's work_dir, the default here


def test_an_interpolation_that_cannot_resolve_names_the_file(tmp_path):
    path = tmp_path / "hooks.yaml"
    path.write_text("mmengine:\n  work_dir: ${work_dir}\n")
    with pytest.raises(ConfigError, match=rf"(?s)^{path}: an interpolation cannot be resolved: .*'work_dir' not found"):
        build_callbacks(path)
