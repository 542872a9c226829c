"""The one error type the plugin raises for bad input.

Its message is a single line that names the problem and what to do; the command-line
tools print just that line (see ``compat.cli_errors``).
"""


class FConvError(ValueError):
    """Bad configuration, checkpoint or input, explained in one line."""


class EmptySentence(FConvError):
    """A sentence with nothing in it to translate; ``where`` names it ("sentence 2")."""

    def __init__(self, where: str):
        super().__init__(f"{where} is empty")
        self.where = where


class TooLong(FConvError):
    """A sentence (or, ``word``, a single word of a document) longer than the model reads:
    ``count`` source tokens against its ``limit``. Each edge words its own advice from these."""

    def __init__(self, where: str, count: int, limit: int, word: bool = False):
        super().__init__(f"{where} has {'a word of ' if word else ''}{count} tokens; the model reads at most {limit}; "
                         "split it (translate_document splits long sentences itself)")
        self.where, self.count, self.limit, self.word = where, count, limit, word
