"""Write an int8 copy of a trained checkpoint, for generation on CPUs.

    fconv-quantize checkpoints/checkpoint_best.pt checkpoints/int8.pt
    fairseq-generate data-bin --user-dir fconv_plugin --path checkpoints/int8.pt ...

Every weight-normalised matrix product (convolutions, attention projections, fc1,
fc2, fc3, residual projections) is stored as int8 rows with per-row scales
and so are the embedding tables, except a decoder table shared with fc3: each layer
is swapped for its int8 form (``fconv_plugin/deployment/int8.py``). The optimizer state is
left out (an int8 model cannot train), and the checkpoint's model options gain
``int8_weights``, so fairseq-generate, fairseq-interactive and the hub build the int8
model from it with ``--user-dir`` and nothing else.
"""

import argparse
import os
import sys

import torch
from fairseq import checkpoint_utils

from .. import compat
from ..checkpoint_io import read_checkpoint_file, write_atomically
from ..errors import FConvError


def _training_data(state: dict):
    """The data-bin path the checkpoint was trained on, as saved (often relative)."""
    task = (state.get("cfg") or {}).get("task")
    if isinstance(task, dict):
        return task.get("data")
    return getattr(task, "data", None) or getattr(state.get("args"), "data", None)


def quantize_checkpoint(source: str, destination: str, data: str = None) -> dict:
    """Write the int8 checkpoint; returns the sizes in bytes (input, output, fp32 weights)."""
    if not os.path.isfile(source):
        raise FConvError(f"{source}: no such checkpoint file")
    if os.path.exists(destination):
        raise FConvError(f"{destination} exists; give a new file name (nothing was overwritten)")
    state = read_checkpoint_file(source)  # as saved: fairseq rewrites options when it loads
    model_options = (state.get("cfg") or {}).get("model") or state.get("args")
    if not isinstance(model_options, argparse.Namespace):
        raise FConvError(f"{source} has no model options fconv-quantize knows; load and save it with fairseq 0.12 first")
    if getattr(model_options, "int8_weights", False):
        raise FConvError(f"{source} is already an int8 checkpoint")
    if data is None:
        data = _training_data(state)
        if data and not os.path.isdir(data):
            raise FConvError(f"{source} names its data-bin as {data!r}, which is not there from {os.getcwd()}; "
                             "run fconv-quantize where training ran, or give --data DATA_BIN")
    elif not os.path.isdir(data):
        raise FConvError(f"--data {data}: no such directory; give the fairseq-preprocess output the model was trained on")
    overrides = {"data": data} if data else {}
    models, _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([source], arg_overrides=overrides)
    model = models[0]
    if not hasattr(model, "quantize_int8_"):
        raise FConvError(f"{source} holds a {type(model).__name__}, not an fconv model")
    float_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    model.eval()
    model.quantize_int8_()
    model_options.int8_weights = True
    state["model"] = model.state_dict()
    state["last_optimizer_state"] = None
    write_atomically(destination, lambda f: torch.save(state, f))  # whole or not at all
    return {"input": os.path.getsize(source), "output": os.path.getsize(destination), "float_weights": float_bytes}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", help="a checkpoint of the plugin's (or fairseq's) fconv model")
    parser.add_argument("output", help="where the int8 checkpoint goes (a new file)")
    parser.add_argument("--data", help="the fairseq-preprocess directory (its dictionaries); default: the one "
                                       "the checkpoint names, which is often relative to where training ran")
    args = parser.parse_args(argv)
    compat.install()  # a fairseq command of the plugin's own: checkpoints load safely, errors print as one line
    compat.console.command_logging()  # fairseq's log format, without hydra's DEBUG lines
    sizes = quantize_checkpoint(args.input, args.output, args.data)
    print(f"fconv_plugin: wrote {args.output}: {sizes['output'] / 2**20:.1f} MB (input {sizes['input'] / 2**20:.1f} MB, "
          f"float32 weights alone {sizes['float_weights'] / 2**20:.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
