import numpy as np
from mmengine.dataset import BaseDataset
from mmpretrain.registry import DATASETS


@DATASETS.register_module()
class SquaresDataset(BaseDataset):
    """``n`` generated 32x32 images: the label is which quarter of the image holds a bright square."""

    METAINFO = {"classes": ("top-left", "top-right", "bottom-left", "bottom-right")}

    def __init__(self, n=16, seed=0, **kwargs):
        self.n, self.seed = n, seed
        super().__init__(ann_file="", serialize_data=False, **kwargs)

    def load_data_list(self):
        rng = np.random.default_rng(self.seed)
        items = []
        for label in rng.integers(0, 4, self.n):
            img = rng.integers(0, 80, (32, 32, 3), dtype=np.uint8)
            y, x = divmod(int(label), 2)
            img[y * 16 + 4:y * 16 + 12, x * 16 + 4:x * 16 + 12] = 230
            items.append({"img": img, "gt_label": int(label)})
        return items
