"""core/loaders.py: a dataloader whose ``len()`` is the batches Lightning runs."""

from __future__ import annotations

from torch.utils.data import DataLoader

from lightning_hooks.core.loaders import Loader


def test_loader_len_is_lightnings_batch_count_and_the_rest_is_the_loaders():
    loader = DataLoader(list(range(10)), batch_size=2)
    view = Loader(loader, batches=3)  # e.g. limit_train_batches=3
    assert len(view) == 3
    assert view.batch_size == 2 and view.dataset is loader.dataset
    assert [batch.tolist() for batch in view][:1] == [[0, 1]]


def test_a_write_goes_to_the_loader_but_the_views_own_fields():
    loader = DataLoader(list(range(10)), batch_size=2)
    view = Loader(loader, batches=3)
    view._iterator = None  # mmdet 2.x's YOLOXModeSwitchHook restarting persistent workers
    view.custom = "set by a hook"
    assert loader._iterator is None and loader.custom == "set by a hook" and "custom" not in vars(view)
    view.batches = 4
    assert len(view) == 4 and not hasattr(loader, "batches")
