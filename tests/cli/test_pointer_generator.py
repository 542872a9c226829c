"""The copying model (fconv_gigaword_copy) through fairseq's tools and the plugin's,
on the names task of tests/cli/conftest.py (name_task): only a model that copies gets
the held-out names right."""

import torch
import pytest
from matplotlib import image

from fconv_plugin import FConvModel
from tests.tasks import PLUGIN_DIR, run_tool, train_names_model
from tests.cli.test_alignment import _hypotheses_and_alignments

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools

def _generate(data_bin, checkpoint, *extra):
    result = run_tool("fairseq-generate", data_bin, "--user-dir", PLUGIN_DIR, "--path", checkpoint,
                      "--beam", "5", "--batch-size", "16", "--required-batch-size-multiple", "1", *extra)
    return result.stdout


def _names_right(generate_output, root):
    targets = (root / "test.tgt").read_text().splitlines()
    hypotheses = {int(f[0][2:]): f[2].split() for f in (l.split("\t") for l in generate_output.splitlines() if l.startswith("H-"))}
    assert len(hypotheses) == len(targets)
    return sum(bool(h) and h[0] == targets[i].split()[0] for i, h in hypotheses.items())


def test_copying_gets_the_names_a_plain_model_cannot(name_task, tmp_path):
    root, data_bin, copying = name_task
    plain = train_names_model(data_bin, tmp_path / "plain", "fconv_gigaword")
    copied, generated = _names_right(_generate(data_bin, copying), root), _names_right(_generate(data_bin, plain), root)
    assert copied >= 48, copied  # 80% of 60
    assert generated <= 10, generated


def test_alignment_and_replace_unk_work_with_copying(name_task, tmp_path):
    root, data_bin, copying = name_task
    output = _generate(data_bin, copying, "--print-alignment")
    sources = (root / "test.src").read_text().splitlines()
    for sentence_id, (hypothesis, alignment) in _hypotheses_and_alignments(output).items():
        assert [tgt for _, tgt in alignment] == list(range(len(hypothesis)))
        source = sources[sentence_id].split()
        if hypothesis and hypothesis[0].startswith("n") and hypothesis[0] in source:
            assert source[alignment[0][0]] == hypothesis[0]  # the copied name is where it attended
    interactive = run_tool("fairseq-interactive", data_bin, "--user-dir", PLUGIN_DIR, "--path", copying,
                           "--beam", "5", "--replace-unk", "--print-alignment", "--source-lang", "src", "--target-lang", "tgt",
                           input="c1 c2 n1305 c3 n1005\nc4 zzz_unseen c5 c6\n")
    hypotheses = [line.split("\t")[2] for line in interactive.stdout.splitlines() if line.startswith("H-")]
    assert len(hypotheses) == 2 and hypotheses[0].split()[0] == "n1305"
    assert "<unk>" not in hypotheses[1]  # an unknown word comes back as the source word itself


def test_fconv_attention_and_the_hub_load_a_copying_model(name_task, tmp_path):
    _, data_bin, copying = name_task
    out = tmp_path / "pictures"
    result = run_tool("fconv-attention", data_bin, "--path", copying, "--output-dir", out, "c1 c2 n1217 c3 n1017")
    assert "2 attention layers" in result.stdout
    assert image.imread(out / "attention-1.png").shape[1] > 300
    hub = FConvModel.from_pretrained(str(copying.parent), checkpoint_file=copying.name, data_name_or_path=str(data_bin))
    assert hub.models[0].decoder.pointer_generator is not None
    assert hub.translate("c1 c2 n1217 c3 n1017", beam=5).split()[0] == "n1217"
    assert hub.translate("c8 n1230 c1 n1003", beam=1).split()[0] == "n1230"


def test_an_int8_copying_model_copies_as_well(name_task, copying_int8_checkpoint):
    root, data_bin, copying = name_task
    int8 = copying_int8_checkpoint
    hub = FConvModel.from_pretrained(str(int8.parent), checkpoint_file=int8.name, data_name_or_path=str(data_bin))
    assert hub.models[0].decoder.pointer_generator.gate.int8 is not None
    assert _names_right(_generate(data_bin, int8), root) >= _names_right(_generate(data_bin, copying), root) - 3


def test_a_checkpoint_scores_the_same_sentences_in_batches_and_alone(name_task):
    """Source tokens travel with the batch: padding and reordering never mix sentences up."""
    root, data_bin, copying = name_task
    batched = _generate(data_bin, copying, "--gen-subset", "test")
    alone = run_tool("fairseq-generate", data_bin, "--user-dir", PLUGIN_DIR, "--path", copying, "--beam", "5",
                     "--batch-size", "1", "--required-batch-size-multiple", "1").stdout

    def scored(output):
        return {int(f[0][2:]): (f[2], round(float(f[1]), 3)) for f in (l.split("\t") for l in output.splitlines() if l.startswith("H-"))}

    a, b = scored(batched), scored(alone)
    assert a.keys() == b.keys()
    assert sum(a[i][0] == b[i][0] for i in a) >= len(a) - 1
    assert torch.allclose(torch.tensor([a[i][1] for i in a]), torch.tensor([b[i][1] for i in a]), atol=2e-3)
