"""How fast fairseq-train trains a model here: seconds per update, measured on the real data.

    python speed_probe.py DATA_BIN --candidate NAME "FAIRSEQ-TRAIN OPTIONS" [--candidate ...] [--updates 4]
                          [--validation "VALIDATION OPTIONS" [--validation-batches N]]

Each candidate is the model, batch and precision options of the fairseq-train command the
example will run (``--required-batch-size-multiple`` too: it decides the batches). In one
process (fairseq and the plugin imported once) each candidate's model is built by fairseq's
own task and trained by fairseq's own ``Trainer`` (the plugin's host fixes installed, so
``--cpu --bf16`` trains in mixed precision as it will) on batches of the training data:
``WARMUP`` updates while the heap grows to hold the step's large tensors (their first steps
fault new pages in: tests/test_host_memory.py), then ``--updates`` timed. An update's time
follows its batch's padded tokens (source and target), and a few batches are not the epoch's
mix, so the time per padded token is scaled to the epoch's mean batch. With ``--validation``
(the run's own validation options: ``--eval-bleu`` and its arguments), each candidate also
times one pause as fairseq-train takes it inside the budget: a pass over the validation set
(fairseq's ``Trainer.valid_step``, with the task's BLEU generation) and a save (a checkpoint
written, then copied twice: the interval, best and last files); ``--validation-batches N`` times N
batches spread over the validation set instead of all, scaled to it by their padded tokens (a
large validation set's pass costs the probe a fraction of itself). Prints one line per
candidate, ``NAME <TAB> seconds per update <TAB> parameters`` (``<TAB> seconds per pause``
with ``--validation``), and on stderr the probe's own time. The examples take the updates a
budget buys from it, before training.
"""

import argparse
import logging
import os
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path

logging.disable(logging.WARNING)  # fairseq's and the plugin's INFO lines: the probe says what it measured
warnings.filterwarnings("ignore")  # hydra's and torch's deprecation notes, once per candidate

import torch  # noqa: E402
from fairseq import options, tasks  # noqa: E402
from fairseq.dataclass.utils import convert_namespace_to_omegaconf  # noqa: E402
from fairseq.file_io import PathManager  # noqa: E402
from fairseq.trainer import Trainer  # noqa: E402

PLUGIN = str(Path(__file__).resolve().parents[2] / "fconv_plugin")
WARMUP = 2  # updates untimed: the first call's allocations, and the heap growing to the batches' tensors


def padded_tokens(dataset, indices) -> int:
    """The source and target tokens of one batch of ``indices`` as collated: each side padded
    to its longest sentence."""
    return len(indices) * (int(dataset.src_sizes[indices].max()) + int(dataset.tgt_sizes[indices].max()))


def spread_sample(batch_tokens: list, wanted: int) -> tuple:
    """``wanted`` batch positions spread evenly over the batches (all of them when ``wanted`` is None
    or not fewer), and the factor that scales their padded tokens to all the batches'."""
    if wanted is None or wanted >= len(batch_tokens):
        return list(range(len(batch_tokens))), 1.0
    positions = sorted({int((i + 0.5) * len(batch_tokens) / wanted) for i in range(wanted)})
    return positions, sum(batch_tokens) / sum(batch_tokens[i] for i in positions)


def seconds_per_pause(trainer, task, cfg, batches: int = None) -> float:
    """One validation and save as fairseq-train pauses for them: the first validation subset's
    batches through ``Trainer.valid_step`` (the task's BLEU generation with ``--eval-bleu``), all or
    ``batches`` of them spread over the set and scaled to it, then a checkpoint written and copied
    to the other two names fairseq keeps."""
    subset = cfg.dataset.valid_subset.split(",")[0]
    task.load_dataset(subset, combine=False, epoch=1)
    iterator = trainer.get_valid_iterator(subset)
    dataset = task.dataset(subset)
    timed, scale = spread_sample([padded_tokens(dataset, b) for b in iterator.frozen_batches], batches)
    timed = set(timed)
    trainer.begin_valid_epoch(1)
    # every batch is collated, as the run collates them; only the timed ones are validated, and only their steps
    # are scaled to the set, after one untimed step on the first of them (its one-off costs are not every batch's)
    collating = stepping = 0.0
    samples = iter(iterator.next_epoch_itr(shuffle=False))
    warmed_up = False
    position = 0
    while True:
        started = time.perf_counter()
        sample = next(samples, None)
        collating += time.perf_counter() - started
        if sample is None:
            break
        if position in timed:
            if not warmed_up:
                trainer.valid_step(sample)
                warmed_up = True
            started = time.perf_counter()
            trainer.valid_step(sample)
            stepping += time.perf_counter() - started
        position += 1
    validating = collating + stepping * scale
    started = time.perf_counter()
    # beside the run's checkpoints (the same disk), copied as fairseq-train copies them (PathManager.copy: the
    # plugin's atomic copy where --user-dir loaded it); the files' removal is not timed
    with tempfile.TemporaryDirectory(prefix="speed-probe-", dir=os.getcwd()) as directory:
        first = Path(directory) / "checkpoint_1_1.pt"
        trainer.consolidate_optimizer()  # as fairseq's checkpoint_utils.save_checkpoint does first
        trainer.save_checkpoint(str(first), {"train_iterator": {"epoch": 1}, "val_loss": None})
        for name in ("checkpoint_best.pt", "checkpoint_last.pt"):
            PathManager.copy(str(first), str(Path(directory) / name), overwrite=True)
        saving = time.perf_counter() - started
    return validating + saving


