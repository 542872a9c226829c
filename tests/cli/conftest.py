"""A tiny translation task run through fairseq's own command-line tools."""

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fconv_plugin

PLUGIN_DIR = str(Path(fconv_plugin.__file__).parent)
BIN_DIR = Path(sys.executable).parent

SMALL_MODEL = [
    "--arch", "fconv_iwslt_de_en",
    "--encoder-layers", "[(64, 3)] * 2", "--decoder-layers", "[(64, 3)] * 2",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--decoder-out-embed-dim", "32",
]
# the paper's recipe: NAG, momentum 0.99, gradient norm clipped at 0.1
PAPER_OPTIMIZER = ["--optimizer", "nag", "--momentum", "0.99", "--clip-norm", "0.1", "--lr", "0.25"]


def run_tool(tool: str, *args, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run one of fairseq's console scripts from this environment."""
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 900)  # a hung tool fails the test instead of the whole run
    result = subprocess.run([str(BIN_DIR / tool), *map(str, args)], capture_output=True, **kwargs)
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


@pytest.fixture(scope="session")
def word_task(tmp_path_factory):
    """Binarised data of the tiny task."""
    root = tmp_path_factory.mktemp("word_task")
    write_corpus(root, word_translation_pair)
    return root, preprocess(root, root / "data-bin")


@pytest.fixture(scope="session")
def trained_model(word_task):
    """A small model trained through fairseq-train --user-dir; (data-bin, checkpoint dir, log)."""
    root, data_bin = word_task
    save_dir = root / "checkpoints"
    result = run_tool(
        "fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER,
        "--dropout", "0.1", "--max-tokens", "300", "--max-epoch", "10", "--save-dir", save_dir,
        "--seed", "1", "--no-progress-bar", "--log-format", "simple", "--no-epoch-checkpoints",
    )
    return data_bin, save_dir, result.stdout + result.stderr


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


@pytest.fixture(scope="session")
def unk_model(tmp_path_factory):
    """A word-level model whose rare words are only ever <unk>: (text dir, data-bin, checkpoint)."""
    root = tmp_path_factory.mktemp("unk_task")
    write_corpus(root, unk_pair, sizes=(("train", 1500), ("valid", 60), ("test", 80)), seed=5)
    data_bin = preprocess(root, root / "data-bin", "--thresholdsrc", "3", "--thresholdtgt", "3")
    run_tool(
        "fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER,
        "--dropout", "0.1", "--max-tokens", "400", "--max-epoch", "12", "--save-dir", root / "checkpoints",
        "--seed", "1", "--no-progress-bar", "--no-epoch-checkpoints",
    )
    return root, data_bin, root / "checkpoints" / "checkpoint_best.pt"


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


@pytest.fixture(scope="session")
def name_task(tmp_path_factory):
    """A synthetic summarisation task where the summary names the first name of the source:
    "c3 c7 n12 c1 n1345 c9" -> "n12 c3 c7". In training the names to output are n0..n999,
    each seen once or twice, and the second names n1000..n1399; the test's names are all
    n1000..n1399, which the model has read but never written. (root, data-bin, the
    trained copying checkpoint.)"""
    root = tmp_path_factory.mktemp("names")
    write_corpus(root, training_pair, sizes=(("train", 1600), ("valid", 60)), seed=7)
    write_corpus(root, held_out_pair, sizes=(("test", 60),), seed=8)
    data_bin = preprocess(root, root / "data-bin", "--joined-dictionary")
    copying = train_names_model(data_bin, root / "copy", "fconv_gigaword_copy")
    return root, data_bin, copying
