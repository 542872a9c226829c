"""Build a second summarisation corpus: Python docstrings' summary lines against their bodies.

A docstring opens with a one-line summary written by the author of the function or class
(PEP 257), followed by a longer description: a document -> headline pair of another
domain than Debian's package descriptions (API documentation: parameters, behaviour,
mathematics). This script downloads pinned wheels of scientific and web Python packages
from PyPI (``pip download``; the example does not run this script: the result ships in
data/), reads their ``.py`` files from the wheel archives with ``ast`` (nothing is
imported or executed), and writes one line per public function, method or class whose
docstring has a summary of 3 to 40 words and a body of at least 8 words:

    wheel/module path <TAB> summary line <TAB> body (prose: examples, references and markup removed)

Pairs of one module file share a group, so summarise.sh's split keeps a module's
docstrings in one split; a body seen before (an inherited or copied docstring) is kept
only once.

    python corpora/docstrings.py data/docstrings.tsv.xz [--wheels DIR]
"""

import argparse
import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Iterator, Optional, Tuple

from pairs_file import inputs_directory, write_pairs

WHEELS = ["numpy==2.1.3", "scipy==1.14.1", "sympy==1.13.3", "pandas==2.2.3", "scikit-learn==1.5.2",
          "matplotlib==3.9.2", "networkx==3.4.2", "nltk==3.9.1", "astropy==6.1.6", "statsmodels==0.14.4",
          "django==5.1.3", "twisted==24.10.0", "scikit-image==0.24.0", "biopython==1.84", "xarray==2024.10.0",
          "dask==2024.11.2", "sphinx==8.1.3", "docutils==0.21.2", "sqlalchemy==2.0.36", "transformers==4.46.3",
          "qiskit==1.2.4", "cirq-core==1.4.1", "tensorflow-probability==0.24.0", "pyro-ppl==1.9.1", "keras==3.6.0",
          "jax==0.4.35", "bokeh==3.6.1", "sunpy==6.0.3", "mpmath==1.3.0", "ipython==8.29.0", "tornado==6.4.2",
          "numba==0.60.0", "astroid==3.3.5", "pymc==5.18.2", "shapely==2.0.6", "geopandas==1.0.1", "pint==0.24.4",
          "gensim==4.3.3", "pygments==2.18.0", "polars==1.14.0", "ansible-core==2.17.6", "mypy==1.13.0",
          "pylint==3.3.1", "setuptools==75.6.0", "pennylane==0.39.0", "pyomo==6.8.2", "cvxpy==1.6.0", "mne==1.8.0",
          "dipy==1.10.0", "obspy==1.4.1", "yt==4.3.1", "pyvista==0.44.2", "trimesh==4.5.3", "galpy==1.10.1",
          "diffusers==0.31.0", "datasets==3.1.0", "lightning==2.4.0", "spacy==3.8.2", "celery==5.4.0",
          "pyglet==2.0.18", "nibabel==5.3.2", "brian2==2.7.1", "qutip==5.0.4"]
MIN_SUMMARY_WORDS, MAX_SUMMARY_WORDS, MIN_BODY_WORDS, MAX_BODY_WORDS = 3, 40, 8, 300
DROPPED_SECTIONS = {"examples", "example", "references", "see also", "notes on examples"}
UNDERLINE = re.compile(r"^\s*([-=~^*+#])\1{2,}\s*$")
GOOGLE_HEADING = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Return|Yields|Raises|Attributes|Note|Notes|"
                            r"Warning|Warnings|Example|Examples|See Also|References|Todo)\s*:\s*$", re.I)
ROLE = re.compile(r":[\w:.+-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")  # :func:`~numpy.sum` -> numpy.sum
LITERAL = re.compile(r"``([^`]*)``|`([^`<]*?)(?:\s*<[^>]*>)?`_{0,2}")


def _unmarked(text: str) -> str:
    text = ROLE.sub(r"\1", text)
    text = LITERAL.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    return " ".join(text.replace("\t", " ").split())


def summary_and_body(docstring: str) -> Optional[Tuple[str, str]]:
    """The first paragraph as one line, and the rest as prose; None when either is too short or long."""
    paragraphs = docstring.strip().split("\n\n", 1)
    if len(paragraphs) < 2:
        return None
    summary = _unmarked(paragraphs[0])
    lines, kept, skipping, in_directive = paragraphs[1].splitlines(), [], False, False
    for i, line in enumerate(lines):
        stripped = line.strip()
        underlined = i + 1 < len(lines) and UNDERLINE.match(lines[i + 1])
        if underlined or GOOGLE_HEADING.match(line):  # a section heading: drop it, and some whole sections
            skipping = stripped.rstrip(":").lower() in DROPPED_SECTIONS
            continue
        if skipping or UNDERLINE.match(line) or stripped.startswith((">>>", "... ")) or stripped == "...":
            continue
        if stripped.startswith(".. "):  # a directive (versionadded, math, plot ...): its own line and block
            in_directive = True
            continue
        if in_directive and (not stripped or line[:1].isspace()):
            continue
        in_directive = False
        kept.append(stripped)
    body = _unmarked(" ".join(kept)).split()
    if not (MIN_SUMMARY_WORDS <= len(summary.split()) <= MAX_SUMMARY_WORDS and len(body) >= MIN_BODY_WORDS):
        return None
    return summary, " ".join(body[:MAX_BODY_WORDS])


def pairs_of_module(source: str) -> Iterator[Tuple[str, str]]:
    """(summary, body) of each public function, method and class of one module's source text."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            docstring = ast.get_docstring(node)
            pair = summary_and_body(docstring) if docstring else None
            if pair:
                yield pair


def pairs_of_wheel(wheel: Path) -> Iterator[Tuple[str, str, str]]:
    """(group, summary, body) for every module of a wheel but its tests."""
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            if not name.endswith(".py") or re.search(r"(^|/)(tests?|testing)(/|$)|(^|/)test_", name):
                continue
            source = archive.read(name).decode("utf-8", errors="replace")
            for summary, body in pairs_of_module(source):
                yield name, summary, body


def download_wheels(directory: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
                    "3.11", "--platform", "manylinux2014_x86_64", "--platform", "any", "-d", str(directory), *WHEELS],
                   check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--wheels", type=Path, help="a directory that already holds the pinned wheels")
    args = parser.parse_args()
    with inputs_directory(args.wheels, download_wheels) as wheels:
        wheel_files = sorted(wheels.glob("*.whl"))
        written = write_pairs(args.out, (row for wheel in wheel_files for row in pairs_of_wheel(wheel)))
    print(f"{written} pairs from {len(wheel_files)} wheels -> {args.out}")


if __name__ == "__main__":
    main()
