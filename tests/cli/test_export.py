"""fconv-export and fconv-onnx-translate against fairseq-interactive, on the tiny trained model.

The runtime runs in a subprocess where ``import torch`` and ``import fairseq`` fail,
with the same Moses tokenizer and subword-nmt BPE as fairseq-interactive.
"""

import json
import random
import subprocess
import sys

import pytest

from tests.tasks import BIN_DIR, interactive_answers, run_tool
pytestmark = pytest.mark.slow

BLOCKED = ("torch", "fairseq", "fairseq_cli", "fconv_plugin")


def _sentences(count, seed):
    """Known words, a few unknown ones, and punctuation Moses splits off."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        words = [f"s{rng.randrange(30)}" for _ in range(rng.randint(2, 9))]  # the lengths the model was trained on
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), rng.choice(["zq", "s99", "xyz"]))
        lines.append(" ".join(words) + rng.choice(["", ".", "!", ", s3?"]))
    return lines


@pytest.fixture(scope="module")
def codes(word_task):
    """subword-nmt codes learned on the training source: the task's words stay whole, unknown ones split."""
    root, _ = word_task
    path = root / "bpe.codes"
    subprocess.run([sys.executable, "-m", "subword_nmt.learn_bpe", "-s", "200", "-i", str(root / "train.src"),
                    "-o", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def exported(trained_model, codes, tmp_path_factory):
    data_bin, save_dir, _ = trained_model
    root = tmp_path_factory.mktemp("export")
    pipeline = ["--tokenizer", "moses", "--bpe", "subword_nmt", "--bpe-codes", codes]
    run_tool("fconv-export", save_dir / "checkpoint_best.pt", data_bin, root / "float", *pipeline)
    run_tool("fconv-export", save_dir / "checkpoint_best.pt", data_bin, root / "int8", *pipeline, "--int8")
    return data_bin, save_dir / "checkpoint_best.pt", root, pipeline


@pytest.fixture(scope="module")
def without_torch(tmp_path_factory):
    """A PYTHONPATH under which importing torch, fairseq or the plugin raises ImportError."""
    root = tmp_path_factory.mktemp("blocked")
    for name in BLOCKED:
        (root / name).mkdir()
        (root / name / "__init__.py").write_text(f"raise ImportError('{name} is blocked: the ONNX runtime must not import it')\n")
    return root


def onnx_translate(directory, lines, *options, blocked_dir, input_bytes=None):
    env = {"PYTHONPATH": str(blocked_dir), "PATH": str(BIN_DIR), "HOME": str(blocked_dir)}
    script = "import sys, fconv_onnx.translate as t; sys.argv[0] = 'fconv-onnx-translate'; t.main()"
    return subprocess.run([sys.executable, "-c", script, str(directory), *map(str, options)], env=env, cwd=blocked_dir,
                          input=input_bytes if input_bytes is not None else ("\n".join(lines) + "\n").encode(),
                          capture_output=True, timeout=600)


def _answers_equal(result, expected):
    """fconv-onnx-translate's --print-scores lines, checked against fairseq-interactive's D- lines."""
    assert result.returncode == 0, result.stderr.decode()
    answers = [line.split("\t") for line in result.stdout.decode().splitlines()]
    assert [text for _, text in answers] == [e["text"] for e in expected]
    assert all(abs(float(score) - e["score"]) < 1e-3 for (score, _), e in zip(answers, expected))
    return answers


def test_the_blocked_path_really_blocks_torch_and_fairseq(without_torch):
    for name in BLOCKED:
        result = subprocess.run([sys.executable, "-c", f"import {name}"], env={"PYTHONPATH": str(without_torch)},
                                cwd=without_torch, capture_output=True, text=True)
        assert result.returncode == 1 and f"{name} is blocked" in result.stderr


@pytest.mark.parametrize("beam, batch_size", [(5, 8), (1, 8), (5, 1)])
def test_translations_and_scores_are_fairseq_interactives(exported, without_torch, beam, batch_size):
    data_bin, checkpoint, root, pipeline = exported
    lines = _sentences(40, seed=beam * 10 + batch_size)
    expected = interactive_answers(data_bin, checkpoint, lines, "--source-lang", "src", "--target-lang", "tgt", *pipeline,
                                   beam=beam)
    result = onnx_translate(root / "float", lines, "--beam", beam, "--batch-size", batch_size, "--print-scores",
                            blocked_dir=without_torch)
    _answers_equal(result, expected)


def test_the_directory_holds_what_a_deployment_needs(exported):
    _, _, root, _ = exported
    for name in ("float", "int8"):
        files = sorted(p.name for p in (root / name).iterdir())
        assert files == ["bpe.codes", "decoder.onnx", "encoder.onnx", "manifest.json", "source.vocab", "target.vocab"]
        manifest = json.loads((root / name / "manifest.json").read_text())
        assert manifest["arch"] == "fconv_iwslt_de_en" and manifest["int8"] == (name == "int8")
        assert manifest["dimensions"]["decoder_states"] == [[2, 64], [2, 64]]  # two decoder layers (64, 3)
        assert manifest["tokenizer"]["source_lang"] == "src" and manifest["bpe"]["separator"] == "@@"
    size = {name: sum(p.stat().st_size for p in (root / name).glob("*.onnx")) for name in ("float", "int8")}
    assert size["int8"] < 0.4 * size["float"]


def test_int8_graphs_translate_as_torchs_int8_model(exported, without_torch, int8_checkpoint, tmp_path):
    """--int8 exports fconv-quantize's arithmetic (per-row scales, exact int32 sums, float64
    attention): fairseq-interactive on fconv-quantize's checkpoint is the reference."""
    data_bin, checkpoint, root, pipeline = exported
    quantized = int8_checkpoint  # fconv-quantize of the same checkpoint_best.pt
    lines = _sentences(40, seed=7)
    expected = interactive_answers(data_bin, quantized, lines, "--source-lang", "src", "--target-lang", "tgt", *pipeline)
    result = onnx_translate(root / "int8", lines, "--print-scores", blocked_dir=without_torch)
    _answers_equal(result, expected)


def test_bad_lines_are_reported_and_left_empty_and_the_others_translated(exported, without_torch):
    _, _, root, _ = exported
    good = _sentences(3, seed=3)
    stream = (good[0] + "\n\n" + good[1] + "\n").encode() + b"s1 \xff s2\n" + (good[2] + "\n").encode()
    result = onnx_translate(root / "float", [], blocked_dir=without_torch, input_bytes=stream)
    alone = onnx_translate(root / "float", good, blocked_dir=without_torch)
    out = result.stdout.decode().splitlines()
    translated = alone.stdout.decode().splitlines()
    assert result.returncode == 1
    assert out == [translated[0], "", translated[1], "", translated[2]]
    assert result.stderr.decode().splitlines() == [
        "fconv-onnx-translate: line 2 is empty; its output line is left empty",
        "fconv-onnx-translate: line 4 is not valid UTF-8 (byte 0xff at byte 4); its output line is left empty",
    ]


def test_a_directory_that_is_not_an_export_is_refused_in_one_line(tmp_path, without_torch):
    result = onnx_translate(tmp_path, ["s1"], blocked_dir=without_torch)
    assert result.returncode == 1
    assert result.stderr.decode().strip() == (
        f"fconv-onnx-translate: error: {tmp_path} has no manifest.json; give a directory written by fconv-export")


def test_export_refuses_a_used_directory_an_int8_checkpoint_and_bpe_without_codes(exported, int8_checkpoint, tmp_path):
    data_bin, checkpoint, root, _ = exported
    before = (root / "float" / "manifest.json").read_bytes()
    used = run_tool("fconv-export", checkpoint, data_bin, root / "float", check=False)
    assert used.returncode == 1 and used.stderr.strip().splitlines()[-1] == (
        f"fconv_plugin: error: {root / 'float'} exists and is not an empty directory; give a new one (nothing was overwritten)")
    assert (root / "float" / "manifest.json").read_bytes() == before
    int8 = run_tool("fconv-export", int8_checkpoint, data_bin, tmp_path / "out", check=False)
    assert int8.returncode == 1 and "is an fconv-quantize (int8) checkpoint; export the float32 checkpoint" in int8.stderr
    no_codes = run_tool("fconv-export", checkpoint, data_bin, tmp_path / "out", "--bpe", "subword_nmt", check=False)
    assert no_codes.returncode == 1 and no_codes.stderr.strip().splitlines()[-1].endswith("--bpe subword_nmt needs --bpe-codes "
                                                                                         "(the codes file the training data was encoded with)")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob("out.*"))


@pytest.fixture(scope="module")
def exported_copying(name_task, tmp_path_factory):
    """The names task's pointer-generator model, exported once for every beam and batch size."""
    _, data_bin, copying = name_task
    out = tmp_path_factory.mktemp("export_copying") / "copy"
    run_tool("fconv-export", copying, data_bin, out)
    return out


@pytest.mark.parametrize("beam, batch_size", [(5, 8), (1, 3)])
def test_a_copying_model_translates_as_fairseq_interactive(name_task, exported_copying, without_torch, beam, batch_size):
    """The names task's pointer-generator model (tests/cli/conftest.py): its held-out names
    are only right when copied, so the exported mixture is exercised on every sentence."""
    root, data_bin, copying = name_task
    assert json.loads((exported_copying / "manifest.json").read_text())["copying"] is True
    lines = (root / "test.src").read_text().splitlines()[:30]
    expected = interactive_answers(data_bin, copying, lines, "--source-lang", "src", "--target-lang", "tgt", beam=beam)
    result = onnx_translate(exported_copying, lines, "--beam", beam, "--batch-size", batch_size, "--print-scores",
                            blocked_dir=without_torch)
    answers = _answers_equal(result, expected)
    names = [line.split()[0] for line in (root / "test.tgt").read_text().splitlines()[:30]]
    assert sum(text.split()[:1] == [name] for (_, text), name in zip(answers, names)) >= 24  # copied, as in fairseq


def test_onnxruntimes_profile_is_written_only_when_asked_for(exported, tmp_path):
    """``ExportedModel(profile_prefix=...)`` turns on onnxruntime's profiler: every node run of
    the decoder step is in the file ``end_profiling`` writes (onnxruntime's profile format)."""
    from fconv_onnx.beam_search import generate
    from fconv_onnx.model import ExportedModel
    from fconv_onnx.translate import pad_left

    _, _, root, _ = exported
    profiled = ExportedModel(str(root / "float"), threads=1, profile_prefix=str(tmp_path / "profile"))
    plain = ExportedModel(str(root / "float"), threads=1)
    d = profiled.target_vocabulary
    source = pad_left([profiled.source_vocabulary.encode("s1 s2 s3")], profiled.manifest.symbols.source_pad)
    for model in (profiled, plain):
        generate(model, source, 2, eos=d.eos, pad=d.pad, unk=d.unk, max_len_a=0.0, max_len_b=5,
                 max_positions=model.max_target_positions)
    path = profiled.decoder.end_profiling()
    assert path.startswith(str(tmp_path / "profile"))
    events = json.loads(open(path, encoding="utf-8").read())
    steps = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    assert 1 <= len(steps) <= 6 and {"MatMul", "Softmax"} <= {e["args"]["op_name"] for e in nodes}
    assert plain.decoder.end_profiling() == ""


def test_sessions_stop_their_threads_spinning_when_a_run_returns(exported):
    """Each session's pool stops spinning when its run returns (``session.force_spinning_stop``):
    otherwise the decoder's threads spin on while the encoder runs, which took the encoder 2x
    as long on two cores (docs/onnx.md); the two sessions are the runtime's own, with no pool
    shared through the process that other onnxruntime code would have to follow."""
    from fconv_onnx.model import ExportedModel

    _, _, root, _ = exported
    model = ExportedModel(str(root / "float"), threads=2)
    for session in (model.encoder, model.decoder):
        options = session.get_session_options()
        assert options.get_session_config_entry("session.force_spinning_stop") == "1"
        assert options.use_per_session_threads and options.intra_op_num_threads == 2
