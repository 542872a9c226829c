"""The quality job's bf16 row is checked only on the bfloat16 units its README figure came from, and its
float32 summary rows only with the torch kernels theirs came from (issue 78, item 6): run in the default
suite, on every CPU, with each kind of unit or kernel set given."""

from fconv_plugin import precision
from tests.quality.test_readme_results import (BF16_ROW, SUMMARY_ROWS, bf16_row_skip_reason, readme_row_kernels,
                                               readme_row_units, summary_row_skip_reason, this_cpus_kernels)


def test_the_readme_bf16_row_names_units_the_plugin_detects():
    assert readme_row_units(BF16_ROW) in [name for name, _ in precision.BF16_UNITS]


def test_the_bf16_row_is_checked_on_its_own_units_and_skipped_naming_the_command_elsewhere():
    assert bf16_row_skip_reason("AVX-512 BF16", "AVX-512 BF16") is None
    on_amx = bf16_row_skip_reason(precision.bf16_units(["amx_bf16", "amx_tile", "avx512_bf16"]), "AVX-512 BF16")
    assert "measured on AVX-512 BF16 units and this CPU has AMX-BF16" in on_amx
    assert "PRECISION=bf16 UPDATES=600 SEED=1" in on_amx and "quickstart.sh" in on_amx
    assert "no bfloat16 units" in bf16_row_skip_reason(precision.bf16_units(["avx2", "fma"]), "AVX-512 BF16")


def test_the_summary_rows_are_checked_with_the_kernels_they_were_measured_with_and_skipped_naming_the_command_elsewhere():
    kernels = {readme_row_kernels(row.values[0]) for row in SUMMARY_ROWS}
    assert len(kernels) == 1, kernels
    kernels, vendor = kernels.pop()
    assert vendor in ("AMD", "Intel") and kernels in ("AVX512", "AVX2", "DEFAULT"), (kernels, vendor)
    assert len(this_cpus_kernels()) == 2
    assert summary_row_skip_reason(("AVX512", "AMD"), ("AVX512", "AMD")) is None
    on_avx2 = summary_row_skip_reason(("AVX2", "AMD"), ("AVX512", "AMD"))
    assert "measured with torch's AVX512 kernels on an AMD CPU and this one runs AVX2 kernels on an AMD CPU" in on_avx2
    assert "PRECISION=fp32 bash examples/summarise_debian/summarise.sh" in on_avx2
    on_intel = summary_row_skip_reason(("AVX512", "Intel"), ("AVX512", "AMD"))  # MKL's float32 code differs there
    assert on_intel is not None and "AVX512 kernels on an Intel CPU" in on_intel
