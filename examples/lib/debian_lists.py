"""Reading the package lists apt stores under /var/lib/apt/lists (the examples' corpus builders).

    apt-get -o Acquire::Languages=en update           # Packages and Translation-en
    apt-get -o Acquire::Languages=en,de,es update     # and the translators' Translation-de, -es
"""

import subprocess
from pathlib import Path
from typing import Dict, Iterator, List


def read_stanzas(path: Path) -> Iterator[List[str]]:
    """The stanzas of an apt list file (lz4 or plain), as lists of lines."""
    if path.suffix == ".lz4":
        text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", str(path)], check=True,
                              capture_output=True, text=True).stdout
    else:
        text = path.read_text(encoding="utf-8")
    for stanza in text.split("\n\n"):
        lines = stanza.splitlines()
        if lines:
            yield lines


def source_packages(packages_file: Path) -> Dict[str, str]:
    """binary package name -> source package name."""
    sources = {}
    for lines in read_stanzas(packages_file):
        fields = dict(line.split(": ", 1) for line in lines if ": " in line and not line.startswith(" "))
        name = fields.get("Package")
        if name:
            sources[name] = fields.get("Source", name).split(" ")[0]
    return sources


def list_files(lists: Path, pattern: str) -> List[Path]:
    return sorted(lists.glob(f"*_debian_dists_*_main_{pattern}*"))
