"""Rebuild data/descriptions.tsv.xz from Debian's package lists (provenance).

Each Debian package has a one-line synopsis and a long description, both written by
a person: a document -> headline pair much like Gigaword's lead sentence -> headline
(Gehring et al. 2017, §5.4). This script reads the English descriptions
(Translation-en) and the Packages index that `apt-get -o Acquire::Languages=en update`
stores under /var/lib/apt/lists, and writes one line per distinct long description:

    source package <TAB> synopsis <TAB> long description (paragraphs joined)

Many binary packages share one long description (foo, foo-data, foo-doc ...): only
the first of each is kept, so the same text never appears twice, and the source
package is kept so that the example can split by it (no test pair has a sibling
package in training). Transitional and dummy packages, and descriptions of fewer
than 8 words, are left out. The example does not run this script: the result ships
in data/.

    apt-get -o Acquire::Languages=en update
    python make_corpus.py /var/lib/apt/lists data/descriptions.tsv.xz
"""

import lzma
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lib"))
from debian_lists import read_stanzas, source_packages  # noqa: E402

SKIP_SYNOPSIS = re.compile(r"\b(transitional|dummy|metapackage|meta-package)\b", re.I)
MIN_WORDS = 8


def descriptions(translation_file: Path):
    """(package, synopsis, long description) for each stanza of Translation-en."""
    for lines in read_stanzas(translation_file):
        package = synopsis = None
        body = []
        for line in lines:
            if line.startswith("Package: "):
                package = line[len("Package: "):].strip()
            elif line.startswith("Description-en: "):
                synopsis = line[len("Description-en: "):].strip()
            elif line.startswith(" ") and synopsis is not None:
                body.append(line.strip())
        if package and synopsis and body:
            text = " ".join(word for line in body if line != "." for word in line.split())
            yield package, synopsis, text


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: python make_corpus.py /var/lib/apt/lists OUT.tsv.xz")
    lists, out = Path(sys.argv[1]), Path(sys.argv[2])
    translations = sorted(lists.glob("*_debian_dists_*_main_i18n_Translation-en*"))
    packages = sorted(lists.glob("*_debian_dists_*_main_binary-*_Packages*"))
    if not translations or not packages:
        sys.exit(f"make_corpus: no Translation-en or Packages files in {lists}; run "
                 "'apt-get -o Acquire::Languages=en update' first")
    sources = {}
    for path in packages:
        sources.update(source_packages(path))
    seen, rows = set(), []
    for path in translations:
        for package, synopsis, text in descriptions(path):
            key = text.lower()
            if key in seen or SKIP_SYNOPSIS.search(synopsis) or len(text.split()) < MIN_WORDS:
                continue
            seen.add(key)
            clean = [s.replace("\t", " ") for s in (sources.get(package, package), synopsis, text)]
            rows.append("\t".join(clean) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(out, "wt", encoding="utf-8", preset=9) as f:
        f.writelines(rows)
    print(f"wrote {len(rows)} description -> synopsis pairs to {out}")


if __name__ == "__main__":
    main()
