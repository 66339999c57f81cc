"""Native Lightning callbacks: EMA, precise BN, anomaly detection, atomic checkpoints, profiling, loss scale."""

from lightning_hooks.callbacks.anomaly import AnomalyDetector
from lightning_hooks.callbacks.checkpoint_io import AtomicCheckpointIO
from lightning_hooks.callbacks.ema import EMA
from lightning_hooks.callbacks.loss_scale import LossScaleMonitor
from lightning_hooks.callbacks.precise_bn import PreciseBN
from lightning_hooks.callbacks.profiler import Profiler

__all__ = ["EMA", "AnomalyDetector", "AtomicCheckpointIO", "LossScaleMonitor", "PreciseBN", "Profiler"]
