"""Loading a trained model for translation: the checkpoint (safely), its task and dictionaries, and where it runs.

What fairseq-interactive does before its first sentence, as fairseq's public API does it:
the options converted (``interactive_config``, the languages read from the data-bin where
none are given), the task set up, the ensemble loaded through ``checkpoint_io``'s safe
loader, each model prepared and placed (device, precision: ``place_model``), and what the
model reads (``max_positions``; the training lengths that ``trained_sentence_cut`` turns
into the documents' sentence cut).
"""

import ast
import contextlib
import logging
import os
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import torch
from fairseq import checkpoint_utils, tasks, utils

from .. import precision
from ..checkpoint_io import loading_fairseq_checkpoints
from ..deployment.int8 import has_int8_weights
from ..errors import FConvError

logger = logging.getLogger(__name__)

TRAINED_LENGTH_PERCENTILE = 90  # documents cut sentences longer than this share of the training sources
# warnings the hosts give on every run that ask nothing of a user: hydra's deprecations as
# fairseq composes its configuration, torch's pin_memory on a machine without a GPU
HOST_NOTICES = (
    r"hydra\.experimental\.\w+\(\) is no longer experimental",
    r"\s*The version_base parameter is not specified",
    r"In 'config': Usage of deprecated keyword in package header",
    r"\s*'config' is validated against ConfigStore schema",
    r"\s*The strict flag in the compose API is deprecated",
    r"'pin_memory' argument is set as true but no accelerator is found",
)


@dataclass
class LoadedModels:
    """What a checkpoint loads into: the task (with its dictionaries), the models, the
    architecture's name, the device and what the models read."""

    task: object
    models: list
    arch: str
    device: torch.device
    max_positions: object


def load_models(cfg) -> LoadedModels:
    """The checkpoint(s) of ``cfg.common_eval.path`` loaded as fairseq-interactive loads them
    (``--model-overrides`` read as a literal, never executed), prepared and placed."""
    if not cfg.common_eval.path:
        raise FConvError("--path is required: the checkpoint to translate with")
    for path in utils.split_paths(cfg.common_eval.path):
        if not os.path.isfile(path):
            raise FConvError(f"--path {path}: no such checkpoint file")
    task = tasks.setup_task(cfg.task)
    overrides = ast.literal_eval(cfg.common_eval.model_overrides)  # a literal, never executed
    with loading_fairseq_checkpoints(cfg.common_eval.path), without_host_notices():
        models, model_cfg = checkpoint_utils.load_model_ensemble(
            utils.split_paths(cfg.common_eval.path), arg_overrides=overrides, task=task,
            suffix=cfg.checkpoint.checkpoint_suffix, strict=(cfg.checkpoint.checkpoint_shard_count == 1),
            num_shards=cfg.checkpoint.checkpoint_shard_count,
        )
    device = inference_device(cfg)
    for model in models:
        model.prepare_for_inference_(cfg)
        place_model(model, cfg, device)
    arch = getattr(model_cfg.model, "arch", None) or getattr(model_cfg.model, "_name", "?")
    max_positions = utils.resolve_max_positions(task.max_positions(), *[model.max_positions() for model in models])
    return LoadedModels(task, models, arch, device, max_positions)


def language_pair(data: str, source_lang: Optional[str], target_lang: Optional[str]) -> Dict[str, str]:
    """The languages a translator reads and writes: as given, else as the data-bin's files
    name them (fairseq's ``infer_language_pair``, which fairseq's task runs too late for a
    ``--tokenizer`` that reads the source language). One line naming the choice where the
    files do not settle it."""
    if source_lang is not None and target_lang is not None:
        return {"source_lang": source_lang, "target_lang": target_lang}
    from fairseq.data.data_utils import infer_language_pair

    first = data.split(os.pathsep)[0]
    inferred = infer_language_pair(first) if os.path.isdir(first) else (None, None)
    if None in inferred:
        found = sorted(name[len("dict."):-len(".txt")] for name in os.listdir(first)
                       if name.startswith("dict.") and name.endswith(".txt")) if os.path.isdir(first) else []
        raise FConvError(f"which languages? {first} has the dictionaries of {', '.join(found) or 'none'} and no "
                         f"binarised split naming the pair; give --source-lang and --target-lang (-s and -t)")
    return {"source_lang": source_lang or inferred[0], "target_lang": target_lang or inferred[1]}


