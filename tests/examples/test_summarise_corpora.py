"""The corpus builders of examples/summarise_debian/corpora on hand-written docstrings and POD."""

import lzma
import sys

from .example_scripts import SUMMARISE, load

sys.path.insert(0, str(SUMMARISE / "corpora"))  # the builders import their shared writer as a sibling
docstrings = load(SUMMARISE / "corpora" / "docstrings.py")
perl_manuals = load(SUMMARISE / "corpora" / "perl_manuals.py")
pairs_file = load(SUMMARISE / "corpora" / "pairs_file.py")

NUMPY_STYLE = '''Compute the weighted mean along the given axis.

Returns the average of the array elements, each weighted by :func:`~numpy.sum` of its
``weights``; see `the guide <https://example.org>`_.

Parameters
----------
axis : int, optional
    Axis along which to average.

Examples
--------
>>> average([1, 2])
1.5

.. versionadded:: 1.7
    Weights may be negative.
'''


def test_a_numpy_style_docstring_keeps_prose_and_parameters_and_drops_examples_and_markup():
    summary, body = docstrings.summary_and_body(NUMPY_STYLE)
    assert summary == "Compute the weighted mean along the given axis."
    assert body == ("Returns the average of the array elements, each weighted by numpy.sum of its weights; "
                    "see the guide. axis : int, optional Axis along which to average.")


def test_docstrings_too_short_on_either_side_are_left_out():
    assert docstrings.summary_and_body("Only a summary line.") is None
    assert docstrings.summary_and_body("Two words.\n\nA body that is long enough to keep here.") is None
    assert docstrings.summary_and_body("A good summary line.\n\nToo short a body.") is None


def test_only_public_functions_methods_and_classes_are_read():
    source = ('def public():\n    """Do the public thing here.\n\n    It does one thing and then another thing too."""\n'
              'def _private():\n    """Do the private thing here.\n\n    It does one thing and then another thing too."""\n'
              'class Thing:\n    """A thing with a summary.\n\n    Its body says what the thing is for, in words."""\n')
    assert [summary for summary, _ in docstrings.pairs_of_module(source)] == ["Do the public thing here.",
                                                                             "A thing with a summary."]
    assert list(docstrings.pairs_of_module("def broken(:\n")) == []  # not Python: nothing, no error


POD = """package Text::Thing;

=head1 NAME

Text::Thing - read and write B<things> in plain text

=head1 SYNOPSIS

    use Text::Thing;
    my $thing = Text::Thing->new;

=head1 DESCRIPTION

Text::Thing reads I<things> from files and writes them back, as L<Text::CSV|Text::CSV> does
for tables. It escapes E<lt> and E<gt>.X<thing>

    $thing->read("file");

=head1 METHODS

=cut
"""


def test_pod_gives_the_name_lines_summary_and_the_descriptions_prose():
    summary, description = perl_manuals.name_and_description(POD)
    assert summary == "read and write things in plain text"
    assert description == ("Text::Thing reads things from files and writes them back, as Text::CSV does for tables. "
                           "It escapes < and >.")


def test_pod_without_a_name_line_or_description_is_left_out():
    assert perl_manuals.name_and_description(POD.replace("=head1 DESCRIPTION", "=head1 OTHER")) is None
    assert perl_manuals.name_and_description(POD.replace("Text::Thing - read", "Text::Thing read")) is None


def test_the_writer_skips_repeated_documents_and_keeps_lines_tab_free(tmp_path):
    out = tmp_path / "pairs.tsv.xz"
    rows = [("g1", "A summary", "A document\twith a tab"), ("g2", "Another", "A document with a tab"),
            ("g2", "Third one", "Another\ndocument")]
    assert pairs_file.write_pairs(out, rows) == 2
    with lzma.open(out, "rt", encoding="utf-8") as f:
        assert f.read().splitlines() == ["g1\tA summary\tA document with a tab", "g2\tThird one\tAnother document"]
