"""The one selector (backend.py): FCONV_NATIVE, and which form of each part it
picks for a device, a precision and int8 weights.

The switch's cases run in a fresh Python process, as a user's would; the choices are
checked against the rules the module states (compiled forms on the CPU only; the compiled
step in float32, and for an int8 model only with the int8 loops it calls).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fconv_plugin import backend
from fconv_plugin.errors import FConvError
from tests.support import needs_compiled

ROOT = Path(__file__).resolve().parents[2]
LOOPS = list(backend.LOOPS)
STATES = "import json; from fconv_plugin import backend; print(json.dumps(backend.states()))"
CPU, META = torch.device("cpu"), torch.device("meta")


def _python(code: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def test_switched_off_the_torch_forms_run_and_the_log_says_so_once():
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "import torch\n"
        "from fconv_plugin import backend\n"
        "from fconv_plugin.deployment import int8\n"
        "cpu = torch.device('cpu')\n"
        "for int8_weights in (False, True):\n"
        "    chosen = backend.select(cpu, torch.float32, int8_weights=int8_weights)\n"
        "    assert chosen.step is None and chosen.int8 is None and chosen.candidates is None, chosen\n"
        "assert backend.int8_loops() is None\n"
        "from fconv_plugin.modules import WeightNormLinear\n"
        "for _ in range(3):  # int8 layers picked and run three times\n"
        "    layers = torch.nn.Sequential(WeightNormLinear(6, 4))\n"
        "    int8.swap_in_int8_modules_(layers)\n"
        "    layers(torch.randn(2, 6))\n"
        "import json; print(json.dumps(backend.states()))\n"
    )
    result = _python(code, env={"FCONV_NATIVE": "0"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {name: "switched off (FCONV_NATIVE=0)" for name in LOOPS}
    lines = [line for line in result.stderr.splitlines() if "compiled loops:" in line]
    assert lines == ["INFO:fconv_plugin.backend:fconv_plugin: compiled loops: "
                     + "; ".join(f"{name} does not (switched off (FCONV_NATIVE=0))" for name in LOOPS)]
    assert "fconv_plugin.native._" not in _python(  # switched off, a loop is not even imported
        "import sys, torch; from fconv_plugin import backend; backend.select(torch.device('cpu'), "
        "torch.float32, True); print(sorted(sys.modules))", env={"FCONV_NATIVE": "0"}).stdout


@pytest.mark.parametrize("value, running", [("int8_rows", {"int8_rows"}),
                                            ("decoder_step, beam_candidates", {"decoder_step", "beam_candidates"})])
def test_a_list_of_loops_runs_those_alone(value, running):
    """``FCONV_NATIVE=name,...`` (what benchmarks/native_loops.py sets to price each loop)
    runs the loops named, where built, and says the others are switched off."""
    result = _python(STATES, env={"FCONV_NATIVE": value})
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout.splitlines()[-1])
    every = _python(STATES, env={"FCONV_NATIVE": "1"})  # what this installation built (whatever this process runs)
    built = {name for name, why in json.loads(every.stdout.splitlines()[-1]).items() if why is None}
    assert {name for name, why in states.items() if why is None} == running & built
    assert all(states[name] == f"switched off (FCONV_NATIVE={value})" for name in set(LOOPS) - running)


def test_a_switch_naming_no_loop_is_said_in_one_line_and_taken_as_on():
    result = _python("from fconv_plugin import backend; print(backend.switch_problem()); "
                     "print(backend.switched_on())", env={"FCONV_NATIVE": "int8_rows,fast"})
    problem, on = result.stdout.splitlines()
    assert problem.startswith("FCONV_NATIVE='int8_rows,fast' is neither 0") and "comma list of loops" in problem
    assert on == "True"


@needs_compiled("int8_rows")
@needs_compiled("decoder_step")
@needs_compiled("beam_candidates")
def test_the_compiled_forms_run_on_the_cpu_and_the_step_in_float32_alone():
    step, rows, candidates = (backend.loop(name) for name in ("decoder_step", "int8_rows", "beam_candidates"))
    assert backend.select(CPU, torch.float32) == backend.Backend(step, None, candidates)
    assert backend.select(CPU, torch.float32, int8_weights=True) == backend.Backend(step, rows, candidates, True)
    for half in (torch.bfloat16, torch.float16):  # the step in float32 only; the scores are float32 anyway
        assert backend.select(CPU, half) == backend.Backend(None, None, candidates)
    assert backend.select(META, torch.float32) == backend.Backend(None, None, None)  # any device but the CPU
    assert backend.select(META, torch.float32, int8_weights=True).step is None


@needs_compiled("int8_rows")
def test_an_int8_operation_runs_compiled_on_float32_operands_alone():
    rows = backend.loop("int8_rows")
    assert backend.int8_loops() is rows is backend.int8_loops(torch.zeros(2), torch.zeros(3, 2))
    assert backend.int8_loops(torch.zeros(2), torch.zeros(2, dtype=torch.float64)) is None
    assert backend.int8_loops(torch.zeros(2, dtype=torch.bfloat16)) is None
    assert backend.packed_int8_products() == bool(rows.vnni)


def test_the_choice_in_words_names_each_form():
    assert backend.Backend(None, None, None).describe() == "step torch (decoding/steps.py); search torch (decoding/search.py)"
    assert backend.Backend(object(), object(), object(), True).describe() == (
        "step compiled (decoder_step); search compiled (beam_candidates, whole steps with the compiled step); "
        "int8 layers compiled (int8_rows)")
    assert backend.Backend(None, None, object(), True).describe() == (
        "step torch (decoding/steps.py); search compiled (beam_candidates); int8 layers torch (deployment/int8.py)")


@pytest.mark.parametrize("vendor,mkl,expected", [
    ("GenuineIntel", True, backend.TORCH_DRAWS),  # torch draws Bernoulli masks with MKL, on every core
    ("GenuineIntel", False, backend.SIXTEEN_BIT_DRAWS),
    ("AuthenticAMD", True, backend.SIXTEEN_BIT_DRAWS),  # torch's draws: one core, one call an element
    ("", True, backend.SIXTEEN_BIT_DRAWS),
])
def test_training_dropout_draws_torchs_in_float32_and_16_bit_draws_in_bfloat16_where_torchs_run_on_one_core(
        vendor, mkl, expected, monkeypatch):
    monkeypatch.delenv(backend.DROPOUT_SWITCH, raising=False)
    assert backend.training_dropout(torch.float32, vendor=vendor, mkl=mkl) == backend.TORCH_DRAWS  # fairseq's masks
    assert backend.training_dropout(torch.bfloat16, vendor=vendor, mkl=mkl) == expected


def test_fconv_dropout_sets_bfloat16s_draws_and_anything_else_is_refused_in_one_line(monkeypatch):
    for value, draws in (("torch", backend.TORCH_DRAWS), (" 16bit ", backend.SIXTEEN_BIT_DRAWS)):
        monkeypatch.setenv(backend.DROPOUT_SWITCH, value)
        for vendor in ("GenuineIntel", "AuthenticAMD"):
            assert backend.training_dropout(torch.bfloat16, vendor=vendor, mkl=True) == draws
        assert backend.training_dropout(torch.float32) == backend.TORCH_DRAWS  # float32: fairseq's masks always
        assert backend.dropout_description().endswith(f"bfloat16 {draws} (FCONV_DROPOUT={value.strip()})")
    monkeypatch.setenv(backend.DROPOUT_SWITCH, "fast")
    with pytest.raises(FConvError, match=r"^FCONV_DROPOUT='fast' is neither torch \(torch's Bernoulli draws\) nor "
                                         r"16bit \(16-bit draws\); unset it to let the CPU decide$"):
        backend.training_dropout(torch.bfloat16)
    assert backend.dropout_description().startswith("FCONV_DROPOUT='fast' is neither torch")  # fconv-info says it


def test_the_cpu_vendor_is_read_from_the_kernels_cpuinfo(tmp_path, monkeypatch):
    monkeypatch.delenv(backend.DROPOUT_SWITCH, raising=False)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\n")
    assert backend.cpu_vendor(str(cpuinfo)) == "AuthenticAMD"
    assert backend.cpu_vendor(str(tmp_path / "missing")) is None
    assert backend.training_dropout(torch.bfloat16) == backend.training_dropout(
        torch.bfloat16, vendor=backend.cpu_vendor(), mkl=torch.backends.mkl.is_available())


def test_fconv_info_names_trainings_dropout_draws(monkeypatch):
    monkeypatch.delenv(backend.DROPOUT_SWITCH, raising=False)
    info = subprocess.run([sys.executable, "-m", "fconv_plugin.cli.info"], capture_output=True, text=True, timeout=120,
                          check=True, cwd=ROOT)
    lines = [line for line in info.stdout.splitlines() if line.startswith("training dropout (fconv_plugin/backend.py): ")]
    chosen = backend.training_dropout(torch.bfloat16, vendor=backend.cpu_vendor(), mkl=torch.backends.mkl.is_available())
    assert len(lines) == 1 and f"; bfloat16 {chosen} (" in lines[0], info.stdout
    assert f"float32 {backend.TORCH_DRAWS} (fairseq's masks for a seed)" in lines[0]
