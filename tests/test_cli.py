"""The ``lightning-hooks`` console script: subcommands, usage errors, and LightningCLI's model/data defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel
from torch import nn

from lightning_hooks.cli import main
from lightning_hooks.demo import DemoNet, SyntheticData
from lightning_hooks.lightning_cli import LightningHooksCLI
from lh_testing import subprocess_env

ROOT = Path(__file__).parents[1]
QUIET = ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false", "--trainer.logger=false"]


@pytest.mark.parametrize("name", ["mmengine", "classy", "imix", "mixed"])
def test_cli_test_runs_every_shipped_config(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = str(ROOT / "configs" / f"{name}.yaml")
    cli = LightningHooksCLI(["test", "--config", config, "--trainer.limit_test_batches=2", *QUIET])
    model, batches = cli.model.eval(), list(cli.datamodule.test_dataloader())[:2]
    with torch.no_grad():  # plain torch: mean of the per-batch losses Lightning logs (equal batch sizes)
        expected = sum(nn.functional.cross_entropy(model(b["input"]), b["target"]) for b in batches) / 2
    assert cli.trainer.callback_metrics["test_loss"] == pytest.approx(float(expected), rel=1e-5)


def test_cli_model_and_data_default_to_the_demo(tmp_path):
    cli = LightningHooksCLI(
        ["validate", "--trainer.limit_val_batches=1", f"--trainer.default_root_dir={tmp_path}", *QUIET]
    )
    assert type(cli.model) is DemoNet and type(cli.datamodule) is SyntheticData


def test_cli_takes_any_lightning_module(tmp_path):
    args = ["fit", "--model", "lightning.pytorch.demos.boring_classes.BoringModel", "--trainer.max_steps=2",
            "--trainer.limit_val_batches=1", f"--trainer.default_root_dir={tmp_path}", *QUIET]  # fmt: skip
    cli = LightningHooksCLI(args)
    assert type(cli.model) is BoringModel and cli.datamodule is None and cli.trainer.global_step == 2


def test_no_command_prints_usage_and_exits_2(capsys):
    with pytest.raises(SystemExit) as exit:
        main([])
    assert exit.value.code == 2 and capsys.readouterr().err.startswith("usage: lightning-hooks")


def test_lifecycle_help_prints_help_not_the_table(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["lifecycle", "--help"])
    out = capsys.readouterr().out
    assert exit.value.code == 0 and out.startswith("usage: lightning-hooks lifecycle") and "|" not in out


#: a config of each kind ``lightning-hooks train`` tells apart, for its usage errors
CONFIGS = {"mmengine.py": "train_cfg = dict(by_epoch=True, max_epochs=1)\n",
           "classy.json": '{"name": "classification_task", "num_epochs": 1}'}  # fmt: skip  # one config a line


@pytest.mark.parametrize(
    "args,status,usage,imported",
    [(["--help"], 0, "usage: lightning-hooks {", []), (["train", "--help"], 0, "usage: lightning-hooks train CONFIG", []),
     (["train", "--no-such-option"], 2, "usage: lightning-hooks train CONFIG", []),
     (["trian"], 2, "usage: lightning-hooks {", []),
     # a config's own parser: its usage errors and --help come before Lightning (MMEngine's imports no torch either;
     # Classy's is classy_vision's, which imports torch)
     (["train", "mmengine.py", "--no-such-option"], 2, "usage: lightning-hooks train", []),
     (["train", "mmengine.py", "--help"], 0, "usage: lightning-hooks train", []),
     (["train", "classy.json", "--no-such-option"], 2, "usage: lightning-hooks train", ["torch"]),
     (["train", "config=test/integration_test/quick_swav", "--no-such-option"], 2,
      "usage: lightning-hooks train config=", [])],
)  # fmt: skip  # one case a line
def test_help_and_usage_errors_import_neither_torch_nor_lightning(args, status, usage, imported, tmp_path):
    # the family registry behind ``train``'s usage names each family's adapter, which imports Lightning, lazily
    code = ("import atexit, sys; atexit.register(lambda: print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'lightning', 'pytorch_lightning', 'jsonargparse'}))); "
            "from lightning_hooks.cli import main; main(sys.argv[1:])")  # fmt: skip  # the child's code, wrapped
    for name, text in CONFIGS.items():
        (tmp_path / name).write_text(text)
    args = [str(tmp_path / arg) if arg in CONFIGS else arg for arg in args]
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == status, result.stderr
    assert (result.stdout if status == 0 else result.stderr).startswith(usage)
    assert result.stdout.strip().endswith(str(imported)), result.stdout[-300:]


@pytest.mark.parametrize(
    "config,args,expected",
    [
        ("trainer:\n  callbacks:\n    - class_path: lightning_hooks.MMEngineAdapter\n      init_args: {workdir: w}\n", [],
         "trainer.callbacks: lightning_hooks.MMEngineAdapter: Option 'workdir' is not accepted. Did you mean 'work_dir'?"),
        ("trainer:\n  max_epcohs: 1\n", [], "does not accept option 'trainer.max_epcohs'. Did you mean 'trainer.max_epochs'?"),
        (None, ["--trainer.max_epcohs", "2"], "unrecognized arguments: --trainer.max_epcohs 2. Did you mean 'trainer.max_epochs'?"),
    ],
)  # fmt: skip
def test_cli_errors_are_short_and_suggest_the_option_meant(config, args, expected, tmp_path, capsys):
    if config is not None:
        (tmp_path / "bad.yaml").write_text(config)
        args = ["--config", str(tmp_path / "bad.yaml")]
    with pytest.raises(SystemExit) as exit:
        main(["fit", *args])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and expected in err
    assert err.splitlines() == [f"lightning-hooks fit: error: {err.split(': error: ')[1].splitlines()[0]}",
                                "(all options: lightning-hooks fit --help)"]  # fmt: skip


@pytest.mark.parametrize(
    "name,line",
    [("classy", "INFO:root:Starting training. Task:"),  # Classy's LossLrMeterLoggingHook
     ("imix", "imix.engine.hooks.text_logger_hook]: before_train:")],  # iMIX's TextLoggerHook
)  # fmt: skip
def test_cli_shows_the_legacy_loggers_lines_as_their_hosts_did(name, line, tmp_path):
    args = ["fit", "--config", str(ROOT / "configs" / f"{name}.yaml"), "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=8", "--trainer.limit_val_batches=2"]  # fmt: skip
    env = subprocess_env()
    result = subprocess.run([sys.executable, "-m", "lightning_hooks", *args], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert line in result.stdout + result.stderr
    assert "warn" not in (result.stdout + result.stderr).lower()
