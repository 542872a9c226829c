"""fconv-attention: one heat map per attention layer, from the model's own layers."""

import pytest
import torch
from matplotlib import image

from fconv_plugin.cli import attention
from fconv_plugin.errors import FConvError
from fconv_plugin.inference.attention import layer_attention, readable
from tests.tasks import run_tool
from tests.cli.test_alignment import _reference_model

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def test_one_png_per_sentence_with_a_panel_per_layer_and_the_average(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    out = tmp_path / "pictures"
    result = run_tool("python", "-m", "fconv_plugin.cli.attention", data_bin, "--path", save_dir / "checkpoint_best.pt",
                      "--output-dir", out, "s1 s2 s3 s4", "s20 s7 s11")
    assert sorted(p.name for p in out.iterdir()) == ["attention-1.png", "attention-2.png"]
    assert result.stdout.count("2 attention layers") == 2
    height, width, _ = image.imread(out / "attention-1.png").shape
    assert width > 300 and height > 200


def test_layers_are_the_decoder_layers_and_their_mean_is_fairseqs_average(trained_model):
    data_bin, save_dir, _ = trained_model
    checkpoint = save_dir / "checkpoint_best.pt"
    reference, task = _reference_model(checkpoint, data_bin)
    from fairseq import checkpoint_utils

    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={"data": str(data_bin)})
    ours = models[0]
    source = task.source_dictionary.encode_line("s1 s2 s3 s4 s5", add_if_not_exist=False).long()
    target = task.target_dictionary.encode_line("t1 t2 t3 t4 t5", add_if_not_exist=False).long()
    with pytest.raises(FConvError, match="training mode"):  # fairseq's loader leaves dropout on
        layer_attention(ours, source, target)
    ours.eval()
    layers, p_gen = layer_attention(ours, source, target)
    assert p_gen is None  # a model that does not copy
    assert len(layers) == ours.decoder.num_attention_layers == 2
    assert all(layer.shape == (target.numel(), source.numel()) for layer in layers)
    assert all(torch.allclose(layer.sum(dim=-1), torch.ones(target.numel())) for layer in layers)
    prev = torch.cat([target.new_tensor([task.target_dictionary.eos()]), target[:-1]]).unsqueeze(0)
    with torch.no_grad():
        _, expected = reference(source.unsqueeze(0), torch.tensor([source.numel()]), prev)
    assert torch.allclose(torch.stack(layers).mean(dim=0), expected[0], atol=1e-6)

    figure = attention.draw(layers, readable(["s1", "ab@@", "&apos;"]) * 2, ["t"] * 6, "title")
    assert readable(["ab@@", "&apos;", "@-@"]) == ["ab·", "'", "-"]
    assert len([axis for axis in figure.axes if axis.images]) == 3  # 2 layers + the average


def test_bad_input_gets_one_line(trained_model, tmp_path):
    data_bin, save_dir, _ = trained_model
    missing = run_tool("python", "-m", "fconv_plugin.cli.attention", data_bin, "--path", tmp_path / "none.pt", "x",
                       check=False)
    assert missing.returncode != 0
    assert "fconv_plugin: error: --path" in missing.stderr and "Traceback" not in missing.stderr
