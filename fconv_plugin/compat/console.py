"""The plugin's commands on a terminal: fairseq's own log format at INFO (``LOGLEVEL``
overrides, as in fairseq's commands), without hydra's DEBUG steps as fairseq composes its
configuration, or the four lines fairseq's batch iterator logs on every call; and a
``--help`` that starts with the command's own options (``short_help``); and a command that
lacks the parts of its extra says so in one line before it does anything (``require_extra``)."""

import argparse
import importlib
import logging
import os
import sys
from typing import Dict

FORMAT = "%(asctime)s | %(levelname)s | %(name)s | %(message)s"  # fairseq_cli's
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
QUIETER = {"hydra": logging.WARNING, "fairseq.tasks.fairseq_task": logging.WARNING}


def command_logging() -> None:
    """Log as fairseq's commands do, to stderr."""
    root = logging.getLogger()
    level = os.environ.get("LOGLEVEL", "INFO").upper()
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stderr))
    for handler in root.handlers:
        handler.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
    root.setLevel(level if level in logging.getLevelNamesMapping() else logging.INFO)
    for name, quieter in QUIETER.items():
        logging.getLogger(name).setLevel(quieter)


# fairseq-interactive's options that runs of the plugin's commands most often set
COMMON_OPTIONS = ("path", "source_lang", "target_lang", "tokenizer", "bpe", "bpe_codes", "beam", "nbest", "lenpen",
                  "max_len_a", "max_len_b", "replace_unk", "max_tokens", "batch_size", "cpu", "input", "user_dir")


class _FullHelp(argparse.Action):
    def __init__(self, option_strings, dest, hidden=None, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.hidden = hidden or {}

    def __call__(self, parser, namespace, values, option_string=None):
        for action, text in self.hidden.items():
            action.help = text
        parser.print_help()
        parser.exit()


def short_help(parser: argparse.ArgumentParser, command: str, usage: str, description: str) -> argparse.ArgumentParser:
    """fairseq's parser with a ``--help`` a person reads: the usage, the command's own
    options (its argument group, titled ``command``), then the fairseq-interactive options
    most runs set (``COMMON_OPTIONS``). ``--help-all`` lists every one of fairseq's, which
    are all accepted either way."""
    parser.usage = usage
    parser.description = description
    own = next(group for group in parser._action_groups if group.title == command)
    hidden = {}
    for action in parser._actions:
        if action in own._group_actions or action.dest in COMMON_OPTIONS or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._HelpAction):
            continue
        hidden[action] = action.help
        action.help = argparse.SUPPRESS
    parser.add_argument("--help-all", action=_FullHelp, hidden=hidden,
                        help=f"list all {len(hidden)} further options of fairseq-interactive (accepted either way)")
    # argparse prints its groups in this list's order (a stable part of the stdlib since 3.2)
    order = ["positional arguments", command, "options"]
    parser._action_groups.sort(key=lambda group: order.index(group.title) if group.title in order else len(order))
    for group in parser._action_groups:
        if group.title not in order and not group.title.startswith("fairseq"):
            group.title = f"fairseq: {group.title}"
    return parser


def require_extra(command: str, extra: str, parts: Dict[str, str]) -> None:
    """Stop with exit status 2 and one line when a part ``command`` needs cannot be imported:
    ``parts`` maps each module to the package that installs it, all in ``fconv_plugin[extra]``.
    Called first, before any option is read or a model loaded."""
    missing = []
    for module, package in parts.items():
        try:
            importlib.import_module(module)
        except ImportError as error:  # this part, or another part it imports (fastapi needs python-multipart)
            absent = parts.get(str(getattr(error, "name", None) or "").split(".")[0], package)
            if absent not in missing:
                missing.append(absent)
    if missing:
        named = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
        verb, pronoun = ("is", "it") if len(missing) == 1 else ("are", "them")
        print(f"{command}: error: {named} {verb} not installed and {command} needs {pronoun}: "
              f"pip install 'fconv_plugin[{extra}]'", file=sys.stderr)
        sys.exit(2)
