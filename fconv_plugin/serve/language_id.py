"""Which language a text is in, for LibreTranslate's ``POST /detect`` and ``source: "auto"``:
py3langid (langid.py's maintained fork, its model inside its wheel: nothing downloaded),
over its 140 languages, with probabilities normalised to sum to 1.

The served models decide what is answered: ``/detect`` lists the languages the models
read, ranked; ``auto`` takes the language the text is most likely in, over all 140, and
is refused (LibreTranslate's "xx is not supported") where no model reads it.
"""

import functools
from typing import Iterable, List, Tuple


@functools.lru_cache(maxsize=1)
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def ranked(text: str) -> List[Tuple[str, float]]:
    """Every language the identifier knows, most likely first, with its probability."""
    return [(code, float(probability)) for code, probability in _identifier().rank(text)]


def known(languages: Iterable[str]) -> List[str]:
    return [language for language in languages if language in set(_identifier().labels)]


def detections(text: str, served: Iterable[str]) -> List[dict]:
    """LibreTranslate's /detect answer: each served language with its confidence (0-100),
    most likely first; a served code the identifier does not know has confidence 0."""
    probabilities = dict(ranked(text))
    answer = [{"language": code, "confidence": round(100.0 * probabilities.get(code, 0.0), 2)} for code in served]
    return sorted(answer, key=lambda detection: -detection["confidence"])


def most_likely(text: str) -> Tuple[str, float]:
    """(language, confidence 0-100) of ``text``, over every language the identifier knows."""
    code, probability = ranked(text)[0]
    return code, round(100.0 * probability, 2)
