"""core/safety.py: checkpoint state that ``torch.load(weights_only=True)`` reads back."""

from __future__ import annotations

import io

import numpy as np
import torch

from lightning_hooks.core.safety import plain


def test_plain_turns_numpy_into_python_numbers_and_tensors_and_loads_with_weights_only():
    state = {"lr": np.float64(0.1), "step": np.int64(3), "hist": np.arange(3), "nested": [np.float32(0.5), (np.int8(1),)]}
    converted = plain(state)
    assert converted["lr"] == 0.1 and type(converted["lr"]) is float
    assert converted["step"] == 3 and type(converted["step"]) is int
    assert torch.equal(converted["hist"], torch.tensor([0, 1, 2]))
    assert converted["nested"] == [0.5, (1,)]
    buffer = io.BytesIO()
    torch.save(converted, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True)["lr"] == 0.1


def test_plain_copies_arrays_and_leaves_other_objects_alone():
    array = np.zeros(2)
    tensor = plain(array)
    array[0] = 1  # the tensor owns its memory
    assert tensor[0] == 0
    marker = object()
    assert plain(marker) is marker
