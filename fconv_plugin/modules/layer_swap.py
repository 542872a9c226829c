"""Replacing a trained model's layers by other forms of the same function, in place.

The int8 forms (``int8.py``) and the plain forms an ONNX export needs
(``fconv_plugin/export/plain_layers.py``) are swapped in by layer type, through one
table per form.
"""

from typing import Callable, Dict, Iterable, Tuple

from torch import nn

from ..errors import FConvError


def replace_layers_(
    model: nn.Module,
    forms: Dict[type, Callable[[nn.Module], nn.Module]],
    keep: Iterable[nn.Module] = (),
    must_have_form: Tuple[type, ...] = (),
    form_name: str = "",
) -> None:
    """Replace every layer whose exact type is in ``forms`` by ``forms[type](layer)``.

    Layers in ``keep`` stay. A layer reachable under two names is replaced by one new
    module under both. A layer that is an instance of ``must_have_form`` but whose
    exact type has no entry is refused by name (a subclass the table does not know).
    """
    kept = {id(module) for module in keep}
    replacements: Dict[int, nn.Module] = {}
    for parent in list(model.modules()):
        for name, child in list(parent._modules.items()):  # every name, even two for one module
            if child is None or id(child) in kept:
                continue
            make_form = forms.get(type(child))
            if make_form is None:
                if isinstance(child, must_have_form):
                    raise FConvError(f"{type(child).__name__} has no {form_name} form; add one to its table of forms")
                continue
            if id(child) not in replacements:
                replacements[id(child)] = make_form(child)
            setattr(parent, name, replacements[id(child)])
