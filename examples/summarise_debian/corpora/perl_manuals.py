"""Build a third summarisation corpus: Perl modules' manual NAME lines against their DESCRIPTION.

Every CPAN module documents itself in POD, and its manual page opens with a NAME line
(``Text::CSV - comma-separated values manipulator``) written by its author, then a
DESCRIPTION section: a document -> headline pair from manual pages. Debian packages
about 4,000 CPAN distributions as ``lib*-perl``; this script downloads them with
``apt-get download`` (after ``apt-get -o Acquire::Languages=en update``; the example does
not run this script: the result ships in data/), reads the ``.pm`` and ``.pod`` files from
each package's archive (``dpkg-deb --fsys-tarfile``; nothing is installed or executed),
and writes one line per module whose NAME line has a summary of 3 to 40 words and whose
DESCRIPTION has at least 8 words of prose:

    Debian package <TAB> NAME's summary <TAB> DESCRIPTION (ordinary paragraphs, formatting codes removed)

A package's modules share a group, so summarise.sh's split keeps them in one split; a
DESCRIPTION seen before is kept only once.

    python corpora/perl_manuals.py data/perl_manuals.tsv.xz [--debs DIR]
"""

import argparse
import io
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Iterator, Optional, Tuple

from pairs_file import inputs_directory, write_pairs

MIN_SUMMARY_WORDS, MAX_SUMMARY_WORDS, MIN_BODY_WORDS, MAX_BODY_WORDS = 3, 40, 8, 300
NAME_LINE = re.compile(r"^\s*\S+(?:\s*,\s*\S+)*\s+-+\s+(.+)$", re.S)  # "Foo::Bar - summary" (also "A, B - ...")
CODE = re.compile(r"[A-Z]<<+\s(.*?)\s>>+|[A-Z]<([^<>]*)>", re.S)
ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&"}


def _plain(text: str) -> str:
    """POD formatting codes removed: B<x> -> x, L<text|target> -> text, E<gt> -> >, X<...> and Z<> dropped."""
    def replace(match: re.Match) -> str:
        code, inner = match.group(0)[0], match.group(1) if match.group(1) is not None else match.group(2)
        if code in "XZ":
            return ""
        if code == "E":
            return ESCAPES.get(inner, "")
        if code == "L":
            return inner.split("|", 1)[0] if "|" in inner else inner.split("/", 1)[0] or inner.strip('/"')
        return inner
    for _ in range(5):  # nested codes: innermost first
        text, count = CODE.subn(replace, text)
        if not count:
            break
    return " ".join(text.replace("\t", " ").split())


def name_and_description(pod: str) -> Optional[Tuple[str, str]]:
    """The NAME line's summary and the DESCRIPTION's ordinary paragraphs; None when either is missing or too short."""
    sections, current = {}, None
    for paragraph in re.split(r"\n\s*\n", pod):
        if paragraph.startswith("=head1"):
            current = paragraph[len("=head1"):].strip().upper()
            sections.setdefault(current, [])
        elif current and paragraph.strip() and not paragraph[:1].isspace() and not paragraph.startswith("="):
            sections[current].append(paragraph)  # ordinary text: not a command, not verbatim code
    name = NAME_LINE.match(_plain(" ".join(sections.get("NAME", [])[:1])))
    body = _plain(" ".join(sections.get("DESCRIPTION", []))).split()
    if not name or len(body) < MIN_BODY_WORDS:
        return None
    summary = name.group(1).strip()
    if not MIN_SUMMARY_WORDS <= len(summary.split()) <= MAX_SUMMARY_WORDS:
        return None
    return summary, " ".join(body[:MAX_BODY_WORDS])


def pairs_of_deb(deb: Path) -> Iterator[Tuple[str, str]]:
    """(summary, description) of every module documented in one Debian package."""
    archive = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.isfile() and member.name.endswith((".pm", ".pod")):
                pod = tar.extractfile(member).read().decode("utf-8", errors="replace")
                pair = name_and_description(pod) if "=head1" in pod else None
                if pair:
                    yield pair


def download_perl_packages(directory: Path) -> None:
    """Every lib*-perl package apt's lists name, 500 a call."""
    names = subprocess.run(["apt-cache", "pkgnames"], check=True, capture_output=True, text=True).stdout.split()
    wanted = sorted(n for n in names if n.startswith("lib") and n.endswith("-perl"))
    for i in range(0, len(wanted), 500):
        subprocess.run(["apt-get", "download", "-q", *wanted[i:i + 500]], cwd=directory, check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--debs", type=Path, help="a directory that already holds the lib*-perl packages")
    args = parser.parse_args()
    with inputs_directory(args.debs, download_perl_packages) as debs:
        packages = sorted(debs.glob("*.deb"))
        rows = ((deb.name.split("_", 1)[0], summary, description)  # group: the package name
                for deb in packages for summary, description in pairs_of_deb(deb))
        written = write_pairs(args.out, rows)
    print(f"{written} pairs from {len(packages)} packages -> {args.out}")


if __name__ == "__main__":
    main()
