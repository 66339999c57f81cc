import numpy as np
from mmcls.datasets import PIPELINES


@PIPELINES.register_module()
class AddNoise:
    """Gaussian noise of standard deviation ``sigma`` on the image (numpy's global generator, which the seed sets)."""

    def __init__(self, sigma=10.0):
        self.sigma = sigma

    def __call__(self, results):
        noisy = results["img"].astype(np.float32) + np.random.normal(0, self.sigma, results["img"].shape)
        results["img"] = np.clip(noisy, 0, 255).astype(np.uint8)
        return results
