import numpy as np
from mmcls.datasets import DATASETS, BaseDataset


@DATASETS.register_module()
class SquaresDataset(BaseDataset):
    """``n`` generated 32x32 images: the label is which quarter of the image holds a bright square. Its ``evaluate``
    adds the project's own metric, ``mean_confidence``, to mmcls's."""

    CLASSES = ["top-left", "top-right", "bottom-left", "bottom-right"]

    def __init__(self, pipeline, n=16, seed=0, test_mode=False):
        self.n, self.seed = n, seed
        super().__init__(data_prefix="", pipeline=pipeline, test_mode=test_mode)

    def load_annotations(self):
        rng = np.random.default_rng(self.seed)
        items = []
        for label in rng.integers(0, 4, self.n):
            img = rng.integers(0, 80, (32, 32, 3), dtype=np.uint8)
            y, x = divmod(int(label), 2)
            img[y * 16 + 4:y * 16 + 12, x * 16 + 4:x * 16 + 12] = 230
            items.append({"img": img, "gt_label": np.array(label, dtype=np.int64)})
        return items

    def evaluate(self, results, metric="accuracy", metric_options=None, indices=None, logger=None):
        metrics = [metric] if isinstance(metric, str) else list(metric)
        own = "mean_confidence" in metrics
        others = [m for m in metrics if m != "mean_confidence"]
        scores = super().evaluate(results, others, metric_options, indices, logger) if others else {}
        if own:
            scores["mean_confidence"] = float(np.mean([np.max(r) for r in results]))
        return scores
