from mmengine.evaluator import BaseMetric
from mmpretrain.registry import METRICS


@METRICS.register_module()
class MeanConfidence(BaseMetric):
    """The mean probability the model gives its predicted class."""

    default_prefix = "my_proj"

    def process(self, data_batch, data_samples):
        self.results.extend(float(sample["pred_score"].max()) for sample in data_samples)

    def compute_metrics(self, results):
        return {"mean_confidence": sum(results) / len(results)}
