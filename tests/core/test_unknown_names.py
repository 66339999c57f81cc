"""core/unknown_names.py: a name no registry knows, read off the real builders' errors (MMEngine's registry, a
module-level registry dict as Classy's)."""

from __future__ import annotations

import pytest
from mmengine.registry import Registry

from lightning_hooks.core.errors import UnknownNameError
from lightning_hooks.core.unknown_names import chain, module_registry_unknown_name, openmmlab_unknown_name, registry_message

DATASET_REGISTRY = {"image_path": object(), "synthetic_image": object()}


def build_dataset(config):  # as Classy's build_dataset indexes its module's registry
    return DATASET_REGISTRY[config["name"]]


def test_registry_message_close_matches_first_and_a_few_names():
    message = registry_message("model type", "ResNte", [f"N{i}" for i in range(20)] + ["ResNet"], "Register it.", "s::model")
    assert message.startswith("unknown model type 'ResNte' (registry s::model). Did you mean: ResNet? Registered: N0,")
    assert "(21 in all). Register it." in message


def test_an_mmengine_registry_keyerror_becomes_one_short_error():
    models = Registry("model", scope="lh_test_scope")

    @models.register_module()
    class ResNet:
        pass

    with pytest.raises(KeyError) as err:
        models.build(dict(type="ResNte"))
    found = openmmlab_unknown_name(err.value, "Registered in {scope}.")
    assert isinstance(found, UnknownNameError)
    assert "unknown model type 'ResNte' (registry lh_test_scope::model). Did you mean: ResNet?" in str(found)
    assert str(found).endswith("Registered in lh_test_scope.")
    assert openmmlab_unknown_name(KeyError("other"), "x") is None


def test_a_module_registry_dict_miss_is_named_and_other_errors_are_not_ours():
    try:
        build_dataset({"name": "image_pth"})
    except KeyError as err:
        found = module_registry_unknown_name(err, {"DATASET_REGISTRY": "Classy dataset"}, "Import your module.")
    assert isinstance(found, UnknownNameError)
    assert "unknown Classy dataset name 'image_pth'. Did you mean: image_path?" in str(found)
    assert module_registry_unknown_name(ValueError("x"), {"DATASET_REGISTRY": "d"}, "") is None


def test_chain_walks_causes_once():
    inner = KeyError("inner")
    try:
        try:
            raise inner
        except KeyError as err:
            raise RuntimeError("outer") from err
    except RuntimeError as outer:
        assert [type(e) for e in chain(outer)] == [RuntimeError, KeyError]
