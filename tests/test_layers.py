"""The package's layers import one way, checked by importing each layer in a fresh process
and by reading the sources. ``LAYERS`` states the order once (docs/design.md#layers names
the same parts in the same order, checked here); compat/ (host fixes) only from entry
points; backend.py the one selector of compiled or torch forms and the only reader of
native/; fconv_onnx without torch, fairseq or fconv_plugin.
"""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fconv_plugin"

LOADED = """
import json, sys
def loaded():
    return {{name for name in sys.modules if name.split(".")[0] in ("fconv_plugin", "fconv_onnx", "torch", "fairseq", "fairseq_cli")}}
before = loaded() if {baseline!r} is None else (__import__({baseline!r}), loaded())[1]
import {module}
print(json.dumps(sorted(loaded() - before)))
"""

# (what is imported, package prefixes it must not load). The package itself registers the
# model (fairseq's --user-dir imports it), so a subpackage is measured by what it loads
# beyond ``import fconv_plugin``.
RULES = [
    ("fconv_plugin", ["fconv_plugin.inference", "fconv_plugin.compat", "fconv_plugin.cli", "fconv_plugin.serve",
                      "fconv_plugin.export", "fairseq_cli"]),
    ("fconv_plugin.decoding.search", ["fconv_plugin.inference", "fconv_plugin.compat", "fconv_plugin.cli",
                                      "fconv_plugin.serve", "fconv_plugin.export", "fairseq_cli"]),
    ("fconv_plugin.inference", ["fconv_plugin.compat", "fconv_plugin.cli", "fconv_plugin.serve", "fconv_plugin.export",
                                "fairseq_cli"]),
    ("fconv_plugin.serve.app", ["fconv_plugin.cli", "fconv_plugin.export", "fairseq_cli"]),
    ("fconv_plugin.serve.main", ["fconv_plugin.cli", "fconv_plugin.export", "fairseq_cli"]),
    ("fconv_plugin.export.main", ["fconv_plugin.cli", "fconv_plugin.serve", "fairseq_cli"]),
    ("fconv_plugin.cli.translate", ["fconv_plugin.serve", "fconv_plugin.export", "fairseq_cli"]),
]


def _loaded(module: str, baseline=None) -> list:
    """What importing ``module`` in a fresh process loads (after ``baseline``, if given)."""
    script = LOADED.format(module=module, baseline=baseline)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                            check=True)
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("module,forbidden", RULES, ids=[module for module, _ in RULES])
def test_a_layer_loads_nothing_above_it(module, forbidden):
    loaded = _loaded(module, None if module == "fconv_plugin" else "fconv_plugin")
    assert module in loaded
    offending = [name for name in loaded if any(name == f or name.startswith(f + ".") for f in forbidden)]
    assert offending == []


# The package's parts from the bottom up (docs/design.md#layers): a part imports only parts of
# the layers below its own, never one of its own layer or above.
LAYERS = [
    ["errors"],
    ["native", "precision", "host_memory", "checkpoint_io"],  # the compiled loops' loader; the CPU's bfloat16 units;
    # what training does with freed memory; safe loading
    ["backend"],  # the one selector of compiled or torch forms, over native (test below)
    ["modules", "optim"],  # the paper and nothing else (test below); the training budget's plan and scheduler
    ["layer_spec"],  # the model's options in the paper's layer terms
    ["deployment"],  # the paper layers' int8 forms
    ["models"],  # the fairseq model
    ["decoding"],  # the step and the search, torch and compiled forms
    ["inference"],  # the inference core
    ["compat"],  # the host fixes, installed by the entry points only (test below)
    ["package root"],  # registers the model and the scheduler; fairseq's --user-dir
    ["cli", "serve", "export"],  # the faces, none importing another
]
RANK = {part: rank for rank, layer in enumerate(LAYERS) for part in layer}
PARTS = {path.stem if path.is_file() else path.name for path in PACKAGE.iterdir() if path.suffix == ".py" or path.is_dir()}


def _part(path_parts) -> str:
    """The part a module of the package belongs to: its top-level module or folder, the
    package root for fconv_plugin/__init__.py and a name defined there."""
    return path_parts[0] if path_parts and path_parts[0] in PARTS and path_parts[0] != "__init__" else "package root"


def test_the_layer_order_names_every_part_once():
    named = [part for layer in LAYERS for part in layer]
    assert len(named) == len(set(named))
    assert set(named) == {part for part in PARTS if part not in ("__init__", "__pycache__")} | {"package root"}


def test_the_design_documents_layer_table_is_the_order_stated_here():
    text = (ROOT / "docs" / "design.md").read_text().split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [re.findall(r"`([\w ]+)`", row.split("|")[1]) for row in rows] == LAYERS


def test_each_part_imports_only_the_layers_below_it():
    """Read from the sources: the import test above cannot see modules/ or checkpoint_io
    apart from the model that ``import fconv_plugin`` registers."""
    offending = []
    for path in PACKAGE.rglob("*.py"):
        part = _part(path.relative_to(PACKAGE).with_suffix("").parts)
        for line, name in _imports(path):
            if not name.startswith("fconv_plugin."):
                continue
            imported = _part(name.split(".")[1:])
            if imported != part and RANK[imported] >= RANK[part]:
                offending.append((path.relative_to(ROOT).as_posix(), line, name))
    assert offending == []


