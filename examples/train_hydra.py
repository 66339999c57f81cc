"""Train with legacy hooks and native callbacks from a Hydra config tree (configs/hydra).

    python examples/train_hydra.py hooks=mmengine trainer.max_epochs=3
"""

import hydra
import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig

from lightning_hooks import build_callbacks


@hydra.main(config_path="../configs/hydra", config_name="train", version_base=None)
def main(cfg: DictConfig) -> None:
    trainer = L.Trainer(**cfg.trainer, default_root_dir=cfg.work_dir, callbacks=build_callbacks(cfg.hooks))
    trainer.fit(instantiate(cfg.model), instantiate(cfg.data))


if __name__ == "__main__":
    main()
