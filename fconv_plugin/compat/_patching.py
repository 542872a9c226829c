"""How the host fixes replace a fairseq function: wrapped, once per fix."""

import sys
from types import ModuleType
from typing import Optional


def patch(owner, name: str, tag: str, make_wrapper, *args) -> None:
    """Replace ``owner.name`` by ``make_wrapper(current, *args)`` unless ``tag`` did already."""
    current = getattr(owner, name)
    applied = getattr(current, "_fconv_plugin_patches", frozenset())
    if tag in applied:
        return
    wrapper = make_wrapper(current, *args)
    function = wrapper.__func__ if isinstance(wrapper, staticmethod) else wrapper
    function._fconv_plugin_patches = applied | {tag}
    setattr(owner, name, wrapper)


def running_cli_module(name: str) -> Optional[ModuleType]:
    """The module of fairseq's command ``name`` (e.g. fairseq_cli.interactive) if this
    process runs it, as a console script or with ``python -m``; never imported here
    (fairseq_cli modules configure the root logger when imported)."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) == name:
        return main
    return None
