"""Several processes for ``lightning-hooks train`` on OpenMMLab 1.x configs: the model wrapper the libraries' training
APIs ask for (``wrap_distributed_model`` / ``build_ddp``), as Lightning's ``DDPStrategy`` stands for it.

Under ``tools/dist_train.sh`` the training API wraps the model in mmcv's ``MMDistributedDataParallel``
(``broadcast_buffers=False``, the config's ``find_unused_parameters``), builds the optimizer on it and hands it to the
runner, whose hooks read ``runner.model.module``. Here Lightning's ``DDPStrategy``, with the same arguments, wraps the
LightningModule and averages the gradients; the training API gets a :class:`DistributedView` instead, a wrapper
without a reducer that hooks see where mmcv's would be.
"""

from __future__ import annotations

from typing import Any

import torch


def distributed_view_class() -> type:
    """:class:`DistributedView`'s class, built on mmcv's ``MMDistributedDataParallel`` once mmcv 1.x is imported."""
    global _VIEW
    if _VIEW is None:
        from mmcv.parallel import MMDistributedDataParallel, scatter_kwargs

        class DistributedView(MMDistributedDataParallel):
            """What ``runner.model`` is under ``dist_train.sh``, for the hooks: an ``MMDistributedDataParallel``
            (``is_module_wrapper`` is true, ``.module`` is the model, checkpoints drop the ``module.`` prefix), whose
            ``train_step`` / ``val_step`` / forward scatter the batch to the model's device as mmcv's wrappers do and
            call the model's; the gradients are averaged by Lightning's ``DistributedDataParallel`` around the
            LightningModule, so this one holds no reducer and syncs nothing."""

            def __init__(self, module: torch.nn.Module, **ddp_kwargs: Any) -> None:
                torch.nn.Module.__init__(self)
                #: the legacy model (``train_step`` / ``val_step`` are mmcv's API, not ``torch.nn.Module``'s)
                self.module: Any = module
                #: the arguments the training API wrapped the model with (Lightning's ``DDPStrategy`` gets them)
                self.ddp_kwargs = ddp_kwargs

            def _scattered(self, inputs: tuple, kwargs: dict) -> tuple[tuple, dict]:
                parameter = next(self.module.parameters(), None)
                device = parameter.device if parameter is not None else torch.device("cpu")
                ins, kws = scatter_kwargs(inputs, kwargs, [device.index if device.type == "cuda" else -1], dim=0)
                return ins[0], kws[0]

            def forward(self, *inputs: Any, **kwargs: Any) -> Any:
                inputs, kwargs = self._scattered(inputs, kwargs)
                return self.module(*inputs, **kwargs)

            def train_step(self, *inputs: Any, **kwargs: Any) -> Any:
                inputs, kwargs = self._scattered(inputs, kwargs)
                return self.module.train_step(*inputs, **kwargs)

            def val_step(self, *inputs: Any, **kwargs: Any) -> Any:
                inputs, kwargs = self._scattered(inputs, kwargs)
                return self.module.val_step(*inputs, **kwargs)

        _VIEW = DistributedView
    return _VIEW


_VIEW: type | None = None


def wrap_distributed(model: torch.nn.Module, device: str = "cuda", *args: Any, **kwargs: Any) -> Any:
    """Stands for the training API's ``wrap_distributed_model(model, device, ...)`` (mmcls) / ``build_ddp(model,
    device, ...)`` (mmdet, mmseg): a :class:`DistributedView` of ``model`` recording the ``DistributedDataParallel``
    arguments (``broadcast_buffers``, ``find_unused_parameters``; ``device_ids`` are Lightning's to choose)."""
    kwargs.pop("device_ids", None)
    if args:
        raise TypeError(f"lightning-hooks train: the training API wrapped the model with positional arguments {args!r}, "
                        "which lightning-hooks does not know; open an issue naming the library and its version.")  # fmt: skip  # the message's lines aligned under the call
    return distributed_view_class()(model, **kwargs)


def ddp_strategy(strategy: Any, view: Any, processes: int) -> Any:
    """Lightning's ``DDPStrategy`` with the arguments the training API wrapped the model with (``view``), for
    ``--strategy`` ``auto`` or ``ddp``; another strategy cannot stand for ``MMDistributedDataParallel`` here."""
    from lightning_hooks.core.errors import ConfigError
    from lightning_hooks.core.lightning_api import pl

    if strategy not in (None, "auto", "ddp"):
        raise ConfigError(
            f"--strategy {strategy!r}: an OpenMMLab 1.x config in {processes} processes trains under Lightning's DDP "
            "(its training API wraps the model in MMDistributedDataParallel, which Lightning's DDPStrategy stands for, "
            "and builds its samplers and hooks once the processes run): pass --strategy ddp, or leave it out."
        )
    return pl.strategies.DDPStrategy(**view.ddp_kwargs)
