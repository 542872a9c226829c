"""The tiny tasks the tests train on, and how the tests run fairseq's own command-line tools.

Plain helpers, imported by the test modules; the session fixtures that train on these
tasks are in tests/conftest.py, once for the whole session."""

import random
import re
import subprocess
import sys
from pathlib import Path

import fconv_plugin
from tests import warm_commands

PLUGIN_DIR = str(Path(fconv_plugin.__file__).parent)
BIN_DIR = Path(sys.executable).parent  # the console scripts themselves (what a fault test kills at a moment)

SMALL_MODEL = [
    "--arch", "fconv_iwslt_de_en",
    "--encoder-layers", "[(64, 3)] * 2", "--decoder-layers", "[(64, 3)] * 2",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--decoder-out-embed-dim", "32",
]
# the paper's recipe: NAG, momentum 0.99, gradient norm clipped at 0.1
PAPER_OPTIMIZER = ["--optimizer", "nag", "--momentum", "0.99", "--clip-norm", "0.1", "--lr", "0.25"]
# the session's 20-update run (conftest.twenty_update_run), for the tests that train on from it
TWENTY_UPDATES = [*SMALL_MODEL, "--optimizer", "adam", "--lr", "0.003", "--max-tokens", "300",
                  "--save-interval-updates", "10", "--seed", "1", "--no-progress-bar", "--log-format", "simple"]


def run_tool(tool: str, *args, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run one of this environment's fairseq or fconv commands, in a process of its own
    (forked from one that imported torch & co. already: tests/warm_commands.py)."""
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 900)  # a hung tool fails the test instead of the whole run
    result = subprocess.run([str(warm_commands.bin_dir() / tool), *map(str, args)], capture_output=True, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"{tool} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def interactive_answers(data_bin, checkpoint, lines, *options, beam=5):
    """fairseq-interactive's D- (text, score), H- (encoded: the text before decoding) and A-
    lines for ``lines``, by input order."""
    result = run_tool("fairseq-interactive", data_bin, "--user-dir", PLUGIN_DIR, "--path", checkpoint,
                      "--beam", str(beam), *options, input="\n".join(lines) + "\n")
    answers, hypotheses = {}, {}
    for line in result.stdout.splitlines():
        if line.startswith("D-"):
            number, score, text = line[2:].split("\t")
            answers[int(number)] = {"text": text, "score": float(score)}
        if line.startswith("H-"):
            number, _, encoded = line[2:].split("\t")
            hypotheses.setdefault(int(number), encoded)  # the best, printed first
        if line.startswith("A-"):
            number, pairs = line[2:].split("\t")
            answers[int(number)]["alignment"] = [[int(x) for x in p.split("-")] for p in pairs.split()]
    return [dict(answers[i], encoded=hypotheses[i]) for i in range(len(lines))]


def write_corpus(directory: Path, make_pair, sizes=(("train", 600), ("valid", 60), ("test", 40)), seed: int = 1):
    """``make_pair(rng)`` -> (source words, target words), written as train/valid/test."""
    rng = random.Random(seed)
    for split, count in sizes:
        with open(directory / f"{split}.src", "w") as src, open(directory / f"{split}.tgt", "w") as tgt:
            for _ in range(count):
                source, target = make_pair(rng)
                src.write(" ".join(source) + "\n")
                tgt.write(" ".join(target) + "\n")


def word_translation_pair(rng):
    """Source words s0..s29, target words t0..t29 in the same order: learnable in seconds."""
    words = [rng.randrange(30) for _ in range(rng.randint(3, 9))]
    return [f"s{w}" for w in words], [f"t{w}" for w in words]


def preprocess(text_dir: Path, dest: Path, *extra) -> Path:
    run_tool(
        "fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt",
        "--trainpref", text_dir / "train", "--validpref", text_dir / "valid", "--testpref", text_dir / "test",
        "--destdir", dest, "--workers", "1", *extra,
    )
    return dest


def valid_losses(log: str):
    return [float(x) for x in re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", log)]


RARE = 400


def unk_pair(rng):
    source, target = [], []
    for _ in range(rng.randint(4, 8)):
        w = rng.randrange(20)
        source.append(f"s{w}"), target.append(f"t{w}")
    for _ in range(rng.randint(1, 2)):
        position, r = rng.randrange(len(source) + 1), rng.randrange(RARE)
        word = (f"r{r}", f"q{r}") if rng.random() < 0.5 else (f"N{r}", f"N{r}")
        source.insert(position, word[0]), target.insert(position, word[1])
    return source, target


NAMES = 1000  # names written in training; NAMES..NAMES+399 only read
TINY = [
    "--encoder-layers", "[(64, 3)] * 2", "--decoder-layers", "[(64, 3)] * 2",
    "--encoder-embed-dim", "48", "--decoder-embed-dim", "48", "--decoder-out-embed-dim", "48",
]


def _pair(rng, named, other):
    words = [f"c{rng.randrange(20)}" for _ in range(rng.randint(3, 6))]
    name, second = f"n{rng.randrange(*named)}", f"n{rng.randrange(*other)}"
    source = list(words)
    first_at = rng.randrange(1, len(words) + 1)
    source.insert(first_at, name)
    source.insert(rng.randrange(first_at + 1, len(source) + 1), second)
    return source, [name, *words[:2]]


def training_pair(rng):
    return _pair(rng, (0, NAMES), (NAMES, NAMES + 400))


def held_out_pair(rng):
    return _pair(rng, (NAMES, NAMES + 400), (NAMES, NAMES + 400))


def train_names_model(data_bin, save_dir, arch):
    run_tool(
        "fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, "--arch", arch, *TINY,
        "--optimizer", "adam", "--lr", "0.003", "--clip-norm", "0.1", "--dropout", "0.1",
        "--max-tokens", "800", "--max-update", "400", "--save-dir", save_dir, "--seed", "1",
        "--no-progress-bar", "--no-epoch-checkpoints", "--required-batch-size-multiple", "1",
    )
    return save_dir / "checkpoint_best.pt"


