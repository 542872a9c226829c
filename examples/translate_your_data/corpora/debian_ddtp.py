"""Build parallel corpora from Debian's translated package descriptions (DDTP), for measuring train.sh.

Debian's Description Translation Project translates the English package descriptions
(Translation-en) into other languages (Translation-de, Translation-es, ...), each
translation keyed by the English text's ``Description-md5``. Translators keep the
paragraph structure, so the synopsis pairs with the synopsis and, where both sides have
the same number of paragraphs, each paragraph with its translation; a paragraph pair is
cut into sentence pairs (sentencex, Wikimedia's segmenter) where both sides have the same
number of sentences, else kept whole up to ``MAX_WORDS``. Text written by people about
software: a technical corpus of another domain and size than the quickstart's Bible.

One line per distinct pair, grouped by source package (train.sh's split keeps a package's
sentences together, so no test sentence has a sibling package's copy in training):

    source package <TAB> English <TAB> translation

    apt-get -o Acquire::Languages=en,de,es update
    python corpora/debian_ddtp.py /var/lib/apt/lists de ../data/debian_en_de.tsv.xz
    python corpora/debian_ddtp.py /var/lib/apt/lists es ../data/debian_en_es.tsv.xz

The examples do not run this script: the results ship in data/ (Debian's descriptions are
under the licences of their packages; DDTP translations are contributed under the same).
"""

import lzma
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from sentencex import segment

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
from debian_lists import list_files, read_stanzas, source_packages  # noqa: E402

MAX_WORDS = 60  # a paragraph pair longer than this, not cut into sentence pairs, is left out
MIN_WORDS = 3
SKIP = re.compile(r"\b(transitional|dummy|metapackage|meta-package)\b", re.I)


def descriptions(path: Path, language: str) -> Iterator[Tuple[str, str, List[str]]]:
    """(package, md5, [synopsis, paragraph, ...]) for each stanza of Translation-<language>."""
    field = f"Description-{language}: "
    for lines in read_stanzas(path):
        package = md5 = None
        blocks: List[List[str]] = []
        for line in lines:
            if line.startswith("Package: "):
                package = line[len("Package: "):].strip()
            elif line.startswith("Description-md5: "):
                md5 = line[len("Description-md5: "):].strip()
            elif line.startswith(field):
                blocks = [[line[len(field):].strip()], []]
            elif line.startswith(" ") and blocks:
                if line.strip() == ".":
                    blocks.append([])
                else:
                    blocks[-1].append(line.strip())
        if package and md5 and blocks:
            yield package, md5, [" ".join(block) for block in blocks if block]


def items(paragraph: str) -> List[str]:
    """A paragraph's list items ("* foo", "- bar") apart; else the paragraph."""
    parts = [part.strip() for part in re.split(r"(?:^|\s)[*+-]\s+(?=\S)", paragraph) if part.strip()]
    return parts or [paragraph]


def sentence_pairs(english: str, translation: str, language: str) -> Iterator[Tuple[str, str]]:
    english_items, translated_items = items(english), items(translation)
    if len(english_items) != len(translated_items):
        english_items, translated_items = [english], [translation]
    for en, tr in zip(english_items, translated_items):
        en_sentences = [s.strip() for s in segment("en", en) if s.strip()]
        tr_sentences = [s.strip() for s in segment(language, tr) if s.strip()]
        if len(en_sentences) == len(tr_sentences):
            yield from zip(en_sentences, tr_sentences)
        elif len(en.split()) <= MAX_WORDS and len(tr.split()) <= MAX_WORDS:
            yield en, tr


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: python debian_ddtp.py /var/lib/apt/lists LANGUAGE OUT.tsv.xz")
    lists, language, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    english_files, translated_files = list_files(lists, "i18n_Translation-en"), list_files(lists, f"i18n_Translation-{language}")
    packages = list_files(lists, "binary-")
    if not english_files or not translated_files or not packages:
        sys.exit(f"debian_ddtp: no Translation-en, Translation-{language} or Packages files in {lists}; run "
                 f"'apt-get -o Acquire::Languages=en,{language} update' first")
    sources: Dict[str, str] = {}
    for path in packages:
        if path.name.endswith(("Packages", "Packages.lz4")):
            sources.update(source_packages(path))
    english: Dict[str, List[str]] = {}
    for path in english_files:
        for _, md5, blocks in descriptions(path, "en"):
            english.setdefault(md5, blocks)
    seen, rows = set(), []
    for path in translated_files:
        for package, md5, blocks in descriptions(path, language):
            original = english.get(md5)
            if original is None or SKIP.search(original[0]):
                continue
            pairs = [(original[0], blocks[0])]
            if len(original) == len(blocks):
                for en, tr in zip(original[1:], blocks[1:]):
                    pairs.extend(sentence_pairs(en, tr, language))
            for en, tr in pairs:
                en, tr = " ".join(en.replace("\t", " ").split()), " ".join(tr.replace("\t", " ").split())
                if len(en.split()) < MIN_WORDS or (en, tr) in seen or en == tr:
                    continue
                seen.add((en, tr))
                rows.append(f"{sources.get(package, package)}\t{en}\t{tr}\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    with lzma.open(out, "wt", encoding="utf-8", preset=9) as f:
        f.writelines(rows)
    print(f"wrote {len(rows)} English -> {language} pairs of {len({row.split(chr(9))[0] for row in rows})} "
          f"source packages to {out}")


if __name__ == "__main__":
    main()
