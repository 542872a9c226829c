"""The CPU's bfloat16 units, read from its flags as the kernel lists them, decide --bf16."""

import pytest

from fconv_plugin import precision
from fconv_plugin.cli.info import bf16_line, cpu_features
from fconv_plugin.errors import FConvError

CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
flags\t\t: {flags}
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: {flags}
"""
ZEN1 = "fpu sse sse2 avx avx2 fma bmi2 sha_ni"  # this project's 2-core AMD EPYC on 2026-11-27
ZEN4 = ZEN1 + " avx512f avx512bw avx512_vnni avx512_bf16 vaes"
COOPER_LAKE = "avx2 fma avx512f avx512_vnni avx512_bf16"
SAPPHIRE_RAPIDS = "avx2 fma avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8"
SKYLAKE_X = "avx2 fma avx512f avx512bw avx512dq avx512vl"  # AVX-512, but no bfloat16 instructions


@pytest.mark.parametrize("flags,units", [
    (ZEN1, None), (SKYLAKE_X, None), (ZEN4, "AVX-512 BF16"), (COOPER_LAKE, "AVX-512 BF16"),
    (SAPPHIRE_RAPIDS, "AMX-BF16"), ("amx_bf16", None),  # AMX-BF16 needs the tile unit's flag too
])
def test_the_units_are_read_from_the_cpus_flags(tmp_path, flags, units):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO.format(vendor="AuthenticAMD", flags=flags))
    assert precision.cpu_flags(str(cpuinfo)) == frozenset(flags.split())
    assert precision.bf16_units(precision.cpu_flags(str(cpuinfo))) == units
    assert precision.bf16_units(flags.split()) == units
    features = cpu_features(str(cpuinfo))
    assert features["AVX-512 BF16"] == ("yes" if "avx512_bf16" in flags.split() else "no")
    assert features["AMX-BF16"] == ("yes" if units == "AMX-BF16" else "no")


def test_a_system_that_does_not_say_has_no_units(tmp_path):
    assert precision.cpu_flags(str(tmp_path / "absent")) is None
    (tmp_path / "cpuinfo").write_text("processor\t: 0\n")
    assert precision.cpu_flags(str(tmp_path / "cpuinfo")) is None
    assert precision.bf16_units([]) is None


def test_a_cpu_without_units_is_refused_in_one_line_that_says_what_to_do():
    assert precision.check_cpu_bf16("AMX-BF16") == "AMX-BF16"
    for option in ("--bf16", "--memory-efficient-bf16"):
        with pytest.raises(FConvError) as refused:
            precision.check_cpu_bf16(None, option)
        assert str(refused.value) == (
            f"{option} on the CPU needs bfloat16 units (AMX-BF16 or AVX-512 BF16) and this CPU has none (bfloat16 "
            f"would run many times slower than float32 here); drop {option} to run in float32")


def test_fconv_info_says_what_the_units_make_of_bf16():
    assert bf16_line(None) == "none (AMX-BF16 or AVX-512 BF16): --bf16 --cpu is refused; train in float32"
    assert bf16_line("AVX-512 BF16") == "AVX-512 BF16: fairseq-train --cpu --bf16 trains in mixed precision"
