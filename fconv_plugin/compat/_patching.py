"""The one way the host fixes replace a fairseq function: wrapped, once per fix."""


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