SELECTOR = "fconv_plugin/backend.py"


def test_only_the_selector_chooses_between_compiled_and_torch_forms():
    """backend.py alone loads the compiled loops (``native``: fconv-info imports its
    build, which chooses nothing), reads ``FCONV_NATIVE`` and asks whether an exporter
    traces; everyone else gets its choice (docs/design.md#decoding)."""
    offending = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative == SELECTOR or relative.startswith("fconv_plugin/native/"):
            continue
        for line, name in _imports(path):
            if name.split(".")[:2] == ["fconv_plugin", "native"] and not (
                    relative == "fconv_plugin/cli/info.py" and name == "fconv_plugin.native.build"):
                offending.append((relative, line, name))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and id(node) not in docstrings and "FCONV_NATIVE" in str(node.value):
                offending.append((relative, node.lineno, "FCONV_NATIVE"))
            if isinstance(node, ast.Attribute) and node.attr in ("is_compiling", "_compiled_loops", "fused_rows"):
                offending.append((relative, node.lineno, node.attr))
    assert offending == []


def test_the_onnx_runtime_imports_no_torch_fairseq_or_plugin():
    loaded = _loaded("fconv_onnx.translate, fconv_onnx.manifest")
    assert "fconv_onnx.manifest" in loaded
    assert [name for name in loaded if name.split(".")[0] in ("torch", "fairseq", "fconv_plugin")] == []


def _imports(path: Path):
    """(line, imported module as written, resolved against the package) of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"  # ``from ..decoding import backend`` imports a module
                if not node.module or (ROOT / submodule.replace(".", "/")).with_suffix(".py").is_file():
                    yield node.lineno, submodule
                else:
                    yield node.lineno, base


ENTRY_POINTS = {"fconv_plugin/__init__.py", "fconv_plugin/serve/main.py", "fconv_plugin/export/main.py"}


def test_only_entry_points_import_the_host_fixes():
    """compat/ is imported by the package's --user-dir hook and the commands, never by a layer."""
    offending = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("fconv_plugin/compat/") or relative.startswith("fconv_plugin/cli/") or relative in ENTRY_POINTS:
            continue
        offending += [(relative, line) for line, name in _imports(path) if name.startswith("fconv_plugin.compat")]
    assert offending == []


def test_no_layer_writes_the_models_generation_flags():
    """need_attn and the beam settings are the model's own: set by its methods, never from outside."""
    offending = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("fconv_plugin/models/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and target.attr in ("need_attn", "share_attention_across_beam",
                                                                             "beam_size", "batch_invariant"):
                        offending.append((relative, node.lineno, target.attr))
    assert offending == []


def test_the_paper_layer_is_only_the_paper():
    """modules/ holds the paper's layers: no deployment form (int8), no compiled loop, no
    following of beam search's rows, and at most 1,000 lines; the int8 forms are
    deployment/'s, the attention source's beam layout models/attention_rows.py's
    (docs/design.md#layers)."""
    sources = sorted((PACKAGE / "modules").rglob("*"))
    assert [path.name for path in sources if path.suffix not in (".py", ".pyc") and path.is_file()] == []
    python = [path for path in sources if path.suffix == ".py"]
    assert sum(len(path.read_text(encoding="utf-8").splitlines()) for path in python) <= 1000
    for path in python:
        imported = [name for _, name in _imports(path)]
        assert not [name for name in imported if name.split(".")[:2] in (["fconv_plugin", "native"],
                                                                         ["fconv_plugin", "deployment"])], path
        assert not [line for line in path.read_text(encoding="utf-8").splitlines()
                    if line.startswith("class Int8")], path
        assert not [line for line in path.read_text(encoding="utf-8").splitlines()
                    if line.strip().startswith(("def shared_across", "def for_rows", "def for_sentences"))], path


def test_the_translator_is_a_face_that_hands_each_job_on():
    """``Translator`` stays the inference core's public face (at most 150 lines): loading,
    the text codec and the batch session are modules of their own, and within the core the
    text codec alone replaces unknown words (docs/design.md)."""
    inference = PACKAGE / "inference"
    assert len((inference / "translator.py").read_text(encoding="utf-8").splitlines()) <= 150
    replacing = sorted(path.name for path in inference.glob("*.py")
                       if any(name.startswith("fconv_plugin.modules.unk_replacement") for _, name in _imports(path)))
    assert replacing == ["text_codec.py"]


HTTP_STACK = ("fastapi", "starlette", "uvicorn")


def test_the_server_routes_in_one_place_and_serves_below_it():
    """fconv-serve's HTTP is app.py's (and main.py's, which runs uvicorn): the service,
    the protocol adapters, the batcher and the rest of serve/ import no web framework, and
    ``create_app`` only routes, in at most 60 lines (docs/design.md)."""
    serve = PACKAGE / "serve"
    http = sorted(path.name for path in serve.glob("*.py")
                  if any(name.split(".")[0] in HTTP_STACK for _, name in _imports(path)))
    assert http == ["app.py", "main.py"]
    app = (serve / "app.py").read_text(encoding="utf-8")
    create_app = next(node for node in ast.parse(app).body if getattr(node, "name", None) == "create_app")
    assert create_app.end_lineno - create_app.lineno + 1 <= 60
