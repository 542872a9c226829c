"""fairseq's commands use every sentence of a subset whatever the batching (fairseq #5036).

The subsets here hold 60 sentences, not a multiple of fairseq's default
--required-batch-size-multiple (8): fairseq 0.12 alone translates 56 of them with
--batch-size 7, 32 or 33 and 59 with --batch-size 1. The references are the subset's own
text files (every id, every sentence) and losses summed by hand, sentence by sentence,
from the raw text.
"""

import math
import re

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.data import Dictionary

from fconv_plugin import FConvModel
from tests.tasks import PAPER_OPTIMIZER, PLUGIN_DIR, SMALL_MODEL, run_tool
pytestmark = pytest.mark.slow

VALID_SIZE = 60  # tests/cli/conftest.py's valid subsets
BATCHINGS = {
    "batch 1": ["--batch-size", "1"],
    "batch 7": ["--batch-size", "7"],
    "batch 32": ["--batch-size", "32"],
    "batch 33": ["--batch-size", "33"],
    "max-tokens 100": ["--max-tokens", "100"],
}


def _generate(data_bin, checkpoint, batching):
    result = run_tool("fairseq-generate", data_bin, "--user-dir", PLUGIN_DIR, "--path", checkpoint,
                      "--gen-subset", "valid", "--beam", "5", *batching)
    sources, hypotheses = {}, {}
    for line in result.stdout.splitlines():
        if line.startswith("S-"):
            number, text = line[2:].split("\t")
            sources[int(number)] = text
        if line.startswith("H-"):
            number, score, tokens = line[2:].split("\t")
            hypotheses[int(number)] = (tokens, float(score))
    return sources, hypotheses


@pytest.fixture(scope="module")
def models(trained_model, int8_checkpoint, name_task, copying_int8_checkpoint):
    """(data-bin, source text file, checkpoint) for a plain and a copying model, each in
    float32 and as fconv-quantize's int8 (the session's)."""
    data_bin, save_dir, _ = trained_model
    root, names_bin, copying = name_task
    return {"plain": (data_bin, data_bin.parent / "valid.src", save_dir / "checkpoint_best.pt"),
            "plain int8": (data_bin, data_bin.parent / "valid.src", int8_checkpoint),
            "copying": (names_bin, root / "valid.src", copying),
            "copying int8": (names_bin, root / "valid.src", copying_int8_checkpoint)}


@pytest.mark.parametrize("model", ["plain", "plain int8", "copying", "copying int8"])
def test_fairseq_generate_translates_every_sentence_the_same_way_in_any_batching(models, model):
    data_bin, text, checkpoint = models[model]
    dictionary = Dictionary.load(str(data_bin / "dict.src.txt"))  # S-lines show unknown words as <unk>
    expected_sources = [dictionary.string(dictionary.encode_line(line, add_if_not_exist=False))
                        for line in text.read_text().splitlines()]
    assert len(expected_sources) == VALID_SIZE
    outputs = {name: _generate(data_bin, checkpoint, options) for name, options in BATCHINGS.items()}
    for name, (sources, hypotheses) in outputs.items():
        assert sorted(sources) == list(range(VALID_SIZE)), name
        assert sorted(hypotheses) == list(range(VALID_SIZE)), name
        assert [sources[i] for i in range(VALID_SIZE)] == expected_sources, name
    _, alone = outputs["batch 1"]
    for name, (_, hypotheses) in outputs.items():
        for number in range(VALID_SIZE):
            assert hypotheses[number][0] == alone[number][0], (name, number)
            assert hypotheses[number][1] == pytest.approx(alone[number][1], abs=1e-3), (name, number)


def _loss_by_hand(checkpoint, data_bin, text_dir, split="valid") -> float:
    """The subset's cross-entropy in bits per target token (fairseq's reported ``loss``),
    summed sentence by sentence from the raw text in float64."""
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)],
                                                                    arg_overrides={"data": str(data_bin)})
    model = models[0].eval()
    assert isinstance(model, FConvModel)
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    sources = (text_dir / f"{split}.src").read_text().splitlines()
    targets = (text_dir / f"{split}.tgt").read_text().splitlines()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for source, target in zip(sources, targets):
            src = src_dict.encode_line(source, add_if_not_exist=False).long().unsqueeze(0)
            tgt = tgt_dict.encode_line(target, add_if_not_exist=False).long().unsqueeze(0)
            prev = torch.cat([tgt.new_tensor([[tgt_dict.eos()]]), tgt[:, :-1]], dim=1)
            output = model(src, torch.tensor([src.size(1)]), prev)
            log_probs = model.get_normalized_probs(output, log_probs=True).double()
            total -= log_probs.gather(2, tgt.unsqueeze(2)).sum().item()
            tokens += tgt.numel()
    return total / tokens / math.log(2)


def _logged_valid_loss(log: str) -> float:
    losses = re.findall(r"valid on 'valid' subset \| loss ([0-9.]+)", log)
    assert len(losses) == 1, log[-2000:]
    return float(losses[0])


@pytest.mark.parametrize("batching", ["batch 32", "batch 7", "max-tokens 100"])
def test_fairseq_validate_loss_is_over_every_sentence(trained_model, batching):
    data_bin, save_dir, _ = trained_model
    checkpoint = save_dir / "checkpoint_best.pt"
    result = run_tool("fairseq-validate", data_bin, "--user-dir", PLUGIN_DIR, "--task", "translation", "--path", checkpoint,
                      "--valid-subset", "valid", *BATCHINGS[batching])
    by_hand = _loss_by_hand(checkpoint, data_bin, data_bin.parent)
    assert _logged_valid_loss(result.stdout + result.stderr) == pytest.approx(by_hand, abs=6e-4)


def test_training_validates_over_every_sentence_and_logs_what_fairseq_would_leave_out(word_task, tmp_path):
    root, data_bin = word_task
    result = run_tool(
        "fairseq-train", data_bin, "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER,
        "--dropout", "0.1", "--max-tokens", "300", "--batch-size-valid", "32", "--max-epoch", "1",
        "--save-dir", tmp_path, "--seed", "1", "--no-progress-bar", "--no-epoch-checkpoints",
    )
    log = result.stdout + result.stderr
    by_hand = _loss_by_hand(tmp_path / "checkpoint_last.pt", data_bin, root)
    assert _logged_valid_loss(log) == pytest.approx(by_hand, abs=6e-4)
    notes = re.findall(r"fconv_plugin: fairseq's batching left out (\d+) of the (\d+) sentences of the (\w+) subset",
                       log)
    by_subset = {subset: (int(count), int(total)) for count, total, subset in notes}
    assert len(notes) == len(by_subset)  # once per subset
    assert by_subset["valid"] == (4, VALID_SIZE)  # batches of 32, 24 kept by fairseq; 4 left out
