"""Export a trained checkpoint to ONNX: a directory that ``fconv-onnx-translate`` runs
with onnxruntime alone (no torch, no fairseq).

    fconv-export checkpoints/checkpoint_best.pt data-bin exported \\
        --tokenizer moses --bpe subword_nmt --bpe-codes codes [--int8]

The directory holds ``encoder.onnx``, ``decoder.onnx`` (one incremental step, its state
explicit: ``graphs.py``), both vocabularies (one symbol per line, in index order), the
BPE codes, and ``manifest.json`` (architecture, dimensions, special symbols, the
tokenizer's and BPE's settings). ``--int8`` exports the model's int8 form, as
fconv-quantize makes it: int8 weights with a scale per output row, activations
quantised per row, exact int32 sums (ONNX's MatMulInteger) and the attention's sums in
float64, so onnxruntime computes what torch's int8 model does.
"""

import argparse
import contextlib
import logging
import os
import shutil
import sys
import warnings

import numpy
import torch
from fconv_onnx import manifest as spec

from .. import compat
from ..checkpoint_io import directory_atomically
from ..errors import FConvError
from ..inference import Translator
from .graphs import DecoderStepGraph, EncoderGraph, exportable_copy

OPSET = 18


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fconv-export", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a float32 checkpoint of the plugin's (or fairseq's) fconv model")
    parser.add_argument("data_bin", help="the fairseq-preprocess directory the model was trained on (its dictionaries)")
    parser.add_argument("out_dir", help="the directory to write (must not exist, or be empty)")
    parser.add_argument("--source-lang", help="as fairseq's option; default: the checkpoint's")
    parser.add_argument("--target-lang", help="as fairseq's option; default: the checkpoint's")
    parser.add_argument("--tokenizer", choices=["moses"], help="as fairseq-interactive's --tokenizer")
    parser.add_argument("--moses-no-dash-splits", action="store_true", help="as fairseq's option")
    parser.add_argument("--moses-no-escape", action="store_true", help="as fairseq's option")
    parser.add_argument("--bpe", choices=["subword_nmt"], help="as fairseq-interactive's --bpe")
    parser.add_argument("--bpe-codes", help="subword-nmt's codes file (copied into the directory)")
    parser.add_argument("--bpe-separator", default="@@", help="as fairseq's option (default @@)")
    parser.add_argument("--int8", action="store_true", help="the int8 form fconv-quantize makes (per-row scales, float64 attention sums)")
    return parser.parse_args(argv)


def check_args(args) -> None:
    """Every problem with the command line as one FConvError, before anything is loaded."""
    if not os.path.isfile(args.checkpoint):
        raise FConvError(f"{args.checkpoint}: no such checkpoint file")
    if not os.path.isdir(args.data_bin):
        raise FConvError(f"{args.data_bin}: no such directory; give the fairseq-preprocess output the model was trained on")
    if os.path.exists(args.out_dir) and (not os.path.isdir(args.out_dir) or os.listdir(args.out_dir)):
        raise FConvError(f"{args.out_dir} exists and is not an empty directory; give a new one (nothing was overwritten)")
    if args.bpe and not args.bpe_codes:
        raise FConvError("--bpe subword_nmt needs --bpe-codes (the codes file the training data was encoded with)")
    if args.bpe_codes and not args.bpe:
        raise FConvError("--bpe-codes given without --bpe; add --bpe subword_nmt")
    if args.bpe_codes and not os.path.isfile(args.bpe_codes):
        raise FConvError(f"{args.bpe_codes}: no such BPE codes file")


def load_model(checkpoint: str, data_bin: str, source_lang: str = None, target_lang: str = None):
    """The checkpoint's float32 fconv model, its task (dictionaries read from ``data_bin``) and
    arch, loaded by the inference core as every other face loads it."""
    translator = Translator.from_pretrained(checkpoint, os.path.abspath(data_bin), source_lang=source_lang,
                                            target_lang=target_lang, cpu=True)  # traced on the CPU
    model = translator.models[0]
    if not hasattr(model, "quantize_int8_"):
        raise FConvError(f"{checkpoint} holds a {type(model).__name__}, not an fconv model")
    if translator.int8:
        raise FConvError(f"{checkpoint} is an fconv-quantize (int8) checkpoint; export the float32 checkpoint "
                         "it came from, with --int8 for int8 weights")
    return model, translator.task, translator.arch


def _example_inputs(model, task):
    """Two left-padded sentences and the newest token of two hypotheses each: shapes for tracing."""
    src, tgt = task.source_dictionary, task.target_dictionary
    first = src.nspecial
    src_tokens = torch.tensor([[src.pad(), src.pad(), first, first + 1, src.eos()],
                               [first, first + 1, first + 2, first + 3, src.eos()]])
    tokens = torch.tensor([[tgt.nspecial, tgt.nspecial + 1]] * 2)  # 2 sentences x 2 copies
    return src_tokens, tokens


