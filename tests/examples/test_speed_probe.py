"""examples/lib/speed_probe.py's sampled validation pass, hand-checked; run in a subprocess (the probe
silences logging when imported, as it runs alone)."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "examples" / "lib" / "speed_probe.py"


def _spread_sample(batch_tokens, wanted):
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import speed_probe; "
            "print(json.dumps(speed_probe.spread_sample(json.loads(sys.argv[2]), json.loads(sys.argv[3]))))")
    out = subprocess.run([sys.executable, "-c", code, str(PROBE.parent), json.dumps(batch_tokens), json.dumps(wanted)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_sample_of_the_validation_batches_is_spread_over_them_and_scaled_by_their_tokens():
    positions, scale = _spread_sample([10, 20, 30, 40], 2)
    assert positions == [1, 3]  # the middles of the two halves: 0.5 x 4 / 2 and 1.5 x 4 / 2
    assert scale == 100 / 60  # all batches' 100 padded tokens over the timed 20 + 40
    positions, scale = _spread_sample([5, 5, 5, 5, 5, 5, 5, 5, 5], 3)
    assert positions == [1, 4, 7] and scale == 3.0


def test_all_batches_are_timed_unscaled_when_no_fewer_are_asked():
    assert _spread_sample([10, 20, 30], None) == [[0, 1, 2], 1.0]
    assert _spread_sample([10, 20, 30], 3) == [[0, 1, 2], 1.0]
    assert _spread_sample([10, 20, 30], 8) == [[0, 1, 2], 1.0]


def test_a_sample_size_below_one_or_without_validation_is_refused_in_one_line(tmp_path):
    for extra in (["--validation=--eval-bleu", "--validation-batches", "0"], ["--validation-batches", "4"]):
        refused = subprocess.run([sys.executable, str(PROBE), str(tmp_path), "--candidate", "w", "--arch fconv", *extra],
                                 capture_output=True, text=True)
        assert refused.returncode == 2
        assert refused.stderr.strip().splitlines()[-1].endswith(
            "--validation-batches takes a whole number above 0, beside --validation")
