"""--print-alignment with the plugin's model, alone and together with --replace-unk.

The reference for the alignment is fairseq's built-in fconv with the checkpoint's
weights: its teacher-forced attention, averaged over the layers, read with argmax
over the real source tokens for every output token.
"""

import shutil

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.models import fconv as reference_fconv

from tests.tasks import PLUGIN_DIR, run_tool
pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def _hypotheses_and_alignments(output: str):
    """{sentence id: (hypothesis tokens, [(src, tgt), ...])} from H- and A- lines."""
    hypotheses, alignments = {}, {}
    for line in output.splitlines():
        fields = line.split("\t")
        if line.startswith("H-"):
            hypotheses[int(fields[0][2:])] = fields[2].split()
        elif line.startswith("A-"):
            alignments[int(fields[0][2:])] = [tuple(map(int, pair.split("-"))) for pair in fields[1].split()]
    assert hypotheses and hypotheses.keys() == alignments.keys()
    return {i: (hypotheses[i], alignments[i]) for i in hypotheses}


def _reference_model(checkpoint, data_bin):
    """fairseq's own FConvModel with the checkpoint's weights."""
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={"data": str(data_bin)})
    ours = models[0]
    reference = reference_fconv.FConvModel.build_model(cfg.model, task)
    reference.load_state_dict(ours.state_dict())
    return reference.eval(), task


def test_generate_prints_the_argmax_of_the_averaged_attention(trained_model):
    data_bin, save_dir, _ = trained_model
    checkpoint = save_dir / "checkpoint_best.pt"
    result = run_tool("fairseq-generate", data_bin, "--user-dir", PLUGIN_DIR, "--path", checkpoint,
                      "--beam", "5", "--batch-size", "8", "--print-alignment")
    printed = _hypotheses_and_alignments(result.stdout)
    assert len(printed) == 40

    reference, task = _reference_model(checkpoint, data_bin)
    tgt_dict = task.target_dictionary
    task.load_dataset("test")
    test_set = task.dataset("test")
    for sentence_id, (hypothesis, alignment) in printed.items():
        source = test_set[sentence_id]["source"]  # ends in </s>
        target = tgt_dict.encode_line(" ".join(hypothesis), add_if_not_exist=False).long()
        prev_output_tokens = torch.cat([target.new_tensor([tgt_dict.eos()]), target[:-1]]).unsqueeze(0)
        with torch.no_grad():
            _, attention = reference(source.unsqueeze(0), torch.tensor([source.numel()]), prev_output_tokens)
        # fairseq divides the summed attention by the number of layers: argmax is unaffected
        expected = attention[0, : len(hypothesis), : source.numel() - 1].argmax(dim=-1).tolist()
        assert [tgt for _, tgt in alignment] == list(range(len(hypothesis)))
        assert all(0 <= src < source.numel() - 1 for src, _ in alignment)
        assert [src for src, _ in alignment] == expected, sentence_id


def test_print_alignment_together_with_replace_unk(unk_model, tmp_path):
    root, shared_data_bin, checkpoint = unk_model
    data_bin = tmp_path / "data-bin"  # a copy: other tests need the shared one without the raw text
    shutil.copytree(shared_data_bin, data_bin)
    sources = (root / "test.src").read_text().splitlines()[:10]
    common = ["--user-dir", PLUGIN_DIR, "--path", checkpoint, "--beam", "5", "--print-alignment", "--replace-unk"]
    interactive = run_tool("fairseq-interactive", data_bin, *common, "--source-lang", "src", "--target-lang", "tgt",
                           input="\n".join(sources) + "\n")
    shutil.copy(root / "test.src", data_bin / "test.src-tgt.src")
    shutil.copy(root / "test.tgt", data_bin / "test.src-tgt.tgt")
    generate = run_tool("fairseq-generate", data_bin, *common, "--batch-size", "16")
    for output, lines in ((interactive.stdout, {i: s for i, s in enumerate(sources)}),
                          (generate.stdout, dict(enumerate((root / "test.src").read_text().splitlines())))):
        printed = _hypotheses_and_alignments(output)
        for sentence_id, (hypothesis, alignment) in printed.items():
            assert "<unk>" not in hypothesis
            assert [tgt for _, tgt in alignment] == list(range(len(hypothesis)))
            assert all(0 <= src < len(lines[sentence_id].split()) for src, _ in alignment)
