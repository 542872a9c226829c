"""Causal decoder convolution with incremental decoding (Gehring et al. 2017, §3.2).

The decoder must not see the future: its inputs are padded with k - 1 zeros on the
left only, so output i depends on inputs i-k+1..i.

When generating one token at a time, output i is a linear map of the last k inputs,
so each convolution keeps a rolling buffer of its last k inputs (zeros before the
first step) instead of re-reading the whole prefix; beam search reorders the buffer
with the beams.
"""

from typing import Dict, Optional

import torch
import torch.nn.functional as F
from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor

from .weight_norm import WeightNormConvTBC

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


@with_incremental_state
class CausalConvolution(WeightNormConvTBC):
    def forward(self, x: Tensor, incremental_state: Optional[IncrementalState] = None) -> Tensor:
        """Full sequence: ``x`` is time x batch x channel.

        Incremental: ``x`` is batch x 1 x channel, the newest input only; returns
        batch x 1 x out_channels.
        """
        if incremental_state is None:
            x = F.pad(x, (0, 0, 0, 0, self.kernel_size - 1, 0))
            return self.convolve(x)
        return self._step(x, incremental_state)

    def _step(self, x: Tensor, incremental_state: IncrementalState) -> Tensor:
        window = x
        if self.kernel_size > 1:
            window = self._push_input(x, incremental_state)
        batch_size = x.size(0)
        if self.int8 is not None:
            out = self.int8.linear(window.reshape(batch_size, -1), self.bias)
        else:
            out = torch.addmm(self.bias, window.reshape(batch_size, -1), self.flat_weight())
        return out.view(batch_size, 1, -1)

    def _push_input(self, x: Tensor, incremental_state: IncrementalState) -> Tensor:
        """Append ``x`` to the buffer of the last k inputs and return the buffer."""
        buffer = self.get_incremental_state(incremental_state, "input_buffer")
        if buffer is None:
            history = x.new_zeros(x.size(0), self.kernel_size - 1, x.size(2))
        else:
            history = buffer[:, 1:]
        buffer = torch.cat([history, x[:, -1:]], dim=1)
        self.set_incremental_state(incremental_state, "input_buffer", buffer)
        return buffer

    def flat_weight(self) -> Tensor:
        """The kernel as a (k · in, out) matrix: row j · in + c multiplies buffer[:, j, c]."""
        return self.normalized_weight().reshape(-1, self.out_channels)

    def reorder_incremental_state(self, incremental_state: IncrementalState, new_order: Tensor) -> None:
        buffer = self.get_incremental_state(incremental_state, "input_buffer")
        if buffer is not None:
            buffer = buffer.index_select(0, new_order)
            self.set_incremental_state(incremental_state, "input_buffer", buffer)
