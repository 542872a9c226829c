"""The layer-spec parser accepts what users write and nothing else."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fconv_plugin.errors import FConvError
from fconv_plugin.layer_spec import parse_attention, parse_conv_layers
from fconv_plugin.modules.conv_block import ConvLayerSpec


@pytest.mark.parametrize(
    "text,expected",
    [
        ("[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2", [(512, 3, 1)] * 9 + [(1024, 3, 1)] * 4 + [(2048, 1, 1)] * 2),
        ("[(512,3)]*20", [(512, 3, 1)] * 20),
        ("  [ (256 , 3 , 0) , (128, 5, 2) ]  ", [(256, 3, 0), (128, 5, 2)]),
        ("2 * [(64, 3)] + [(32, 1, 1),]", [(64, 3, 1)] * 2 + [(32, 1, 1)]),
        ("([(64, 3)] + [(64, 5)]) * 2", [(64, 3, 1), (64, 5, 1)] * 2),
        ("((512, 3),) * 2", [(512, 3, 1)] * 2),
    ],
)
def test_accepts_the_spec_forms_users_write(text, expected):
    assert parse_conv_layers(text) == [ConvLayerSpec(*layer) for layer in expected]


@pytest.mark.parametrize(
    "text,num_layers,expected",
    [("True", 3, [True] * 3), ("False", 2, [False] * 2), ("[True, False, True]", 3, [True, False, True]),
     ("[True] * 2 + [False]", 3, [True, True, False]), (" [ False ,True ] ", 2, [False, True])],
)
def test_attention_flags(text, num_layers, expected):
    assert parse_attention(text, num_layers) == expected


@pytest.mark.parametrize(
    "text,message",
    [
        ("__import__('os').system('touch /tmp/pwned')", "a function call is not allowed (column 1"),
        ("[(512, 3)] * n", "name 'n' is not allowed (column 14: 'n')"),
        ("[(512, 3)] * [(512, 3)]", "'*' repeats a list a whole number of times"),
        ("[(512, x)]", "name 'x' is not allowed (column 8: 'x')"),
        ("[(512, 3)] * 9 +", "not valid syntax"),
        ("[(512, 3, 1, 1)]", "layer 1 is (512, 3, 1, 1)"),
        ("[(512, 3.5)]", "the value 3.5 is not allowed"),
        ("[(512, 0)]", "kernel width must be positive, got 0"),
        ("[(-512, 3)]", "out_channels must be positive, got -512"),
        ("[(512, 3)] * 10**9", "the operator Pow is not allowed"),
        ("[(512, 3)] * 100000000", "repeat count 100000000 is out of range"),
        ("[(512, 3, 2)]", "residual 2 must be between 0 (none) and 1"),
        ("[]", "has no layers"),
        ("(512, 3)", "must be a list of (out_channels, kernel_width[, residual]) tuples"),
        ("'[(512, 3)]'", "the value '[(512, 3)]' is not allowed"),
        ("[(True, 3)]", "layer 1 is (True, 3)"),
        ("[" * 5000, "not valid syntax"),
    ],
)
def test_refuses_everything_else_with_a_pointed_one_line_message(text, message):
    with pytest.raises(FConvError) as error:
        parse_conv_layers(text, "--encoder-layers")
    assert message in str(error.value)
    assert "--encoder-layers" in str(error.value)
    assert "\n" not in str(error.value)


def test_attention_list_must_have_one_flag_per_layer():
    with pytest.raises(FConvError, match="has 2 entries but the decoder has 3 layers"):
        parse_attention("[True, False]", 3)
    with pytest.raises(FConvError, match="must be True, False or a list of booleans"):
        parse_attention("[1, 0, 1]", 3)


# --- fuzzing: whatever the string, a valid spec or one line of FConvError, nothing run ---

FUZZ_EXAMPLES = 1500  # per strategy; derandomized, so CI tries the same strings every time
_FUZZ = settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=1000)
_SPEC_PIECES = ["[", "]", "(", ")", ",", "*", "+", "-", " ", "0", "1", "3", "512", "1000", "9999999999",
                "True", "False", "None", "...", "'a'", "1.5", "2**9", "x", "[]", "()", "lambda: 0",
                "__import__('os').system('touch {marker}')", "open('{marker}', 'w')", "[(64, 3)]", "(64, 3, 1)"]


def _spec_like(marker):
    pieces = st.sampled_from([piece.replace("{marker}", marker) for piece in _SPEC_PIECES])
    return st.lists(pieces, max_size=30).map("".join)


def _valid_or_one_line_error(parse):
    try:
        return parse(), None
    except FConvError as error:
        assert "\n" not in str(error)
        return None, error


@pytest.fixture(scope="module")
def marker(tmp_path_factory):
    """A file that exists only if some parsed string was run."""
    return tmp_path_factory.mktemp("fuzz") / "created-by-a-spec"


@_FUZZ
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=50).map(lambda b: b.decode("latin-1"))))
def test_fuzz_any_text(text):
    specs, _ = _valid_or_one_line_error(lambda: parse_conv_layers(text))
    if specs is not None:
        assert specs and all(s.out_channels > 0 and s.kernel_size > 0 and s.residual >= 0 for s in specs)
    flags, _ = _valid_or_one_line_error(lambda: parse_attention(text, 3))
    if flags is not None:
        assert len(flags) == 3 and all(type(flag) is bool for flag in flags)


@_FUZZ
@given(data=st.data())
def test_fuzz_spec_like_strings_never_run_code(marker, data):
    text = data.draw(_spec_like(str(marker)))
    specs, _ = _valid_or_one_line_error(lambda: parse_conv_layers(text))
    if specs is not None:
        assert 0 < len(specs) <= 1000
        assert all(type(s.out_channels) is int and s.out_channels > 0 and s.kernel_size > 0 for s in specs)
    _valid_or_one_line_error(lambda: parse_attention(text, 2))
    assert not marker.exists()


@_FUZZ
@given(layers=st.lists(st.tuples(st.integers(1, 4096), st.integers(1, 9)), min_size=1, max_size=12),
       repeat=st.integers(1, 5))
def test_fuzz_written_specs_parse_to_what_they_say(layers, repeat):
    text = " + ".join(f"[({channels}, {width})] * {repeat}" for channels, width in layers)
    expected = [(channels, width, 1) for channels, width in layers for _ in range(repeat)]
    assert parse_conv_layers(text) == [ConvLayerSpec(*layer) for layer in expected]


def test_fuzz_deep_nesting_and_huge_repeats_are_refused_quickly():
    for text in ["(" * 100_000 + ")" * 100_000, "[" * 5000 + "]" * 5000, "[(1, 1)] * 10 ** 9",
                 "[(1, 1)] * 1000 * 1000 * 1000", "[(1, 1)] * 999999999999999999999999"]:
        with pytest.raises(FConvError):
            parse_conv_layers(text)