def trained_source_lengths(task) -> Optional["numpy.ndarray"]:
    """The source lengths (tokens with </s>) of the training split in the task's data-bin
    (``train``, ``train1``, ...: fairseq's shards), or None where the data-bin holds only
    the dictionaries. Read from the binarised index alone (fairseq's ``indexed_dataset``)."""
    from itertools import count

    import numpy
    from fairseq.data import indexed_dataset

    cfg = getattr(task, "cfg", None)
    source, target = getattr(cfg, "source_lang", None), getattr(cfg, "target_lang", None)
    if not getattr(cfg, "data", None) or not source or not target:
        return None
    data = utils.split_paths(cfg.data)[0]
    lengths = []
    for shard in count():
        split = "train" + (str(shard) if shard else "")
        for pair in (f"{source}-{target}", f"{target}-{source}"):
            prefix = os.path.join(data, f"{split}.{pair}.{source}")
            impl = indexed_dataset.infer_dataset_impl(prefix)
            if impl is not None:
                dataset = indexed_dataset.make_dataset(prefix, impl=impl, dictionary=task.source_dictionary)
                lengths.append(numpy.array(dataset.sizes))  # a copy: the index is unmapped with the dataset
                break
        else:
            break
    return numpy.concatenate(lengths) if lengths else None


def trained_sentence_cut(lengths: Optional["numpy.ndarray"], max_len_b: int) -> int:
    """The longest piece (source tokens with </s>) a document's sentence is cut into by
    default: as long as ``TRAINED_LENGTH_PERCENTILE`` percent of the training sources, where
    the data-bin has them (on the quickstart's model, 162-word sentences looped at the old
    200 tokens and read well at this percentile: docs/usage.md); never past the generation's
    length bound (``max(16, --max-len-b)``), so no translation is cut off. What the model
    reads bounds it too (``documents.cut_length``, the cut's one rule and clamp)."""
    import numpy

    cut = max(16, max_len_b)
    if lengths is not None and len(lengths):
        cut = min(cut, int(numpy.percentile(lengths, TRAINED_LENGTH_PERCENTILE, method="inverted_cdf")))
    return cut


@contextlib.contextmanager
def without_host_notices():
    """``HOST_NOTICES`` not shown while this lasts; every other warning as before."""
    with warnings.catch_warnings():
        for pattern in HOST_NOTICES:
            warnings.filterwarnings("ignore", message=pattern, category=UserWarning)
        yield


def interactive_config(args):
    """fairseq-interactive's parsed options as the config a ``Translator`` takes, the
    languages filled in from the data-bin where none were given (``language_pair``): the
    one place the core's commands (fconv-translate, fconv-serve, ``from_pretrained``) convert."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    pair = language_pair(str(args.data), getattr(args, "source_lang", None), getattr(args, "target_lang", None))
    args.source_lang, args.target_lang = pair["source_lang"], pair["target_lang"]
    with without_host_notices():
        return convert_namespace_to_omegaconf(args)


def inference_device(cfg) -> torch.device:
    """Where a model runs, as fairseq-interactive decides: the GPU when there is one,
    unless ``--cpu`` (``precision.on_the_cpu``)."""
    return torch.device("cpu" if precision.on_the_cpu(cfg.common.cpu) else "cuda")


def place_model(model, cfg, device: torch.device,
                cpu_bf16_units: Callable[[], Optional[str]] = precision.bf16_units) -> None:
    """The model in the precision ``precision.decoding_precision`` decides from ``--fp16`` or
    ``--bf16``, on ``device``."""
    asked = "--fp16" if cfg.common.fp16 else "--bf16" if cfg.common.bf16 else None
    half, note = precision.decoding_precision(asked, device.type == "cpu", has_int8_weights(model), "translating",
                                              cpu_bf16_units)
    if note:
        logger.info(note)
    if half == "--fp16":
        model.half()
    elif half == "--bf16":
        model.bfloat16()
    model.to(device)
