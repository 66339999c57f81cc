"""core/models.py: the legacy model inside a LightningModule, found once for every family."""

from __future__ import annotations

import pytest
import torch

from lightning_hooks.core.models import find_model, submodule


class Legacy(torch.nn.Linear):
    def __init__(self):
        super().__init__(1, 1)


def is_legacy(module):
    return isinstance(module, Legacy)


def test_find_model_is_the_root_itself_the_outermost_match_or_none():
    assert find_model(Legacy(), is_legacy, adapter="A", what="w") == ""
    holder = torch.nn.Module()
    holder.wrapper = torch.nn.Module()
    holder.wrapper.net = Legacy()
    assert find_model(holder, is_legacy, adapter="A", what="w") == "wrapper.net"
    assert find_model(torch.nn.Module(), is_legacy, adapter="A", what="w") is None


def test_find_model_ignores_matches_nested_in_a_match():
    outer = torch.nn.Module()
    outer.model = torch.nn.Sequential(Legacy())
    outer.model.__class__ = type("LegacySeq", (torch.nn.Sequential,), {})
    assert find_model(outer, lambda m: type(m).__name__ in ("LegacySeq", "Legacy"), adapter="A", what="w") == "model"


def test_find_model_refuses_two_outermost_models_naming_the_option():
    holder = torch.nn.Module()
    holder.student, holder.teacher = Legacy(), Legacy()
    with pytest.raises(ValueError, match=r"several legacy models \('student', 'teacher'\).*A\(\.\.\., model='student'\)"):
        find_model(holder, is_legacy, adapter="A", what="legacy models")


def test_submodule_names_the_option_when_the_path_is_missing():
    holder = torch.nn.Module()
    holder.net = Legacy()
    assert submodule(holder, "net", adapter="A") is holder.net
    assert submodule(holder, "", adapter="A") is holder
    with pytest.raises(AttributeError, match=r"A\(model='nett'\): Module has no submodule 'nett'"):
        submodule(holder, "nett", adapter="A")
