"""--replace-unk through fairseq-generate (binarised data) and fairseq-interactive.

A word-level task with a small vocabulary: frequent words s_i -> t_i, rare words
r_i -> q_i (a dictionary is needed) and rare names N_i -> N_i (copying is right).
Rare words occur once or twice in training, under the vocabulary threshold, so the
model only ever sees them as <unk>.
"""

import shutil

import pytest

import sacrebleu

from tests.tasks import PLUGIN_DIR, run_tool
pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def _hypotheses(generate_output: str):
    rows = [line.split("\t") for line in generate_output.splitlines() if line.startswith("H-")]
    return [row[2] for row in sorted(rows, key=lambda row: int(row[0][2:]))]


def _bleu(hypotheses, reference_file):
    references = reference_file.read_text().splitlines()
    return sacrebleu.corpus_bleu(hypotheses, [references], tokenize="none").score


def test_generate_replaces_every_unk_on_binarised_data_and_bleu_rises(unk_model, tmp_path):
    root, shared_data_bin, checkpoint = unk_model
    data_bin = tmp_path / "data-bin"  # a copy: the raw text goes in beside it below, and the shared one stays without
    shutil.copytree(shared_data_bin, data_bin)
    dictionary = tmp_path / "unk-dict.txt"
    run_tool("python", "-m", "fconv_plugin.cli.unk_dict", data_bin, "--path", checkpoint,
             "--source-text", root / "train.src", "--target-text", root / "train.tgt", "--output", dictionary)
    learned = dict(line.split() for line in dictionary.read_text().splitlines())
    rare_in_train = {w for line in (root / "train.src").read_text().splitlines() for w in line.split() if w.startswith("r")}
    correct = sum(learned.get(w) == "q" + w[1:] for w in rare_in_train)
    assert correct >= 0.8 * len(rare_in_train), (correct, len(rare_in_train))

    common = ["--user-dir", PLUGIN_DIR, "--path", checkpoint, "--gen-subset", "test", "--beam", "5", "--batch-size", "16"]
    plain = _hypotheses(run_tool("fairseq-generate", data_bin, *common).stdout)
    assert sum(h.split().count("<unk>") for h in plain) > 40

    missing = run_tool("fairseq-generate", data_bin, *common, "--replace-unk", dictionary, check=False)
    assert missing.returncode != 0
    assert "--replace-unk needs the original words" in missing.stderr
    assert "test.src-tgt.src" in missing.stderr

    shutil.copy(root / "test.src", data_bin / "test.src-tgt.src")
    shutil.copy(root / "test.tgt", data_bin / "test.src-tgt.tgt")
    copied = _hypotheses(run_tool("fairseq-generate", data_bin, *common, "--replace-unk").stdout)
    replaced = _hypotheses(run_tool("fairseq-generate", data_bin, *common, "--replace-unk", dictionary).stdout)
    assert not any("<unk>" in h for h in copied + replaced)
    bleu_plain, bleu_copy, bleu_dict = (_bleu(h, root / "test.tgt") for h in (plain, copied, replaced))
    print(f"BLEU without replacement {bleu_plain:.2f}, copying {bleu_copy:.2f}, with the dictionary {bleu_dict:.2f}")
    assert bleu_plain < bleu_copy < bleu_dict
    assert bleu_dict > bleu_plain + 10


def test_interactive_replaces_unks_with_the_original_source_words(unk_model):
    root, data_bin, checkpoint = unk_model
    sources = (root / "test.src").read_text().splitlines()[:12]
    result = run_tool(
        "fairseq-interactive", data_bin, "--user-dir", PLUGIN_DIR, "--path", checkpoint, "--beam", "5",
        "--source-lang", "src", "--target-lang", "tgt", "--replace-unk", input="\n".join(sources) + "\n",
    )
    hypotheses = _hypotheses(result.stdout)
    assert len(hypotheses) == 12
    assert not any("<unk>" in h for h in hypotheses)
    vocabulary = {line.split()[0] for line in (data_bin / "dict.src.txt").read_text().splitlines()}
    names = [w for line in sources for w in line.split() if w.startswith("N") and w not in vocabulary]
    copied_names = [w for w in names if any(w in h.split() for h in hypotheses)]
    assert len(copied_names) >= 0.7 * len(names), (copied_names, names)
