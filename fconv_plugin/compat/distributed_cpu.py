"""Data-parallel training under torchrun on machines without GPUs.

fairseq 0.12 picks the device of a torchrun worker as ``rank % torch.cuda.device_count()``,
which divides by zero on a CPU-only machine before training starts, and then wraps
the model in torch's DistributedDataParallel with ``device_ids=[0]``, which torch
refuses for a CPU module. On such a machine the worker gets device 0 and fairseq's
own gradient all-reduce (``--ddp-backend legacy_ddp``), which works with gloo.
"""

import logging
import os

import torch
from fairseq.distributed import utils as distributed_utils

from ._patching import patch

logger = logging.getLogger(__name__)


def _launch_init(original):
    def infer_torch_distributed_launch_init(cfg):
        if torch.cuda.device_count() > 0:
            return original(cfg)
        # fairseq's settings for a worker that torchrun started, with device 0
        cfg.distributed_init_method = "env://"
        cfg.distributed_world_size = int(os.environ["WORLD_SIZE"])
        cfg.distributed_rank = int(os.environ["RANK"])
        cfg.device_id = 0
        cfg.distributed_no_spawn = True
        if cfg.ddp_backend in ("c10d", "pytorch_ddp"):
            logger.info("fconv_plugin: no GPU, using --ddp-backend legacy_ddp instead of %s", cfg.ddp_backend)
            cfg.ddp_backend = "legacy_ddp"

    return infer_torch_distributed_launch_init


def install() -> None:
    patch(distributed_utils, "_infer_torch_distributed_launch_init", "distributed_cpu", _launch_init)