def seconds_per_update(data_bin: str, train_options: str, updates: int, validation_options: str = None,
                       validation_batches: int = None) -> tuple:
    import fconv_plugin.compat
    from fconv_plugin import host_memory

    fconv_plugin.compat.install()  # as --user-dir does in fairseq-train: --cpu --bf16 trains in mixed precision
    host_memory.keep_freed_memory()  # as fairseq-train does on the CPU (compat/cpu_training_memory)
    parser = options.get_training_parser()
    validation = shlex.split(validation_options) if validation_options is not None else ["--disable-validation"]
    args = options.parse_args_and_arch(parser, [data_bin, "--user-dir", PLUGIN, *shlex.split(train_options),
                                                "--no-save", *validation, "--seed", "1"])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset(cfg.dataset.train_subset, combine=False, epoch=1)
    model, criterion = task.build_model(cfg.model), task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    dataset = task.dataset(cfg.dataset.train_subset)
    iterator = task.get_batch_iterator(
        dataset=dataset, max_tokens=cfg.dataset.max_tokens,
        max_sentences=cfg.dataset.batch_size, max_positions=(1024, 1024), ignore_invalid_inputs=True,
        required_batch_size_multiple=cfg.dataset.required_batch_size_multiple, seed=1,
    )
    if not iterator.frozen_batches:
        sys.exit(f"speed probe: {data_bin} has no training batch within the model's positions; check --max-tokens")
    epoch_mean = sum(padded_tokens(dataset, b) for b in iterator.frozen_batches) / len(iterator.frozen_batches)
    batches = iterator.next_epoch_itr(shuffle=True)
    samples = [next(batches) for _ in range(min(WARMUP + updates, len(iterator.frozen_batches)))]
    for sample in samples[:WARMUP]:
        trainer.train_step([sample])
    timed = samples[WARMUP:] or samples[-1:]
    started = time.perf_counter()
    for sample in timed:
        trainer.train_step([sample])
    seconds = time.perf_counter() - started
    tokens = sum(padded_tokens(dataset, sample["id"].numpy()) for sample in timed)
    parameters = sum(p.numel() for p in model.parameters())
    pause = seconds_per_pause(trainer, task, cfg, validation_batches) if validation_options is not None else None
    return seconds / tokens * epoch_mean, parameters, pause


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_bin")
    parser.add_argument("--candidate", nargs=2, action="append", metavar=("NAME", "OPTIONS"), required=True)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--validation", metavar="OPTIONS", help="the run's validation options: time one pause too")
    parser.add_argument("--validation-batches", type=int, metavar="N",
                        help="time N validation batches spread over the set, scaled to it (default: all)")
    args = parser.parse_args(argv)
    if args.validation_batches is not None and (args.validation is None or args.validation_batches < 1):
        parser.error("--validation-batches takes a whole number above 0, beside --validation")
    started = time.perf_counter()
    torch.manual_seed(1)
    for name, train_options in args.candidate:
        seconds, parameters, pause = seconds_per_update(args.data_bin, train_options, args.updates, args.validation,
                                                        args.validation_batches)
        print(f"{name}\t{seconds:.4f}\t{parameters}" + ("" if pause is None else f"\t{pause:.2f}"), flush=True)
    print(f"speed probe: {len(args.candidate)} candidate(s), {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
