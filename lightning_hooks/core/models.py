"""Finding the legacy model inside a LightningModule, once for every family."""

from __future__ import annotations

from collections.abc import Callable

import torch


def find_model(root: torch.nn.Module, is_model: Callable[[torch.nn.Module], bool], *, adapter: str, what: str) -> str | None:
    """The dotted path of the model the hooks see inside ``root``: ``""`` when ``root`` itself is one, else the one
    outermost submodule for which ``is_model`` holds, else None (the family's fallback applies).

    Several outermost ones are ambiguous: a ``ValueError`` naming them and the ``model=`` option of ``adapter``.

    Example::

        path = find_model(pl_module, lambda m: isinstance(m, BaseModel), adapter="MMEngineAdapter",
                          what="MMEngine models")
    """
    if is_model(root):
        return ""
    outermost: list[str] = []
    for name, module in root.named_modules():  # parents come before their children
        if name and is_model(module) and not any(name.startswith(outer + ".") for outer in outermost):
            outermost.append(name)
    if len(outermost) > 1:
        names = ", ".join(repr(name) for name in outermost)
        raise ValueError(
            f"{adapter}: {type(root).__qualname__} holds several {what} ({names}); name the one the hooks see with "
            f"{adapter}(..., model={outermost[0]!r}), or model='' for the LightningModule itself."
        )
    return outermost[0] if outermost else None


def submodule(root: torch.nn.Module, path: str, *, adapter: str) -> torch.nn.Module:
    """``root``'s submodule at dotted ``path`` (``""``: ``root``); an error naming ``adapter(model=path)`` if absent."""
    try:
        return root.get_submodule(path)
    except AttributeError as err:
        raise AttributeError(
            f"{adapter}(model={path!r}): {type(root).__qualname__} has no submodule {path!r} ({err}). Name the "
            "attribute that holds the model the hooks see, e.g. model='model'."
        ) from None
