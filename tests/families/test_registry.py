"""A new hook family is one folder plus one registry line: adapt, build_callbacks and the lifecycle doc pick it up."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
from lh_testing import TinyModule, tiny_loader
from toy_family import FAMILY, Counter, ToyAdapter

from lightning_hooks import adapt, build_callbacks, families
from lightning_hooks.config import ConfigError
from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.family import Family, Later
from lightning_hooks.core.triggers import ON
from lightning_hooks.lifecycle import render


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setattr(families, "FAMILIES", [*families.FAMILIES, FAMILY])  # the one registry line


def test_adapt_groups_a_registered_familys_hooks(toy_registered):
    (adapter,) = adapt([Counter()], start=5)
    assert isinstance(adapter, ToyAdapter) and adapter.hooks[0].start == 5


def test_adapt_names_the_registered_families_for_an_unknown_hook(toy_registered):
    with pytest.raises(TypeError, match=r"toy: tests\.core\.toy_family\.ToyHook"):
        adapt([object()])


def test_build_callbacks_builds_the_familys_section(toy_registered):
    (adapter,) = build_callbacks({"toy": {"hooks": [{"kind": "counter"}], "start": 2}})
    assert isinstance(adapter, ToyAdapter) and adapter.hooks[0].start == 2
    with pytest.raises(ConfigError, match=r"^toy\.hooks\[0\]: unknown toy hook kind"):
        build_callbacks({"toy": {"hooks": [{"kind": "other"}]}})
    with pytest.raises(ConfigError, match=r"^toy\.begin: unknown ToyAdapter option 'begin'.*Accepted: start"):
        build_callbacks({"toy": {"hooks": [{"kind": "counter"}], "begin": 1}})


def test_a_section_is_unknown_until_the_family_is_registered():
    with pytest.raises(ConfigError, match=r"^toy: unknown config section 'toy'"):
        build_callbacks({"toy": {"hooks": []}})


def test_lifecycle_doc_lists_the_familys_table(toy_registered):
    assert "## ToyAdapter (toy)\n\n| trigger | legacy mount point |" in render()


def test_the_familys_hooks_run_under_lightning(toy_registered, trainer_kwargs):
    counter = Counter()
    pl.Trainer(max_epochs=2, max_steps=7, callbacks=adapt([counter]), **trainer_kwargs).fit(TinyModule(), tiny_loader())
    # the shared train-epoch end: at the last batch of epoch 0, at on_train_epoch_end for epoch 1 (cut at step 7)
    assert [s for s in counter.seen if s[0] == "epoch_done"] == [("epoch_done", 4), ("epoch_done", 7)]


def test_a_family_table_row_at_an_event_its_adapter_does_not_override_is_refused():
    # the shared adapter leaves per-step events (on_after_backward, ...) to the families whose tables name them;
    # a table that names one its adapter does not override would never fire: the class is refused when defined
    table = EventTable("toy", [Mount(ON["on_train_start"], "begin"), Mount(ON["on_after_backward"], "batch")])
    with pytest.raises(TypeError, match=r"ToyWithBackward: the toy event table fires rows at Lightning's "
                                        r"on_after_backward, which ToyWithBackward does not override"):
        type("ToyWithBackward", (ToyAdapter,), {"events": table})

    def on_after_backward(self, trainer, pl_module):
        self.fire(ON["on_after_backward"])

    assert type("ToyWithBackward", (ToyAdapter,), {"events": table, "on_after_backward": on_after_backward})


def test_the_package_exports_each_registered_familys_adapter(toy_registered):
    import lightning_hooks

    assert lightning_hooks.ToyAdapter is ToyAdapter
    assert "ToyAdapter" in lightning_hooks.__all__ and "ToyAdapter" in dir(lightning_hooks)
    namespace: dict = {}
    exec("from lightning_hooks import *", namespace)
    assert namespace["ToyAdapter"] is ToyAdapter
    assert {f.adapter.__name__ for f in families.registered()} <= set(lightning_hooks.__all__)


def test_an_unregistered_adapter_is_not_exported():
    import lightning_hooks

    assert "ToyAdapter" not in lightning_hooks.__all__
    with pytest.raises(ImportError, match="cannot import name 'ToyAdapter' from 'lightning_hooks'"):
        exec("from lightning_hooks import ToyAdapter", {})


def test_an_adapter_named_later_is_imported_and_checked_at_the_first_read():
    # the registry's families name their adapters so (importing the registry imports no Lightning)
    def family(name: str) -> Family:
        return Family(name, Later("toy_family", "ToyAdapter").as_adapter(), FAMILY.build_section, "", "")

    assert family("toy").adapter is ToyAdapter
    with pytest.raises(ValueError, match=r"^Family 'other': its adapter ToyAdapter says family 'toy'"):
        family("other").adapter  # noqa: B018  # the read is the test
