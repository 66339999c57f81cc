"""Base class of the host facades handed to legacy hooks (Classy ``task``, iMIX ``trainer``, MMEngine ``runner``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, ClassVar

from lightning_hooks.core.lightning_api import direct_optimizer_reads


class Facade:
    """A stand-in for a legacy host object.

    A hook that reads an attribute the facade does not provide gets an ``AttributeError`` that names the attribute
    and lists what the facade provides; the adapter adds a note naming the hook and its mount point.
    """

    host: ClassVar[str] = "host"
    #: the adapter attribute that holds this facade, when it is not named as the hooks name it (iMIX: ``engine``)
    adapter_attribute: ClassVar[str | None] = None
    #: the host's work dir, for facades whose host has one (MMEngine's runner, iMIX's engine): the adapter removes its
    #: temporary ``fast_dev_run`` folder when a run ends (:meth:`WorkDir.release`)
    _work_dir: WorkDir | None = None

    #: the fit's first optimizer once :meth:`_keep_first_optimizer` has read it; a facade bound to a new fit sets it
    #: back to ``None`` (that fit's Trainer makes its own wrappers)
    _optimizer: Any = None

    def _keep_first_optimizer(self, trainer: Any) -> Any:
        """``trainer``'s first optimizer, as Lightning's ``LightningOptimizer`` wrapper (an instance of the optimizer's
        class) whose ``param_groups``, ``state`` and ``defaults`` read without its ``__getattr__``
        (``lightning_api.direct_optimizer_reads``), kept in ``_optimizer``: the host's hooks read ``optimizer`` several
        times an iteration (mmcv's runner, iMIX's engine), so a facade's property reads ``_optimizer`` first and calls
        this only while it is ``None``."""
        optimizers = trainer.lightning_module.optimizers()
        optimizer = optimizers[0] if isinstance(optimizers, list) else optimizers
        self._optimizer = direct_optimizer_reads(optimizer)
        return self._optimizer

    def provides(self) -> list[str]:
        """Public attribute names this facade answers."""
        names = {n for n in dir(type(self)) if not n.startswith("_")} | {n for n in vars(self) if not n.startswith("_")}
        return sorted(names - {"host", "provides", "adapter_attribute"})

    #: (name, AttributeError) a property just raised, when it kept it: :meth:`__getattr__`, which Python calls next,
    #: raises it without running the property again
    _raised: tuple[str, AttributeError] | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raised = self._raised
        if raised is not None:
            self._raised = None
            if raised[0] == name:
                raise raised[1]
        attribute = getattr(type(self), name, None)
        if attribute is not None and hasattr(attribute, "__get__"):  # a property of the facade raised AttributeError: raise its own message
            return attribute.__get__(self, type(self))
        raise AttributeError(
            f"lightning-hooks' {self.host} facade has no attribute {name!r}. It provides: {', '.join(self.provides())}. "
            f"If your hook needs {name!r}, set it on the facade before training (adapter.{self.adapter_attribute or self.host}.{name} = ...) "
            "or open an issue naming the hook."
        )


class WorkDir:
    """A host's ``work_dir``: the folder given to the adapter, else ``{root}/work_dirs/{name}`` as OpenMMLab's
    ``tools/train.py`` (``work_dirs/{config file stem}``), under the Trainer's ``default_root_dir`` (the current
    folder before a Trainer exists); ``name`` is the stem of the host's config file, else the family name. Shared by
    the facades whose host has a work dir (MMEngine's runner, iMIX's engine).

    Example::

        WorkDir(None, "MMEngineAdapter", family="mmengine").resolve(trainer, "configs/demo_2e.py")
        # '{trainer.default_root_dir}/work_dirs/demo_2e'
    """

    def __init__(self, path: str | os.PathLike | None, adapter: str, *, family: str) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"{adapter}(work_dir={path!r}): work_dir must be a path (str or os.PathLike), not {type(path).__name__}")
        self.given = None if path is None else os.fspath(path)
        self.family = family
        self._temporary: str | None = None  # under Trainer(fast_dev_run=...): a folder removed by release()

    def resolve(self, trainer: Any, config_file: str | None = None) -> str:
        """The work dir for ``trainer``'s run; ``config_file``: the host's config file, which names the default.
        Under ``Trainer(fast_dev_run=...)``, where Lightning writes no logs or checkpoints, a temporary folder that
        :meth:`release` removes."""
        if trainer is not None and trainer.fast_dev_run:
            if self._temporary is None:
                self._temporary = tempfile.mkdtemp(prefix=f"lightning-hooks-fast-dev-run-{self.family}-")
            return self._temporary
        return self.permanent(trainer, config_file)

    @property
    def temporary(self) -> str | None:
        """The temporary folder of the current ``fast_dev_run`` (``None`` outside one, or once released)."""
        return self._temporary

    def release(self) -> None:
        """Remove the temporary work dir of a ``fast_dev_run`` (idempotent)."""
        folder, self._temporary = self._temporary, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def permanent(self, trainer: Any, config_file: str | None = None) -> str:
        """The work dir outside ``fast_dev_run``."""
        if self.given is not None:
            return self.given
        root = trainer.default_root_dir if trainer is not None else os.getcwd()
        name = os.path.splitext(os.path.basename(config_file))[0] if config_file else self.family
        return os.path.join(root, "work_dirs", name)
