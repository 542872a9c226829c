"""Causal decoder convolution with incremental decoding (Gehring et al. 2017, §3.2).

The decoder must not see the future: its inputs are padded with k - 1 zeros on the
left only, so output i depends on inputs i-k+1..i.

When generating one token at a time, output i is a linear map of the last k inputs,
so each convolution keeps a rolling buffer of its last k - 1 inputs (zeros before
the first step) instead of re-reading the whole prefix; beam search reorders the
buffer with the beams. That buffer is the convolution's whole decoding state (an
exported decoder step takes and returns it explicitly).
"""

from typing import Dict, Optional

import torch
import torch.nn.functional as F
from fairseq.incremental_decoding_utils import FairseqIncrementalState
from torch import Tensor

from .weight_norm import WeightNormConvTBC, in_dtype_of

IncrementalState = Dict[str, Dict[str, Optional[Tensor]]]


class CausalWindow(FairseqIncrementalState):
    """Left padding and the rolling buffer of the last k inputs, for any convolution.

    The class it is mixed into provides ``kernel_size``, ``convolve(x)`` over a
    time-major sequence and ``window_product(windows)``: the output for flattened
    windows (batch x k · in, oldest input first).
    """

    def forward(self, x: Tensor, incremental_state: Optional[IncrementalState] = None) -> Tensor:
        """Full sequence: ``x`` is time x batch x channel.

        Incremental: ``x`` is batch x 1 x channel, the newest input only; returns
        batch x 1 x out_channels.
        """
        if incremental_state is None:
            x = F.pad(x, (0, 0, 0, 0, self.kernel_size - 1, 0))
            return self.convolve(x)
        window = x
        if self.kernel_size > 1:
            window = self._push_input(x, incremental_state)
        batch_size = x.size(0)
        return self.window_product(window.reshape(batch_size, -1)).view(batch_size, 1, -1)

    def _push_input(self, x: Tensor, incremental_state: IncrementalState) -> Tensor:
        """The window of the last k inputs, ``x`` the newest; the last k - 1 are kept for the next step."""
        history = self.input_history(incremental_state)
        if history is None:
            history = x.new_zeros(x.size(0), self.kernel_size - 1, x.size(2))
        window = torch.cat([history, x[:, -1:]], dim=1)
        self.set_input_history(incremental_state, window[:, 1:])
        return window

    def input_history(self, incremental_state: IncrementalState) -> Optional[Tensor]:
        """The last k - 1 inputs (batch x (k - 1) x in): this convolution's whole decoding state."""
        return self.get_incremental_state(incremental_state, "input_buffer")

    def set_input_history(self, incremental_state: IncrementalState, history: Tensor) -> None:
        self.set_incremental_state(incremental_state, "input_buffer", history)

    def reorder_incremental_state(self, incremental_state: IncrementalState, new_order: Tensor) -> None:
        history = self.input_history(incremental_state)
        if history is not None:
            self.set_input_history(incremental_state, history.index_select(0, new_order))


class CausalConvolution(CausalWindow, WeightNormConvTBC):
    """The decoder's weight-normalised convolution, causal and incremental."""

    def window_product(self, windows: Tensor) -> Tensor:
        bias, weight = in_dtype_of(windows, self.bias, self.flat_weight())
        return torch.addmm(bias, windows, weight)

    def flat_weight(self) -> Tensor:
        """The kernel as a (k · in, out) matrix: row j · in + c multiplies buffer[:, j, c]."""
        return self.normalized_weight().reshape(-1, self.out_channels)
