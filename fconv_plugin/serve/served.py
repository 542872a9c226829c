"""The models a server serves, by name, with their language pairs worked out once, where they are loaded.

Every protocol asks the same questions of them: which model translates a pair, which
languages are read, the list LibreTranslate's clients show. ``ServedModels.of`` answers
them from the translators once; nothing answers them again per request.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..inference import Translator

# names LibreTranslate's clients show; a code without one is shown as the code
LANGUAGE_NAMES = {
    "ar": "Arabic", "de": "German", "en": "English", "es": "Spanish", "fi": "Finnish", "fr": "French",
    "it": "Italian", "ja": "Japanese", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}


@dataclass(frozen=True)
class ServedModels:
    """The translators by name, the default model, and their language pairs (each model's
    default beam is its translator's, ``Translator.defaults``: the one place it comes from)."""

    translators: Dict[str, Translator]
    default: str
    pairs: Dict[Tuple[str, str], str] = field(default_factory=dict)  # (source, target) -> the first model for it
    sources: List[str] = field(default_factory=list)  # the languages read, sorted
    first_pair: Tuple[Optional[str], Optional[str]] = (None, None)  # the first model's named pair

    @classmethod
    def of(cls, translators: Dict[str, Translator], default: str) -> "ServedModels":
        pairs: Dict[Tuple[str, str], str] = {}
        for name, translator in translators.items():
            source, target = translator.languages
            if source and target:
                pairs.setdefault((source, target), name)
        sources = sorted({t.languages[0] for t in translators.values() if t.languages[0]})
        return cls(translators, default, pairs, sources, next(iter(pairs), (None, None)))

    def named_pairs(self) -> str:
        """The pairs as an error message names them: "es-en, de-en", or "no named pair"."""
        return ", ".join(f"{source}-{target}" for source, target in self.pairs) or "no named pair"

    def model_for(self, source: str, target: str) -> Optional[str]:
        """The model that translates ``source`` into ``target``, or None."""
        return self.pairs.get((source, target))

    def language_list(self) -> List[dict]:
        """LibreTranslate's GET /languages: each language with the languages it translates into."""
        targets: Dict[str, set] = {}
        for source, target in self.pairs:
            targets.setdefault(source, set()).add(target)
            targets.setdefault(target, set())
        return [{"code": code, "name": LANGUAGE_NAMES.get(code, code), "targets": sorted(targets[code])}
                for code in sorted(targets)]

    def described(self) -> dict:
        """GET /models."""
        return {"default": self.default, "models": [self.translators[name].describe() for name in self.translators]}
