"""Train with legacy hooks and native callbacks from a Hydra config tree (configs/hydra).

    python examples/train_hydra.py hooks=imix trainer.max_epochs=3 +callbacks=[ema,profiler] callbacks.ema.decay=0.99
"""

import hydra
import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lightning_hooks import build_callbacks


@hydra.main(config_path="../configs/hydra", config_name="train", version_base=None)
def main(cfg: DictConfig) -> None:
    # hook sections from the `hooks` group, plus the native callbacks added with +callbacks=<name> (ConfigStore)
    hooks = OmegaConf.to_container(cfg.hooks, resolve=True)
    native = cfg.get("callbacks")  # None unless +callbacks=... added the group
    hooks["callbacks"] = [*hooks.get("callbacks", []), *(OmegaConf.to_container(native).values() if native else [])]
    trainer = L.Trainer(**cfg.trainer, default_root_dir=cfg.work_dir, callbacks=build_callbacks(hooks))
    trainer.fit(instantiate(cfg.model), instantiate(cfg.data))


if __name__ == "__main__":
    main()
