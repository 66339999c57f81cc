"""Train with legacy hooks and native callbacks from a Hydra config tree (configs/hydra).

    python examples/train_hydra.py hooks=imix trainer.max_epochs=3 +callbacks=[ema,profiler] callbacks.ema.decay=0.99
"""

import hydra
import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_hooks import build_callbacks
from lightning_hooks.console import ProgressBar, configure_logging, quiet_upstream_notices


@hydra.main(config_path="../configs/hydra", config_name="train", version_base=None)
def main(cfg: DictConfig) -> None:
    quiet_upstream_notices()
    # hook sections from the `hooks` group, plus the native callbacks added with +callbacks=<name> (ConfigStore)
    hooks = OmegaConf.to_container(cfg.hooks, resolve=True)
    native = cfg.get("callbacks")  # None unless +callbacks=... added the group
    hooks["callbacks"] = [*hooks.get("callbacks", []), *(OmegaConf.to_container(native).values() if native else [])]
    bar = [ProgressBar()] if cfg.trainer.get("enable_progress_bar", True) else []
    callbacks = [*build_callbacks(hooks), *bar]
    trainer = L.Trainer(**cfg.trainer, default_root_dir=cfg.work_dir, callbacks=callbacks)
    configure_logging(trainer)  # Hydra set up the root logger; Classy's and iMIX's loggers as their hosts did
    trainer.fit(instantiate(cfg.model), instantiate(cfg.data))


if __name__ == "__main__":
    main()
