"""The ``lightning-hooks`` console script: subcommands, usage errors, and LightningCLI's model/data defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel
from torch import nn

from lightning_hooks.cli import LightningHooksCLI, main
from lightning_hooks.demo import DemoNet, SyntheticData

ROOT = Path(__file__).parents[2]
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
