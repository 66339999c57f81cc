"""tests/ mirrors the package: each module ``lightning_hooks/a/b.py`` has ``tests/a/test_b.py`` (or
``tests/a/test_b_*.py``), or is listed in :data:`TESTED_WITH` with the test files that exercise it and why there.

A module listed here works only through its family's public classes (an event table, a facade's part, a message
the train command prints), so its tests are where that behaviour is compared with the host. A new module gets its
mirror file or an entry; an entry whose module gained a mirror file, or names a test file that is gone, fails.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module (relative to lightning_hooks/) -> (the test files that exercise it, relative to tests/; why they are there)
TESTED_WITH: dict[str, tuple[tuple[str, ...], str]] = {
    "__main__.py": (("test_cli.py",), "`python -m lightning_hooks` runs the CLI"),
    "config_schema.py": (("test_config.py", "test_config_examples.py"), "the config layer validates against it"),
    "compat/classy.py": (("families/classy/test_compat.py",), "a family's import shim is tested with its family"),
    "compat/imix.py": (("families/imix/test_compat.py",), "a family's import shim is tested with its family"),
    "core/console.py": (("test_console.py",), "the console routing of every train command"),
    "core/demo.py": (("test_demo.py",), "the README's demo command"),
    "core/errors.py": (("core/test_unknown_names.py", "core/test_checkpoint_files.py", "test_cli_build_errors.py"),
                       "the error classes, where each kind of error is raised"),
    "core/events.py": (("test_lifecycle.py", "core/test_dispatch.py", "families/test_registry.py"),
                       "the event tables: docs/lifecycle.md is generated and checked from them"),
    "core/family.py": (("families/test_registry.py", "test_train.py"), "the family registry and the train command"),
    "core/manual_step.py": (("families/mmcv/test_loop.py", "families/imix/test_optimizer.py"),
                            "the optimizer-hook families (mmcv 1.x, iMIX) step through it"),
    "families/classy/adapter.py": (("families/classy/test_hooks.py", "families/classy/test_loop.py"), "Classy's adapter"),
    "families/classy/config.py": (("test_config.py",), "Classy hooks built from the config layer"),
    "families/classy/data.py": (("families/classy/test_train.py",), "the data of a whole Classy/VISSL config"),
    "families/classy/demo.py": (("test_demo.py",), "the demo's Classy hooks"),
    "families/classy/events.py": (("test_lifecycle.py", "families/classy/test_loop.py"), "Classy's event table"),
    "families/classy/logging.py": (("families/classy/test_train.py", "test_console.py"), "Classy's log lines"),
    "families/classy/module.py": (("families/classy/test_real_task.py", "families/classy/test_sharded.py"),
                                  "the LightningModule of a Classy task"),
    "families/classy/names.py": (("test_cli_build_errors.py", "families/classy/test_vissl_rerun.py"),
                                 "unknown Classy/VISSL names and VISSL's messages"),
    "families/classy/optimizer.py": (("families/classy/test_task.py",), "task.optimizer as Classy hooks read it"),
    "families/classy/resume.py": (("families/classy/test_train_resume.py", "families/classy/test_vissl_host.py"),
                                  "Classy and VISSL checkpoints resumed"),
    "families/classy/schedule.py": (("families/classy/test_vissl_trainer.py", "families/classy/test_task.py"),
                                    "Classy's and VISSL's param schedulers"),
    "families/classy/state.py": (("families/classy/test_hooks.py", "families/classy/test_vissl_host.py"),
                                 "the task state Classy's checkpoint hook writes"),
    "families/classy/vissl_task.py": (("families/classy/test_vissl_real.py", "families/classy/test_vissl_trainer.py"),
                                      "the task facade VISSL's hooks see"),
    "families/imix/demo.py": (("test_demo.py",), "the demo's iMIX hooks"),
    "families/imix/events.py": (("test_lifecycle.py", "families/imix/test_loop.py"), "iMIX's event table"),
    "families/mmcv/adapter.py": (("families/mmcv/test_loop.py", "families/mmcv/test_differential.py"), "mmcv's adapter"),
    "families/mmcv/distributed.py": (("families/mmcv/test_lightning_runner.py", "families/mmcv/test_train_ddp.py"),
                                     "mmcv 1.x in several processes"),
    "families/mmcv/events.py": (("test_lifecycle.py", "families/mmcv/test_loop.py"), "mmcv 1.x's event table"),
    "families/mmcv/lightning_logger.py": (("families/mmcv/test_loggers.py",), "the log buffer to Lightning's loggers"),
    "families/mmcv/module.py": (("families/mmcv/test_lightning_runner.py", "families/mmcv/test_train.py"),
                                "the LightningModule of a whole 1.x config"),
    "families/mmcv/names.py": (("test_cli_build_errors.py",), "unknown 1.x registry names"),
    "families/mmengine/adapter.py": (("families/mmengine/test_hooks.py", "families/mmengine/test_differential.py"),
                                     "MMEngine's adapter"),
    "families/mmengine/checkpoint.py": (("families/mmengine/test_resume_corpus.py", "test_train.py"),
                                        "checkpoints in MMEngine's layout"),
    "families/mmengine/current.py": (("families/mmengine/test_hooks.py", "families/mmengine/test_runtime_config.py"),
                                     "the run's current message hub, visualizer and logger"),
    "families/mmengine/demo.py": (("test_demo.py",), "the demo's MMEngine hooks"),
    "families/mmengine/ema.py": (("families/mmengine/test_reliability.py",), "EMAHook's swapped weights"),
    "families/mmengine/eval_loops.py": (("families/mmengine/test_downstream.py", "families/mmengine/test_mmagic.py"),
                                        "ValLoop/TestLoop and mmagic's multi-evaluator loops"),
    "families/mmengine/events.py": (("test_lifecycle.py", "families/mmengine/test_host_loop.py"), "MMEngine's table"),
    "families/mmengine/hook_checks.py": (("families/mmengine/test_downstream.py",), "hooks that test the Runner's types"),
    "families/mmengine/names.py": (("test_cli_build_errors.py",), "unknown MMEngine registry names"),
    "families/mmengine/runner_setup.py": (("families/mmengine/test_resume_corpus.py", "families/mmengine/test_train.py"),
                                          "the work-dir files compared with the Runner's"),
    "families/mmengine/schedulers.py": (("families/mmengine/test_hooks.py",), "ParamSchedulerHook's schedulers"),
    "families/mmengine/trainer_checks.py": (("families/mmengine/test_differential.py", "families/mmengine/test_iter_based.py"),
                                            "Trainer settings the Runner's loop cannot follow"),
    "families/mmengine/vis_backend.py": (("families/mmengine/test_loggers.py",), "the visualizer's Lightning backend"),
    "lightning_cli.py": (("test_cli.py", "test_config_examples.py"), "LightningCLI"),
}


def unmirrored() -> set[str]:
    """The package modules with no mirror test file."""
    found = set()
    for path in (ROOT / "lightning_hooks").rglob("*.py"):
        relative = path.relative_to(ROOT / "lightning_hooks")
        if path.name == "__init__.py" or "__pycache__" in relative.parts:
            continue
        folder = ROOT / "tests" / relative.parent
        if not (folder / f"test_{path.name}").is_file() and not list(folder.glob(f"test_{relative.stem}_*.py")):
            found.add(relative.as_posix())
    return found


def test_every_module_has_its_mirror_test_file_or_says_where_it_is_tested():
    missing = sorted(unmirrored() - TESTED_WITH.keys())
    assert not missing, f"modules with no tests/<same path>/test_<name>.py and no TESTED_WITH entry: {missing}"


def test_no_entry_is_stale():
    mirrored = sorted(TESTED_WITH.keys() - unmirrored())
    assert not mirrored, f"TESTED_WITH entries for modules that have their mirror file now (or are gone): {mirrored}"
    gone = sorted(f"{module}: tests/{name}" for module, (files, _) in TESTED_WITH.items() for name in files
                  if not (ROOT / "tests" / name).is_file())
    assert not gone, f"TESTED_WITH names test files that do not exist: {gone}"
