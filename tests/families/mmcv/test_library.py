"""``families/mmcv/library.py``: each OpenMMLab 1.x library's data is the installed library's and its shipped
``tools/train.py``'s. Every function path resolves in the real package (mmdet's and mmseg's with mmcv's compiled ops
stubbed while they import), the signatures take what :mod:`~lightning_hooks.families.mmcv.tools_train` passes, and
each difference between the scripts is read off the script the library ships (``.mim/tools/train.py``)."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest
from mmcv_testkit import import_with_stubbed_ops  # skips outside .venv-mmcv1

from lightning_hooks.core.errors import ConfigError
from lightning_hooks.families.mmcv.library import LIBRARIES, Library, library_of

FUNCTIONS = ("builder", "datasets", "root_logger", "collect_env", "init_seed", "set_seed", "setup_processes", "train")
#: a model type of each library's own registry
MODEL_TYPES = {"mmcls": "ImageClassifier", "mmdet": "RetinaNet", "mmseg": "EncoderDecoder"}


@pytest.fixture(params=LIBRARIES, ids=lambda library: library.package)
def library(request) -> Library:
    """One library, skipped where not installed, its modules imported (with the compiled ops stubbed)."""
    library = request.param
    pytest.importorskip(library.package)
    import_with_stubbed_ops(*{getattr(library, name).partition(":")[0] for name in ("models", *FUNCTIONS)})
    return library


def script(library: Library) -> str:
    """The library's shipped ``tools/train.py``, as text."""
    spec = importlib.util.find_spec(library.package)
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / ".mim" / "tools" / "train.py").read_text()


def test_every_function_resolves_in_the_installed_package(library):
    for name in FUNCTIONS:
        function = library.function(getattr(library, name))
        assert callable(function), name
        assert function.__module__.split(".")[0] == library.package, (name, function.__module__)
    assert library.function(library.train).__name__ == library.train.partition(":")[2]
    assert library.function(library.models).name == "models"
    module = library.train_module
    assert module.__name__ == library.train.partition(":")[0]
    assert callable(module.build_runner) and callable(getattr(module, library.ddp))


def test_the_signatures_take_what_the_run_passes(library):
    train = inspect.signature(library.function(library.train)).parameters
    assert {"distributed", "validate", "timestamp", "meta"} <= train.keys()
    assert ("device" in train) == library.train_takes_device
    builder = inspect.signature(library.function(library.builder)).parameters
    assert set(library.builder_cfgs) == {"train_cfg", "test_cfg"} & builder.keys()
    assert "device" in inspect.signature(library.function(library.init_seed)).parameters
    assert "deterministic" in inspect.signature(library.function(library.set_seed)).parameters
    assert {"log_file", "log_level"} <= inspect.signature(library.function(library.root_logger)).parameters.keys()


def test_the_training_api_finds_the_latest_checkpoint_where_the_library_says(library):
    source = inspect.getsource(library.train_module)
    assert ("find_latest_checkpoint(cfg.work_dir)" in source) == library.finds_latest_checkpoint


def test_the_differences_are_those_of_the_shipped_tools_train_py(library):
    text = script(library)
    main = text[text.index("def main("):]
    if library.auto_resume:
        flag, gpu_ids = main.index("cfg.auto_resume = args.auto_resume"), main.index("cfg.gpu_ids = [args.gpu_id]")
        assert library.auto_resume == ("before" if flag < gpu_ids else "after")
    else:
        assert "--auto-resume" not in text
    assert ("meta['config'] = cfg.pretty_text" in main) == ("config" in library.meta)
    assert ("meta['exp_name']" in main) == ("exp_name" in library.meta)
    assert ("revert_sync_batchnorm(model)" in main) == library.revert_sync_batchnorm
    assert ("logger.info(model)" in main) == library.log_model
    # what tools_train.setup_env does first, or after the logger (mmseg's script: what it logs is in the run's log)
    assert "setup_multi_processes(cfg)" in main and "setup_multi_processes" in library.setup_processes
    after_logger = main.index("setup_multi_processes(cfg)") > main.index("get_root_logger(log_file=log_file")
    assert after_logger == library.setup_after_logger
    assert main.index("logger.info(f'Config:") < main.index("cfg.device = ")  # tools_train._prepare's order
    assert "if cfg.get('cudnn_benchmark', False):\n        torch.backends.cudnn.benchmark = True" in main
    assert {name for name in ("CLASSES", "PALETTE") if f"model.{name} = datasets[0].{name}" in main} == set(
        library.model_attributes)
    record = main[main.rindex(f"{library.package}_version="):]
    record = record[: record.index(")\n")]  # the record's dict(...)
    keys = ["version" if key.strip().startswith(f"{library.package}_version") else key.split("=")[0].strip()
            for key in record.replace("\n", " ").split(",") if "=" in key]  # fmt: skip  # the loop under its value
    assert keys == list(library.record)
    separators = {"__version__ + get_git_hash()": "", "f'{__version__}+{get_git_hash()": "+"}
    found = [separator for form, separator in separators.items() if form in record]
    assert found == ([] if library.version_separator is None else [library.version_separator])
    in_checkpoints = "cfg.checkpoint_config.meta = dict(" in main
    in_meta = "meta.update(" in main
    assert tuple(where for where, found in (("checkpoint_config", in_checkpoints), ("meta", in_meta)) if found) == (
        library.record_in)


def test_a_model_type_names_its_library(library):
    from mmcv import Config

    cfg = Config(dict(model=dict(type=MODEL_TYPES[library.package])))
    assert library_of(cfg) is library
    assert library.owns(MODEL_TYPES[library.package])
    assert not library.owns("NoSuchModel")


def test_a_model_type_no_library_knows_is_an_error_naming_the_libraries():
    from mmcv import Config

    with pytest.raises(ConfigError, match=r"model.type: 'NoSuchModel' is in the model registry of none of the "
                                          r"installed OpenMMLab 1.x libraries .*custom_imports"):  # fmt: skip
        library_of(Config(dict(model=dict(type="NoSuchModel"))))


def test_a_library_with_an_unknown_difference_is_refused():
    with pytest.raises(ValueError, match="auto_resume must be"):
        Library("x", "", "", "", "", "", "", "", "", "", auto_resume="sometimes")
    with pytest.raises(ValueError, match="record_in takes"):
        Library("x", "", "", "", "", "", "", "", "", "", record_in=("elsewhere",))
