"""``--diverse-beam-groups`` on subsets larger than one batch.

fairseq 0.12's DiverseBeamSearch keeps each sentence's overlap between groups in a table
with one row per sentence of the batch, but indexes it with the sentences' ids in the
dataset (``sample["id"]``), so any batch holding an id past its own size stops with an
IndexError (``index 18 is out of bounds for dimension 0 with size 16``): fairseq-generate
and fairseq-interactive fail on all but the smallest inputs. Here the search gets each
sentence's row in its batch instead, which is what its table holds.
"""

import torch
from fairseq.search import DiverseBeamSearch

from ._patching import patch


def rows_in_batch(ids: torch.Tensor, first_step_ids: torch.Tensor) -> torch.Tensor:
    """Where each of ``ids`` (the sentences still searched) stood in the batch at step 0."""
    return (ids.unsqueeze(1) == first_step_ids.unsqueeze(0)).int().argmax(dim=1)


def _indexed_by_row(step_function):
    def step(self, step, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
        if original_batch_idxs is not None:
            if step == 0:
                self._fconv_plugin_first_step_ids = original_batch_idxs.clone()
            original_batch_idxs = rows_in_batch(original_batch_idxs, self._fconv_plugin_first_step_ids)
        return step_function(self, step, lprobs, scores, prev_output_tokens, original_batch_idxs)

    return step


def install() -> None:
    patch(DiverseBeamSearch, "step", "diverse_beam", _indexed_by_row)
