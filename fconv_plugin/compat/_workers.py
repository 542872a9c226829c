"""What every data-parallel worker of a torchrun run says, gathered on each of them.

fairseq sets the root logger of every worker but the first to WARNING, so what a worker
logs at INFO is lost; a fact about each worker is gathered instead and logged once, by
the first (``cpu_bf16``: the precision each computes in; ``training_budget``: the update
each stops at). Every worker must call it at the same point of its run.
"""

from typing import Any, List

import torch.distributed as dist


def from_every_worker(value: Any) -> List[Any]:
    """``value`` from each worker, by rank; ``[value]`` outside a torchrun run."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    values: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values
