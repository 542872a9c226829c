"""Parsing of the layer options without running them.

fairseq's fconv passes ``--encoder-layers``, ``--decoder-layers`` and
``--decoder-attention`` to ``eval()``, and checkpoints store these strings, so loading
a checkpoint runs whatever it holds. Here the string is parsed into a syntax tree and
only this little language is interpreted:

    spec  := term ('+' term)*
    term  := list | list '*' INT | INT '*' list | '(' spec ')'
    list  := '[' item (',' item)* ']'          (a tuple of items is accepted too)
    item  := '(' INT ',' INT [',' INT] ')'     (layers)  |  True | False   (attention)

Anything else (names, calls, attributes, strings, ...) is refused with a one-line
error that points at the offending part.
"""

import ast
from typing import List, Union

from .errors import FConvError
from .modules.conv_block import ConvLayerSpec

MAX_SPEC_LENGTH = 10_000
MAX_LAYERS = 1_000

LAYERS_EXAMPLE = "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2"
ATTENTION_EXAMPLE = "True, False or [True, False, True]"


class _SpecSyntaxError(Exception):
    def __init__(self, problem: str, node: Union[ast.AST, None] = None):
        self.problem = problem
        self.node = node


def _interpret(node: ast.AST) -> object:
    """Value of an allowed node: int, bool, tuple or list; refuse everything else."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _interpret(node.operand)
        if type(operand) is not int:
            raise _SpecSyntaxError("a sign applies to whole numbers only", node)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Tuple):
        return tuple(_interpret(element) for element in node.elts)
    if isinstance(node, ast.List):
        return [_interpret(element) for element in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _interpret(node.left), _interpret(node.right)
        if not (isinstance(left, (list, tuple)) and type(left) is type(right)):
            raise _SpecSyntaxError("'+' joins two lists", node)
        if len(left) + len(right) > MAX_LAYERS:
            raise _SpecSyntaxError(f"more than {MAX_LAYERS} entries", node)
        return left + right
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _interpret(node.left), _interpret(node.right)
        if isinstance(left, (list, tuple)) and type(right) is int:
            items, count = left, right
        elif type(left) is int and isinstance(right, (list, tuple)):
            items, count = right, left
        else:
            raise _SpecSyntaxError("'*' repeats a list a whole number of times", node)
        if count < 0 or len(items) * count > MAX_LAYERS:
            raise _SpecSyntaxError(f"repeat count {count} is out of range (0..{MAX_LAYERS} entries)", node)
        return items * count
    raise _SpecSyntaxError(f"{_describe(node)} is not allowed", node)


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"name '{node.id}'"
    if isinstance(node, ast.Call):
        return "a function call"
    if isinstance(node, ast.Attribute):
        return "an attribute access"
    if isinstance(node, ast.Constant):
        return f"the value {node.value!r}"
    if isinstance(node, ast.BinOp):
        return f"the operator {type(node.op).__name__}"
    return type(node).__name__


def _parse(text: object, option: str, expected: str) -> object:
    if not isinstance(text, str):
        raise FConvError(f"{option} must be a string like '{expected}', got {type(text).__name__}")
    if len(text) > MAX_SPEC_LENGTH:
        raise FConvError(f"{option} is {len(text)} characters long; the limit is {MAX_SPEC_LENGTH}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        where = f" at column {e.offset}" if getattr(e, "offset", None) else ""
        raise FConvError(f"{option} {text!r} is not valid syntax{where}; write it like '{expected}'") from None
    try:
        return _interpret(tree.body)
    except RecursionError:
        raise FConvError(f"{option} is nested too deeply; write it like '{expected}'") from None
    except _SpecSyntaxError as e:
        raise FConvError(f"{option} {text!r}: {e.problem}{_locate(text.strip(), e.node)}; write it like '{expected}'") from None


def _locate(text: str, node: Union[ast.AST, None]) -> str:
    if node is None or not hasattr(node, "col_offset"):
        return ""
    segment = ast.get_source_segment(text, node) or ""
    if len(segment) > 40:
        segment = segment[:37] + "..."
    return f" (column {node.col_offset + 1}: {segment!r})"


def parse_conv_layers(text: str, option: str = "--encoder-layers") -> List[ConvLayerSpec]:
    """Layer specs from a string such as ``'[(512, 3)] * 9 + [(1024, 3, 1)]'``."""
    value = _parse(text, option, LAYERS_EXAMPLE)
    if not isinstance(value, (list, tuple)) or (value and not isinstance(value[0], (list, tuple))):
        raise FConvError(f"{option} {text!r} must be a list of (out_channels, kernel_width[, residual]) tuples, like '{LAYERS_EXAMPLE}'")
    if len(value) == 0:
        raise FConvError(f"{option} {text!r} has no layers; give at least one, like '[(512, 3)]'")
    specs = []
    for index, layer in enumerate(value):
        specs.append(_conv_layer(layer, index, option, text))
    return specs


def _conv_layer(layer: object, index: int, option: str, text: str) -> ConvLayerSpec:
    where = f"{option} {text!r}, layer {index + 1}"
    if not isinstance(layer, tuple) or len(layer) not in (2, 3) or any(type(v) is not int for v in layer):
        raise FConvError(f"{where} is {layer!r}; each layer is (out_channels, kernel_width) or (out_channels, kernel_width, residual) with whole numbers")
    spec = ConvLayerSpec(*layer)
    if spec.out_channels <= 0:
        raise FConvError(f"{where}: out_channels must be positive, got {spec.out_channels}")
    if spec.kernel_size <= 0:
        raise FConvError(f"{where}: kernel width must be positive, got {spec.kernel_size}")
    if not 0 <= spec.residual <= index + 1:
        raise FConvError(f"{where}: residual {spec.residual} must be between 0 (none) and {index + 1} (the input of the stack)")
    return spec


def parse_attention(text: str, num_layers: int, option: str = "--decoder-attention") -> List[bool]:
    """One flag per decoder layer from ``'True'``, ``'False'`` or a list of booleans."""
    value = _parse(text, option, ATTENTION_EXAMPLE)
    if type(value) is bool:
        return [value] * num_layers
    if not isinstance(value, (list, tuple)) or any(type(v) is not bool for v in value):
        raise FConvError(f"{option} {text!r} must be True, False or a list of booleans, one per decoder layer")
    if len(value) != num_layers:
        raise FConvError(f"{option} {text!r} has {len(value)} entries but the decoder has {num_layers} layers; give one True/False per layer")
    return list(value)

