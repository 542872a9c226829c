"""The one error type the plugin raises for bad input.

Its message is a single line that names the problem and what to do; the command-line
tools print just that line (see ``compat.cli_errors``).
"""


class FConvError(ValueError):
    """Bad configuration, checkpoint or input, explained in one line."""
