"""Rebuild data/bible.{es,en}.xz from Debian's SWORD Bible packages (provenance).

The quickstart's corpus is the Reina-Valera 1909 Spanish Bible and the King James
English Bible, both public domain, aligned verse by verse. They come from Debian's
``sword-text-sparv`` and ``sword-text-kjv`` packages; this script reads their zText
modules (zlib blocks + a verse index, same KJV versification in both) and strips
the OSIS markup. The quickstart does not run it: the result ships in ``data/``.

    apt-get download sword-text-sparv sword-text-kjv
    python make_corpus.py sword-text-sparv_*.deb sword-text-kjv_*.deb data/
"""

import lzma
import re
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

MODULES = {"es": "spaRV1909eb", "en": "engKJV2006eb"}
NOTE = re.compile(r"<note\b.*?</note>", re.S)
TAG = re.compile(r"<[^>]+>")
SPACE = re.compile(r"\s+")


def read_ztext(module_dir: Path, testament: str):
    """Every entry of a zText module's verse index, decompressed ('' where empty)."""
    blocks_index = (module_dir / f"{testament}.bzs").read_bytes()
    verse_index = (module_dir / f"{testament}.bzv").read_bytes()
    data = (module_dir / f"{testament}.bzz").read_bytes()
    blocks = [struct.unpack("<III", blocks_index[i : i + 12]) for i in range(0, len(blocks_index), 12)]
    cache = {}
    for i in range(0, len(verse_index), 10):
        block, offset, size = struct.unpack("<IIH", verse_index[i : i + 10])
        if size == 0:
            yield ""
            continue
        if block not in cache:
            start, compressed, _ = blocks[block]
            cache = {block: zlib.decompress(data[start : start + compressed])}
        yield cache[block][offset : offset + size].decode("utf-8")


def plain_text(osis: str) -> str:
    return SPACE.sub(" ", TAG.sub("", NOTE.sub(" ", osis))).strip()


def main(debs, out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
        root = Path(tmp) / "usr/share/sword/modules/texts/ztext"
        texts = {
            lang: [plain_text(v) for t in ("ot", "nt") for v in read_ztext(root / module, t)]
            for lang, module in MODULES.items()
        }
    pairs = [(es, en) for es, en in zip(texts["es"], texts["en"]) if es and en]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for index, lang in enumerate(("es", "en")):
        with lzma.open(out / f"bible.{lang}.xz", "wt", encoding="utf-8", preset=9) as f:
            f.writelines(pair[index] + "\n" for pair in pairs)
    print(f"{len(pairs)} verse pairs written to {out}")


if __name__ == "__main__":
    main(sys.argv[1:-1], sys.argv[-1])