def int_mm_as_matmul_integer(a, b):
    """torch's int8 x int8 -> int32 product (``Int8Weight``) as ONNX's MatMulInteger, both
    operands shifted to uint8 with zero point 128: the same exact int32 sums on every CPU.
    onnxruntime's uint8 x int8 kernel sums pairs in saturating int16 on CPUs without VNNI
    (AVX2 alone: off by up to 10^5 on random rows, and another best hypothesis), its uint8 x
    uint8 kernel does not, and it is as fast there (0.58 against 0.81 ms for 40 x 512 x 1024);
    its int8 x int8 kernel was 40x slower at fc3's size. The weights' shift is folded into
    the constant when onnxruntime loads the graph."""
    import onnx
    from onnxscript import opset18 as op

    def scalar(name, data_type):
        return op.Constant(value=onnx.helper.make_tensor(name, data_type, [], [128]))

    def shifted(x, name):
        return op.Cast(op.Add(op.Cast(x, to=onnx.TensorProto.INT16), scalar(name, onnx.TensorProto.INT16)),
                       to=onnx.TensorProto.UINT8)

    zero_point = scalar("zero_point", onnx.TensorProto.UINT8)
    return op.MatMulInteger(shifted(a, "shift"), shifted(b, "weight_shift"), zero_point, zero_point)


def export_graphs(model, task, directory: str, int8: bool = False) -> list:
    """Write encoder.onnx and decoder.onnx (with ``int8``: of the model's int8 form);
    returns the decoder's state shapes."""
    model = exportable_copy(model, int8=int8)
    translations = {torch.ops.aten._int_mm.default: int_mm_as_matmul_integer}
    encoder, step = EncoderGraph(model), DecoderStepGraph(model)
    src_tokens, tokens = _example_inputs(model, task)
    max_source = int(min(model.encoder.max_positions(), 100_000))
    batch, src_len = torch.export.Dim("batch", min=1), torch.export.Dim("src_len", min=1, max=max_source)
    # a sentence's hypotheses: traced with two or more (one more product per sentence), the
    # graph takes one as well (beam 1)
    copies = torch.export.Dim("copies", min=2)
    rows_now, rows_before = torch.export.Dim("rows", min=1), torch.export.Dim("previous_rows", min=1)
    with torch.no_grad(), _loggers_at(_EXPORTER_LOGS), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            encoder, (src_tokens,), os.path.join(directory, spec.ENCODER_FILE), dynamo=True, opset_version=OPSET,
            input_names=spec.ENCODER_INPUTS, output_names=spec.ENCODER_OUTPUTS,
            dynamic_shapes={"src_tokens": {0: batch, 1: src_len}}, external_data=False, verbose=False,
            custom_translation_table=translations,
        )
        # the step is traced with the source as the encoder graph gives it (int8's float64 keys and
        # values: eager torch keeps float32 where its compiled loops run)
        traced_types = _output_dtypes(os.path.join(directory, spec.ENCODER_FILE))
        keys, values, length_scale = (output.to(dtype) for output, dtype in zip(encoder(src_tokens), traced_types))
        padding_mask = src_tokens.eq(task.source_dictionary.pad())
        position = torch.tensor(model.decoder.padding_idx + 3)  # the third target token's
        copied = (src_tokens,) if step.copying else ()
        rows = tokens.numel()
        search = (torch.zeros(len(task.target_dictionary)), torch.zeros(*tokens.shape), torch.arange(rows).flip(0))
        states = [torch.zeros(rows + 1, k * channels) for k, channels in step.state_shapes()]  # a row more: the
        # previous step's rows are as many as its hypotheses, before sentences left
        state_inputs, state_outputs = spec.state_names(len(states))
        torch.onnx.export(
            step, (tokens, position, keys, values, length_scale, padding_mask, *copied, *search, *states),
            os.path.join(directory, spec.DECODER_FILE),
            dynamo=True, opset_version=OPSET,
            input_names=[*spec.decoder_inputs(step.copying), *state_inputs],
            output_names=[*spec.DECODER_OUTPUTS, *state_outputs],
            dynamic_shapes=({0: batch, 1: copies}, None, {0: batch, 2: src_len}, {0: batch, 1: src_len}, {0: batch},
                            {0: batch, 1: src_len},
                            (*({0: batch, 1: src_len} for _ in copied), None, {0: batch, 1: copies}, {0: rows_now},
                             *({0: rows_before} for _ in states))),
            external_data=False, verbose=False, custom_translation_table=translations,
        )
    for name in (spec.ENCODER_FILE, spec.DECODER_FILE):
        _strip_node_metadata(os.path.join(directory, name))
    return step.state_shapes()


