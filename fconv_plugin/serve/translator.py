"""One model, loaded and run the way fairseq-interactive runs it.

The server's answer for a sentence must be what fairseq-interactive prints on its
D- line for the same options, so every step is fairseq's own: the task, the ensemble
loader, ``make_batches`` (with the plugin's input and ``--replace-unk`` fixes),
``task.inference_step``, ``post_process_prediction``, and BPE then tokenizer decoding.
Only the grouping differs: the lines of several requests form one call.
"""

import ast
import copy
import math
from typing import Dict, List, Optional

import torch
from fairseq import checkpoint_utils, tasks, utils
from fairseq_cli import interactive

from ..cli.attention import attention_per_layer, readable
from ..compat.interactive_input import memoized
from ..modules.int8 import Int8Weight


class Translator:
    """A model with its task, tokenizer and BPE, as built from fairseq-interactive's options."""

    def __init__(self, name: str, cfg):
        self.name = name
        self.cfg = cfg
        self.task = tasks.setup_task(cfg.task)
        overrides = ast.literal_eval(cfg.common_eval.model_overrides)  # a literal, never executed
        self.models, model_cfg = checkpoint_utils.load_model_ensemble(
            utils.split_paths(cfg.common_eval.path), arg_overrides=overrides, task=self.task,
            suffix=cfg.checkpoint.checkpoint_suffix, strict=(cfg.checkpoint.checkpoint_shard_count == 1),
            num_shards=cfg.checkpoint.checkpoint_shard_count,
        )
        for model in self.models:
            model.prepare_for_inference_(cfg)
        self.arch = getattr(model_cfg.model, "arch", None) or getattr(model_cfg.model, "_name", "?")
        self.tokenizer = self.task.build_tokenizer(cfg.tokenizer)
        self.bpe = self.task.build_bpe(cfg.bpe)
        self.align_dict = utils.load_align_dict(cfg.generation.replace_unk)
        self.max_positions = utils.resolve_max_positions(
            self.task.max_positions(), *[model.max_positions() for model in self.models]
        )
        self._generators: Dict[tuple, object] = {}

    @property
    def int8(self) -> bool:
        return any(isinstance(module, Int8Weight) for module in self.models[0].modules())

    @property
    def source_limit(self) -> int:
        """How many source tokens (with </s>) the model reads."""
        limit = self.max_positions[0] if isinstance(self.max_positions, (tuple, list)) else self.max_positions
        return int(limit)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "arch": self.arch,
            "source_dictionary": len(self.task.source_dictionary),
            "target_dictionary": len(self.task.target_dictionary),
            "int8": self.int8,
            "max_source_tokens": self.source_limit,
            "attention_layers": self.models[0].decoder.num_attention_layers,
        }

    def encode(self, line: str) -> str:
        """Tokenizer, then BPE: what the model's dictionary reads (fairseq-interactive's encode_fn)."""
        if self.tokenizer is not None:
            line = self.tokenizer.encode(line)
        if self.bpe is not None:
            line = self.bpe.encode(line)
        return line

    def decode(self, text: str) -> str:
        if self.bpe is not None:
            text = self.bpe.decode(text)
        if self.tokenizer is not None:
            text = self.tokenizer.decode(text)
        return text

    def _generator(self, beam: int, alignment: bool):
        key = (beam, alignment)
        if key not in self._generators:
            generation = copy.deepcopy(self.cfg.generation)
            generation.beam = beam
            generation.nbest = 1
            if alignment and not generation.print_alignment:
                generation.print_alignment = "hard"  # as --print-alignment; it reads the attention
                for model in self.models:
                    model.decoder.need_attn = True
            self._generators[key] = self.task.build_generator(self.models, generation)
        return self._generators[key]

    def translate(self, lines: List[str], encoded: List[str], beam: int, alignment: bool = False,
                  attention: bool = False) -> List[dict]:
        """The D-line text and score of each line (and its A-line pairs, its attention) in order.

        ``encoded`` is ``encode`` of each line, done when the request was checked."""
        generator = self._generator(beam, alignment)
        src_dict, tgt_dict = self.task.source_dictionary, self.task.target_dictionary
        results: List[Optional[dict]] = [None] * len(lines)
        encode = memoized(self.encode)  # the memo fairseq-interactive's batching and the fixes share
        encode._fconv_memo.update(zip(lines, encoded))
        # fairseq-interactive's own batching (looked up now: the host fixes wrap it)
        for batch in interactive.make_batches(list(lines), self.cfg, self.task, self.max_positions, encode):
            sample = {"net_input": {"src_tokens": batch.src_tokens, "src_lengths": batch.src_lengths}}
            translations = self.task.inference_step(generator, self.models, sample)
            for row, (index, hypos) in enumerate(zip(batch.ids.tolist(), translations)):
                src_tokens = utils.strip_pad(batch.src_tokens[row], tgt_dict.pad())
                src_str = src_dict.string(src_tokens, self.cfg.common_eval.post_process)
                hypo = hypos[0]
                _, hypo_str, pairs = utils.post_process_prediction(
                    hypo_tokens=hypo["tokens"].int().cpu(), src_str=src_str, alignment=hypo["alignment"],
                    align_dict=self.align_dict, tgt_dict=tgt_dict, remove_bpe=self.cfg.common_eval.post_process,
                    extra_symbols_to_ignore=interactive.get_symbols_to_strip_from_output(generator),
                )
                result = {"text": self.decode(hypo_str), "score": float(hypo["score"] / math.log(2))}
                if alignment:
                    result["alignment"] = [[int(s), int(t)] for s, t in (pairs or [])]
                if attention:
                    result["attention"] = self._attention(src_tokens, hypo["tokens"])
                results[index] = result
        return results

    def _attention(self, src_tokens: torch.Tensor, target_tokens: torch.Tensor) -> dict:
        """Each attention layer's weights, target by source, as fconv-attention draws them (§3.3)."""
        layers = attention_per_layer(self.models[0], src_tokens, target_tokens)
        return {
            "source": readable([self.task.source_dictionary[i] for i in src_tokens.tolist()]),
            "target": readable([self.task.target_dictionary[i] for i in target_tokens.tolist()]),
            "layers": [[[round(float(w), 4) for w in row] for row in layer.tolist()] for layer in layers],
        }
