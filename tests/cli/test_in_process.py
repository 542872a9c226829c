"""fairseq's commands run in this process, as fairseq's own tests/test_binaries.py runs them.

``preprocess.main``, ``train.main``, ``generate.main``, then ``interactive.main`` with
``sys.stdin`` an ``io.StringIO``, each parsed from an argument list that names the plugin
with ``--user-dir``: the flows that suite runs for fconv. The references are fairseq's
own: every valid sentence translated by generate, one answer per line from interactive,
and where the search is deterministic the same hypothesis from both (interactive reads
the raw text, generate the binarised subset).
"""

import io
import logging
import re
import sys

import pytest
from fairseq import checkpoint_utils, options
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq_cli import generate, interactive, preprocess, train

import fconv_plugin
from tests.tasks import PAPER_OPTIMIZER, PLUGIN_DIR, SMALL_MODEL, word_translation_pair, write_corpus
pytestmark = pytest.mark.slow

SIZES = (("train", 300), ("valid", 21), ("test", 10))  # 21: not a multiple of 8


def _preprocess(text_dir, dest, *extra):
    parser = options.get_preprocessing_parser()
    args = parser.parse_args([
        "--user-dir", PLUGIN_DIR, "--source-lang", "src", "--target-lang", "tgt",
        "--trainpref", str(text_dir / "train"), "--validpref", str(text_dir / "valid"),
        "--testpref", str(text_dir / "test"), "--destdir", str(dest), "--workers", "1", *extra,
    ])
    preprocess.main(args)
    return dest


def _train(data_dir, save_dir, *extra):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(data_dir), "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER, "--dropout", "0.1",
        "--max-tokens", "300", "--max-epoch", "2", "--save-dir", str(save_dir), "--no-progress-bar",
        "--no-epoch-checkpoints", "--num-workers", "0", "--seed", "1", *extra,
    ])
    train.main(args)
    return save_dir / "checkpoint_last.pt"


def _lines(output: str, prefix: str):
    found = {}
    for line in output.splitlines():
        if line.startswith(prefix + "-"):
            number, *fields = line[len(prefix) + 1:].split("\t")
            found.setdefault(int(number), fields[-1])  # the best first
    return found


def _generate_then_interactive(capsys, data_dir, checkpoint, sources, *extra):
    """generate.main on the valid subset, then interactive.main on its source lines from an
    io.StringIO, with the same options (as fairseq's tests/utils.py generate_main)."""
    parser = options.get_generation_parser()
    args = options.parse_args_and_arch(parser, [
        str(data_dir), "--user-dir", PLUGIN_DIR, "--path", str(checkpoint), "--beam", "3", "--batch-size", "64",
        "--max-len-b", "5", "--gen-subset", "valid", "--no-progress-bar", "--num-workers", "0", *extra,
    ])
    capsys.readouterr()
    generate.main(args)
    generated = capsys.readouterr().out
    args.buffer_size = 0
    args.input = "-"
    args.batch_size = None
    stdin = sys.stdin
    sys.stdin = io.StringIO("".join(line + "\n" for line in sources))
    try:
        interactive.main(args)
    finally:
        sys.stdin = stdin
    answered = capsys.readouterr().out
    return generated, answered


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("in_process")
    write_corpus(root, word_translation_pair, sizes=SIZES, seed=3)
    return root


@pytest.fixture(scope="module")
def plain(corpus):
    """A model trained in this process: (data-bin, checkpoint)."""
    data_bin = _preprocess(corpus, corpus / "data-bin")
    return data_bin, _train(data_bin, corpus / "plain")


def _check_every_sentence(generated, answered, sources, same_hypotheses=True):
    valid = len(sources)
    hypotheses, answers = _lines(generated, "H"), _lines(answered, "H")
    assert sorted(_lines(generated, "S")) == list(range(valid))
    assert sorted(hypotheses) == list(range(valid))
    assert sorted(answers) == list(range(valid))
    if same_hypotheses:
        assert [answers[i] for i in range(valid)] == [hypotheses[i] for i in range(valid)]


def test_training_in_process_builds_the_plugins_model(plain):
    _, checkpoint = plain
    assert ARCH_MODEL_REGISTRY["fconv_iwslt_de_en"] is fconv_plugin.FConvModel
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)])
    assert type(models[0]) is fconv_plugin.FConvModel


@pytest.mark.parametrize("extra, deterministic", [
    ([], True),
    (["--print-alignment"], True),
    (["--nbest", "2"], True),
    (["--unkpen", "5"], True),
    (["--no-repeat-ngram-size", "2"], True),
    (["--diverse-beam-groups", "3", "--diverse-beam-strength", "0.5"], True),
    (["--diversity-rate", "0.5", "--beam", "6"], True),
    (["--prefix-size", "2"], False),  # generate forces the reference's first tokens; interactive has none
    (["--sampling", "--temperature", "2", "--beam", "2", "--nbest", "2"], False),
    (["--sampling", "--sampling-topk", "3", "--beam", "2", "--nbest", "2"], False),
    (["--sampling", "--sampling-topp", "0.2", "--beam", "2", "--nbest", "2"], False),
], ids=lambda value: " ".join(value) if isinstance(value, list) else None)
def test_generation_options(capsys, corpus, plain, extra, deterministic):
    data_bin, checkpoint = plain
    sources = (corpus / "valid.src").read_text().splitlines()
    generated, answered = _generate_then_interactive(capsys, data_bin, checkpoint, sources, *extra)
    _check_every_sentence(generated, answered, sources, same_hypotheses=deterministic)
    if "--prefix-size" in extra:
        targets = (corpus / "valid.tgt").read_text().splitlines()
        hypotheses = _lines(generated, "H")
        for number, target in enumerate(targets):
            assert hypotheses[number].split()[:2] == target.split()[:2]


def test_raw_text_datasets(capsys, corpus):
    data_raw = _preprocess(corpus, corpus / "data-raw", "--dataset-impl", "raw")
    checkpoint = _train(data_raw, corpus / "raw", "--dataset-impl", "raw")
    sources = (corpus / "valid.src").read_text().splitlines()
    generated, answered = _generate_then_interactive(capsys, data_raw, checkpoint, sources, "--dataset-impl", "raw")
    _check_every_sentence(generated, answered, sources)


def test_update_frequency(capsys, corpus, plain):
    data_bin, _ = plain
    checkpoint = _train(data_bin, corpus / "update_freq", "--update-freq", "3")
    sources = (corpus / "valid.src").read_text().splitlines()
    generated, answered = _generate_then_interactive(capsys, data_bin, checkpoint, sources)
    _check_every_sentence(generated, answered, sources)


def test_validation_with_bleu(capsys, caplog, corpus, plain):
    data_bin, _ = plain
    with caplog.at_level(logging.INFO):
        checkpoint = _train(
            data_bin, corpus / "eval_bleu", "--eval-bleu", "--eval-bleu-args", '{"beam": 2, "max_len_b": 10}',
            "--eval-bleu-detok", "space", "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric",
        )
    bleus = [float(b) for b in re.findall(r"valid on 'valid' subset .*\| bleu ([0-9.]+)", caplog.text)]
    assert len(bleus) == 2  # one validation per epoch
    sources = (corpus / "valid.src").read_text().splitlines()
    generated, answered = _generate_then_interactive(capsys, data_bin, checkpoint, sources)
    _check_every_sentence(generated, answered, sources)
