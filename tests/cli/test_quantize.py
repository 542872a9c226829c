"""fconv-quantize: an int8 checkpoint that fairseq's tools and the hub load with --user-dir only."""

import re

import torch

import pytest

from fconv_plugin import FConvModel
from tests.tasks import PAPER_OPTIMIZER, PLUGIN_DIR, SMALL_MODEL, run_tool
from tests.support import load_raw_checkpoint

pytestmark = pytest.mark.slow  # trains models / runs fairseq's tools


def _hypotheses(generate_output: str):
    rows = [line.split("\t") for line in generate_output.splitlines() if line.startswith("H-")]
    return {int(row[0][2:]): row[2] for row in rows}


def _bleu(generate_output: str) -> float:
    return float(re.search(r"BLEU4 = ([\d.]+)", generate_output).group(1))


@pytest.fixture(scope="module")
def quantized(trained_model, tmp_path_factory):
    data_bin, save_dir, _ = trained_model
    output = tmp_path_factory.mktemp("int8") / "int8.pt"
    result = run_tool("fconv-quantize", save_dir / "checkpoint_best.pt", output)
    return data_bin, save_dir / "checkpoint_best.pt", output, result.stderr


def test_the_checkpoint_holds_int8_weights_and_no_optimizer_state(quantized):
    _, original, output, log = quantized
    state = load_raw_checkpoint(output)
    assert state["cfg"]["model"].int8_weights is True
    assert state["last_optimizer_state"] is None
    weights = state["model"]
    int8_names = [name for name, tensor in weights.items() if tensor.dtype == torch.int8]
    assert "decoder.fc3.int8.weight" in int8_names and "encoder.convolutions.0.int8.weight" in int8_names
    assert "decoder.attention.0.in_projection.int8.weight" in int8_names
    float_bytes = sum(t.numel() * t.element_size() for t in load_raw_checkpoint(original)["model"].values())
    int8_bytes = sum(t.numel() * t.element_size() for t in weights.values())
    assert int8_bytes < 0.3 * float_bytes  # ~4x smaller: one byte a weight, plus a scale a row
    assert f"wrote {output}" in log


def test_fairseq_generate_loads_it_with_user_dir_and_translates_as_well(quantized):
    data_bin, original, output, _ = quantized
    common = ["--user-dir", PLUGIN_DIR, "--gen-subset", "test", "--beam", "5", "--required-batch-size-multiple", "1"]
    float32 = run_tool("fairseq-generate", data_bin, "--path", original, *common)
    int8 = run_tool("fairseq-generate", data_bin, "--path", output, *common)
    float_hypotheses, int8_hypotheses = _hypotheses(float32.stdout), _hypotheses(int8.stdout)
    assert sorted(int8_hypotheses) == sorted(float_hypotheses) == list(range(40))
    same = sum(float_hypotheses[i] == int8_hypotheses[i] for i in float_hypotheses)
    assert same >= 36, same  # 8-bit weights change a few hypotheses, not the model
    assert abs(_bleu(int8.stdout) - _bleu(float32.stdout)) <= 2.0


def test_the_hub_loads_it(quantized):
    data_bin, _, output, _ = quantized
    hub = FConvModel.from_pretrained(str(output.parent), checkpoint_file=output.name, data_name_or_path=str(data_bin))
    assert hub.models[0].decoder.fc3.int8 is not None
    assert hub.translate("s1 s2 s3 s4", beam=5) == "t1 t2 t3 t4"


def test_an_existing_output_is_never_overwritten_and_int8_input_is_refused(quantized, tmp_path):
    _, original, output, _ = quantized
    before = output.read_bytes()
    again = run_tool("fconv-quantize", original, output, check=False)
    assert again.returncode == 1
    assert again.stderr.strip().splitlines()[-1] == (
        f"fconv_plugin: error: {output} exists; give a new file name (nothing was overwritten)")
    assert output.read_bytes() == before
    twice = run_tool("fconv-quantize", output, tmp_path / "twice.pt", check=False)
    assert twice.stderr.strip().splitlines()[-1] == f"fconv_plugin: error: {output} is already an int8 checkpoint"
    assert not (tmp_path / "twice.pt").exists()


def test_a_relative_data_bin_is_named_in_one_line_and_data_finds_it(trained_model, tmp_path):
    """fairseq saves the data-bin as given to fairseq-train, so run elsewhere the checkpoint points nowhere."""
    data_bin, save_dir, _ = trained_model
    run_tool("fairseq-train", "data-bin", "--user-dir", PLUGIN_DIR, *SMALL_MODEL, *PAPER_OPTIMIZER, "--max-update", "1",
             "--max-tokens", "300", "--save-dir", "relative-checkpoints", "--no-epoch-checkpoints",
             cwd=data_bin.parent)  # a relative data-bin, as a user types it
    checkpoint = data_bin.parent / "relative-checkpoints" / "checkpoint_last.pt"
    elsewhere = run_tool("fconv-quantize", checkpoint, tmp_path / "int8.pt", check=False, cwd=tmp_path)
    assert elsewhere.returncode == 1
    assert elsewhere.stderr.strip().splitlines()[-1] == (
        f"fconv_plugin: error: {checkpoint} names its data-bin as 'data-bin', which is not there from {tmp_path}; "
        "run fconv-quantize where training ran, or give --data DATA_BIN")
    assert not (tmp_path / "int8.pt").exists()
    run_tool("fconv-quantize", checkpoint, tmp_path / "int8.pt", "--data", data_bin, cwd=tmp_path)
    assert (tmp_path / "int8.pt").stat().st_size > 0