def _output_dtypes(path: str) -> list:
    """The torch dtypes of an ONNX graph's outputs."""
    import onnx
    from onnx.helper import tensor_dtype_to_np_dtype

    graph = onnx.load(path, load_external_data=False).graph
    return [torch.from_numpy(numpy.zeros(0, tensor_dtype_to_np_dtype(output.type.tensor_type.elem_type))).dtype
            for output in graph.output]


def _strip_node_metadata(path: str) -> None:
    """Drop what the exporter notes on every node (the Python stack that made it, its FX
    name): about 1 kB a node, more than a small model's int8 weights; the graph is unchanged."""
    import onnx

    graph = onnx.load(path)
    for node in graph.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    onnx.save(graph, path)


@contextlib.contextmanager
def _loggers_at(levels: dict):
    """Loggers (by name, "" for the root) at other levels for a while: the exporter's and the
    quantiser's progress lines say nothing a user acts on."""
    saved = {name: logging.getLogger(name).level for name in levels}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


# (torch.onnx's registry warns that torchvision's operators are missing: this model has none)
_EXPORTER_LOGS = {"onnx_ir": logging.WARNING, "onnxscript": logging.WARNING, "torch.onnx": logging.WARNING,
                  "torch.onnx._internal.exporter._registration": logging.ERROR}


def write_vocabulary(dictionary, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for symbol in dictionary.symbols:
            f.write(symbol + "\n")


def manifest(args, model, task, arch, state_shapes) -> spec.Manifest:
    src, tgt = task.source_dictionary, task.target_dictionary
    languages = getattr(task, "cfg", None)  # fairseq's translation task; a bare (test) task has none
    source_lang, target_lang = getattr(languages, "source_lang", None), getattr(languages, "target_lang", None)
    encoder, decoder = model.encoder, model.decoder

    def positions(limit):
        return None if limit == float("inf") else int(limit)

    return spec.Manifest(
        arch=arch,
        source_lang=source_lang,
        target_lang=target_lang,
        dimensions=spec.Dimensions(
            encoder_embed_dim=encoder.embed_tokens.embedding_dim,
            decoder_embed_dim=decoder.embed_tokens.embedding_dim,
            source_vocabulary=len(src),
            target_vocabulary=len(tgt),
            decoder_states=[tuple(shape) for shape in state_shapes],
        ),
        max_source_positions=positions(encoder.max_positions()),
        max_target_positions=positions(decoder.max_positions()),
        symbols=spec.Symbols(pad=tgt.pad(), eos=tgt.eos(), unk=tgt.unk(), bos=tgt.bos(),
                             source_pad=src.pad(), source_eos=src.eos(), source_unk=src.unk()),
        tokenizer=None if not args.tokenizer else spec.MosesOptions(
            source_lang=source_lang, target_lang=target_lang,
            aggressive_dash_splits=not args.moses_no_dash_splits, escape=not args.moses_no_escape,
        ),
        bpe=None if not args.bpe else spec.BPEOptions(separator=args.bpe_separator),
        int8=bool(args.int8),
        exported_with={"torch": torch.__version__, "opset": OPSET},
        copying=getattr(decoder, "pointer_generator", None) is not None,
    )


def export(args) -> spec.Manifest:
    """fconv-export: check the command line, load the checkpoint, write the directory."""
    check_args(args)
    model, task, arch = load_model(args.checkpoint, args.data_bin, args.source_lang, args.target_lang)
    return export_model(model, task, args.out_dir, args, arch)


def export_model(model, task, out_dir: str, options, arch: str) -> spec.Manifest:
    """Write the whole directory, or nothing: it is built beside ``out_dir`` and renamed.

    ``options``: fconv-export's (``parse_args``): tokenizer, BPE, int8."""
    model.eval()
    with directory_atomically(out_dir) as building:
        state_shapes = export_graphs(model, task, building, int8=bool(options.int8))
        description = manifest(options, model, task, arch, state_shapes)
        write_vocabulary(task.source_dictionary, os.path.join(building, description.source_vocabulary))
        write_vocabulary(task.target_dictionary, os.path.join(building, description.target_vocabulary))
        if options.bpe_codes:
            shutil.copyfile(options.bpe_codes, os.path.join(building, description.bpe.codes))
        description.write(building)
    return description


# what the export imports, by the package of the onnx extra (setup.py) that installs it
PARTS = {"onnx": "onnx", "onnxscript": "onnxscript"}


def main(argv=None) -> None:
    compat.console.require_extra("fconv-export", "onnx", PARTS)  # before a checkpoint is read
    args = parse_args(argv)
    compat.install()  # checkpoints load safely on torch >= 2.6; errors print as one line
    compat.console.command_logging()  # fairseq's log format, without hydra's DEBUG lines
    description = export(args)
    size = sum(os.path.getsize(os.path.join(args.out_dir, name)) for name in os.listdir(args.out_dir))
    print(f"fconv_plugin: wrote {args.out_dir}: {description.arch}, {'int8' if args.int8 else 'float32'}, "
          f"{size / 2**20:.1f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
