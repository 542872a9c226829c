"""An exported model in onnxruntime: the encoder, the decoder step, and the step state.

The state of a batch: each sentence's keys, values and padding mask, once for all its
hypotheses (the step attends for a sentence's beam in one product, as the torch model
does), and each decoder convolution's last k - 1 inputs per hypothesis
(``fconv_plugin/export/graphs.py`` documents the graphs).
"""

import os
from typing import List, Optional

import numpy as np
import onnxruntime

from .manifest import DECODER_OUTPUTS, ENCODER_INPUTS, Manifest, decoder_inputs
from .text import TextPipeline, Vocabulary


class ExportedModel:
    """Sessions for encoder.onnx and decoder.onnx, with the state of the current batch.

    ``profile_prefix``: onnxruntime profiles every node run, for ``decoder.end_profiling()``
    (and the encoder's) to write out, in onnxruntime's profile format."""

    def __init__(self, directory: str, threads: Optional[int] = None, profile_prefix: Optional[str] = None):
        self.directory = directory
        self.manifest = manifest = Manifest.read(directory)
        symbols = manifest.symbols
        self.source_vocabulary = Vocabulary(os.path.join(directory, manifest.source_vocabulary),
                                            symbols.source_unk, symbols.source_eos, symbols.source_pad, symbols.bos)
        self.target_vocabulary = Vocabulary(os.path.join(directory, manifest.target_vocabulary),
                                            symbols.unk, symbols.eos, symbols.pad, symbols.bos)
        self.text = TextPipeline(manifest.tokenizer, manifest.bpe, directory)
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        # each session's threads stop spinning for work when its run returns: else the decoder's
        # spin while the encoder runs, and the encoder's while the decoder does (on two cores the
        # encoder took 2x as long, 0.66 s against 0.33 s for the quickstart's 32 batches)
        options.add_session_config_entry("session.force_spinning_stop", "1")
        options.log_severity_level = 3  # errors only
        if profile_prefix:  # onnxruntime's own profile: each session's end_profiling() writes it
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        providers = ["CPUExecutionProvider"]
        self.encoder = onnxruntime.InferenceSession(os.path.join(directory, manifest.encoder), options, providers=providers)
        self.decoder = onnxruntime.InferenceSession(os.path.join(directory, manifest.decoder), options, providers=providers)
        self.inputs = decoder_inputs(manifest.copying)
        self.state_names = [i.name for i in self.decoder.get_inputs()][len(self.inputs):]
        # the candidates, the rows' sums and the new states; the full log-probabilities stay in onnxruntime
        self.step_outputs = [*DECODER_OUTPUTS[1:], *(o.name for o in self.decoder.get_outputs()[len(DECODER_OUTPUTS):])]
        self.state_shapes = list(manifest.dimensions.decoder_states)
        self.vocabulary_size = manifest.dimensions.target_vocabulary
        self.max_source_positions = manifest.max_source_positions or float("inf")
        self.max_target_positions = manifest.max_target_positions or float("inf")

    # the calls beam search makes

    def start(self, src_tokens: np.ndarray, copies: int) -> None:
        """Encode a batch (sentences x src_len, left-padded) for ``copies`` hypotheses a sentence."""
        keys, values, length_scale = self.encoder.run(None, {ENCODER_INPUTS[0]: src_tokens.astype(np.int64)})
        # each sentence's source, once for all its hypotheses, in the step's input order: keys,
        # values, length scale, padding mask (and, for a copying model, the words its mixture copies from)
        self.source = [keys, values, length_scale, src_tokens == self.manifest.symbols.source_pad]
        if self.manifest.copying:
            self.source.append(src_tokens.astype(np.int64))
        self.copies = copies
        sentences = src_tokens.shape[0]
        self.states: List[np.ndarray] = [np.zeros((sentences * copies, k * channels), np.float32)
                                         for k, channels in self.state_shapes]
        self.order: Optional[np.ndarray] = None  # the beams' order for the next step (None: as they are)

    def step(self, prev_tokens: np.ndarray, token_penalty: np.ndarray, beam_scores: np.ndarray):
        """One step for every row (the sentences' hypotheses, sentence by sentence) of the
        prefixes ``prev_tokens`` (rows x length, no padding): every sentence's best candidates
        as the graph chooses them (``token_penalty`` and ``beam_scores`` as
        ``select_candidates`` in ``fconv_plugin/export/graphs.py`` documents them) and each
        row's sum of log-probabilities: (cand_scores, cand_index, log_prob_sums). The
        states are gathered in the beams' order (``reorder``) inside the step."""
        newest = prev_tokens[:, -1].astype(np.int64).reshape(-1, self.copies)
        position = np.array(self.manifest.symbols.pad + prev_tokens.shape[1], np.int64)  # make_positions' number
        order = np.arange(newest.size) if self.order is None else self.order
        feeds = dict(zip(self.inputs, (newest, position, *self.source, token_penalty, beam_scores, order)))
        feeds.update(zip(self.state_names, self.states))
        cand_scores, cand_index, sums, *self.states = self.decoder.run(self.step_outputs, feeds)
        self.order = None
        self.last_feeds = feeds
        return cand_scores, cand_index, sums

    def last_log_probs(self) -> np.ndarray:
        """The last step's log-probabilities again (rows x vocabulary), for a step whose
        rows the candidates do not rule on (a NaN)."""
        return self.decoder.run([DECODER_OUTPUTS[0]], self.last_feeds)[0]

    def reorder(self, order: np.ndarray, sentences_left: bool) -> None:
        """Row i takes the state of row ``order[i]`` (the step graph gathers the states: the
        order waits for the next step); a hypothesis stays with its sentence, whose keys,
        values, length scale, mask (and source tokens) move only when sentences left the batch."""
        copies = self.copies
        self.order = order.astype(np.int64) if self.order is None else self.order[order]
        if sentences_left:
            kept = order.reshape(-1, copies)[:, 0] // copies
            self.source = [rows[kept] for rows in self.source]
