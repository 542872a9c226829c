"""Every command line the docs give is run as written (issue 55: docs/usage.md's
fconv-attention line crashed). Each is taken from its page, exactly, and run from a
directory where the paths it names hold real files: a quickstart run of a few updates
(``benchmarks/harness.quick_run``) for the Spanish-English lines, and a small German-English
corpus for README.md's fairseq lines, which then train, generate and translate with the
plugin's model.

``test_every_documented_command_is_accounted_for`` reads every bash block of README.md and
docs/*.md and fails on a line that is neither run here (``RUN_HERE``), nor run by another
named test (``RUN_ELSEWHERE``), nor impossible in CI for a stated reason (``NOT_RUN``). A
line given a bound here (``BOUNDS``: training that would otherwise run to convergence) is
run as written with only that bound appended.
"""

import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests import warm_commands

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# (page, the line's first words) -> the test here that runs it
RUN_HERE = {
    ("README.md", "fairseq-preprocess --source-lang de"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("README.md", "fairseq-train data-bin --user-dir fconv_plugin --arch"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("README.md", "fairseq-generate data-bin --user-dir fconv_plugin"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("README.md", "fairseq-interactive data-bin --user-dir fconv_plugin"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("README.md", "fairseq-train data-bin --user-dir \"$(python -c"): "test_readmes_user_dir_expression_names_the_installed_package",
    ("usage.md", "python -m fconv_plugin.cli.unk_dict"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("usage.md", "cp test.de data-bin/test.de-en.de"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("usage.md", "fairseq-generate data-bin --user-dir fconv_plugin"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("usage.md", "fairseq-interactive data-bin --user-dir fconv_plugin"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("deployment.md", "fconv-quantize checkpoints/checkpoint_best.pt"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("deployment.md", "fairseq-generate data-bin --user-dir fconv_plugin"): "test_readmes_fairseq_lines_then_usage_and_deployment",
    ("usage.md", "fconv-translate data-bin"): "test_usages_fconv_translate_line",
    ("usage.md", "fconv-attention"): "test_fconv_attention_as_usage_md_writes_it",
    ("onnx.md", "cd examples/bible_es_en/runs/latest"): "test_onnx_mds_export_and_translate_lines",
    ("onnx.md", "../../../../.venv/bin/fconv-export"): "test_onnx_mds_export_and_translate_lines",
    ("onnx.md", "../../../../.venv/bin/fconv-onnx-translate"): "test_onnx_mds_export_and_translate_lines",
    ("serving.md", "cd examples/bible_es_en/runs/latest"): "test_servings_server_and_curl_lines",
    ("serving.md", "../../../../.venv/bin/fconv-serve"): "test_servings_server_and_curl_lines",
    ("serving.md", "curl -s localhost:8000/translate"): "test_servings_server_and_curl_lines",
}
RUN_ELSEWHERE = {
    ("README.md", "bash scripts/setup_env.sh && bash examples/bible_es_en/quickstart.sh"):
        "setup: .ci/run runs scripts/setup_env.sh; the quickstart: benchmarks/harness.quick_run (tests/conftest.py's "
        "quickstart_run) runs examples/bible_es_en/quickstart.sh as written, with UPDATES=8 TRAIN=2000 VALID=40 TEST=40 EVALUATE=0",
    ("README.md", "bash scripts/setup_env.sh && .venv/bin/python -m pytest -q tests"):
        ".ci/run runs it exactly (tests/test_readme.py checks the two agree)",
    ("developing.md", ".venv/bin/python -m pytest -q -m \"not slow\" tests"): ".ci/run runs its parts with a compiled form on the no-compiler wheel",
    ("developing.md", ".venv/bin/python -m pytest -q tests"): ".ci/run runs it (the README's test command)",
    ("your-data.md", "bash examples/translate_your_data/train.sh de en corpus/train"):
        "tests/examples/test_translate_your_data.py runs the script on a corpus laid out so, with UPDATES=40",
    ("your-data.md", "ARCH=fconv_gigaword UPDATES=20000"): "tests/examples/test_translate_your_data.py sets ARCH, UPDATES and BPE_MERGES",
    ("your-data.md", "MINUTES=30 bash examples/translate_your_data/train.sh"):
        "tests/examples/test_translate_your_data.py runs the script with MINUTES=0.4",
    ("summarisation.md", "bash examples/summarise_debian/summarise.sh"): "tests/examples/test_summarise_debian.py (UPDATES=30)",
    ("usage.md", "fairseq-train data-bin --user-dir fconv_plugin --arch fconv_iwslt_de_en --optimizer adam"):
        "tests/cli/test_training_budget.py trains with --lr-scheduler time_budget --budget-minutes on the tiny task",
    ("summarisation.md", "UPDATES=1400 bash examples/summarise_debian/summarise.sh"): "tests/examples/test_summarise_debian.py sets UPDATES",
    ("summarisation.md", "CORPUS=my_pairs.tsv.xz bash"): "tests/examples/test_summarise_debian.py sets CORPUS to its own pairs",
}
NOT_RUN = {
    ("onnx.md", "pip install 'fconv_plugin[onnx]'"):
        "installs from the package index; scripts/setup_env.sh installs the same onnx, onnxscript and onnxruntime",
    ("quickstart.md", "pip install "):
        "the manual form of scripts/setup_env.sh's installs, in its order; CI runs setup_env.sh itself",
    ("usage.md", "torchrun --nproc_per_node 2"):
        "'...' stands for training options; tests/cli/test_distributed.py trains with 2 gloo processes under torchrun",
    ("usage.md", "torchrun --nnodes 2"): "needs two machines with 8 GPUs each",
}
# training lines run to convergence as written: here they stop after one update
BOUNDS = {("README.md", "fairseq-train data-bin --user-dir fconv_plugin --arch"): " --max-update 1 --no-epoch-checkpoints"}

pytestmark = pytest.mark.slow


def documented_lines():
    """(page name, command line) for every line of every bash block of README.md and docs/:
    continuations joined, comments and blank lines dropped."""
    lines = []
    for page in PAGES:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command and not command.startswith("#"):
                    lines.append((page.name, command))
    return lines


def _find(table, page, command):
    return [value for (where, start), value in table.items() if where == page and command.startswith(start)]


def documented(page: str, start: str) -> str:
    """The one documented line of ``page`` that starts with ``start``, with its bound if it has one."""
    found = [command for where, command in documented_lines() if where == page and command.startswith(start)]
    assert len(found) == 1, f"{page}: {len(found)} command lines start with {start!r}"
    return found[0] + BOUNDS.get((page, start), "")


def test_every_documented_command_is_accounted_for():
    lines = documented_lines()
    assert len(lines) > 30
    missing = [(page, command) for page, command in lines
               if len(_find(RUN_HERE, page, command) + _find(RUN_ELSEWHERE, page, command) + _find(NOT_RUN, page, command)) != 1]
    assert not missing, "documented but run by no test (add it to RUN_HERE, RUN_ELSEWHERE or NOT_RUN):\n" + "\n".join(
        f"  {page}: {command}" for page, command in missing)
    here = {name for name, value in globals().items() if name.startswith("test_")}
    assert set(RUN_HERE.values()) <= here
    for (page, start) in [*RUN_HERE, *RUN_ELSEWHERE, *NOT_RUN]:  # no entry for a line that is gone
        assert any(where == page and command.startswith(start) for where, command in lines), (page, start)


def _run(command: str, cwd: Path, timeout: int = 900, **kwargs) -> subprocess.CompletedProcess:
    """``command`` by bash in ``cwd``, with this environment's commands first on PATH."""
    result = subprocess.run(["bash", "-c", "set -euo pipefail\n" + command], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, env={**os.environ, "PATH": f"{warm_commands.bin_dir()}{os.pathsep}{os.environ['PATH']}"},
                            **kwargs)
    assert result.returncode == 0, f"{command}\n{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


@pytest.fixture
def beside_a_quickstart_run(quickstart_run, tmp_path):
    """A working directory like the repository's root after the quickstart: its
    examples/bible_es_en/runs/latest holds a quickstart run's files (links to them, so
    what a command writes there stays here), and .venv is this environment."""
    latest = tmp_path / "examples" / "bible_es_en" / "runs" / "latest"
    latest.mkdir(parents=True)
    for name in ("data-bin", "checkpoints", "codes", "test.raw.es"):
        (latest / name).symlink_to(quickstart_run / name)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    return tmp_path


def test_fconv_attention_as_usage_md_writes_it(beside_a_quickstart_run):
    """docs/usage.md's line has no -s/-t: the languages come from the data-bin's files."""
    _run(documented("usage.md", "fconv-attention"), beside_a_quickstart_run, timeout=600)
    written = sorted((beside_a_quickstart_run / "attention").glob("*.png"))
    assert len(written) == 1 and written[0].stat().st_size > 10_000


def test_usages_fconv_translate_line(beside_a_quickstart_run):
    run = beside_a_quickstart_run / "examples" / "bible_es_en" / "runs" / "latest"
    verses = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()[:6]
    (run / "chapter.es.txt").write_text("\n".join(verses[:3]) + "\n\n" + "\n".join(verses[3:]) + "\n", encoding="utf-8")
    _run(documented("usage.md", "fconv-translate data-bin"), run, timeout=600)
    translated = (run / "chapter.en.txt").read_text(encoding="utf-8").split("\n")
    assert len(translated) == 8 and translated[3] == "" and all(translated[i].strip() for i in (0, 1, 2, 4, 5, 6))


def test_onnx_mds_export_and_translate_lines(beside_a_quickstart_run):
    commands = [documented("onnx.md", start) for start in
                ("cd examples/bible_es_en/runs/latest", "../../../../.venv/bin/fconv-export",
                 "../../../../.venv/bin/fconv-onnx-translate")]
    _run("\n".join(commands), beside_a_quickstart_run, timeout=900)
    run = beside_a_quickstart_run / "examples" / "bible_es_en" / "runs" / "latest"
    verses = len((run / "test.raw.es").read_text(encoding="utf-8").splitlines())
    assert len((run / "test.onnx.en").read_text(encoding="utf-8").splitlines()) == verses


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_servings_server_and_curl_lines(beside_a_quickstart_run):
    """The server line as written (port 8000, which must be free), in the background; then the curl line."""
    assert _port_is_free(8000), "port 8000 is taken: docs/serving.md's lines name it"
    serve = "\n".join(documented("serving.md", start) for start in
                      ("cd examples/bible_es_en/runs/latest", "../../../../.venv/bin/fconv-serve"))
    log = open(beside_a_quickstart_run / "serve.log", "w")
    server = subprocess.Popen(["bash", "-c", "exec 2>&1\n" + serve.replace("\n../", "\nexec ../")],
                              cwd=beside_a_quickstart_run, stdout=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, (beside_a_quickstart_run / "serve.log").read_text()[-3000:]
            try:
                if urllib.request.urlopen("http://127.0.0.1:8000/health", timeout=2).status == 200:
                    break
            except OSError:
                assert time.monotonic() < deadline, "fconv-serve did not answer in 180 s"
                time.sleep(0.5)
        answer = json.loads(_run(documented("serving.md", "curl -s localhost:8000/translate"), beside_a_quickstart_run).stdout)
        assert [bool(t["text"].strip()) for t in answer["translations"]] == [True, True]
    finally:
        server.terminate()
        server.wait(60)
        log.close()


@pytest.fixture(scope="module")
def german_english_corpus(tmp_path_factory):
    """train/valid/test.de and .en after BPE (subword-nmt, its codes in ``codes``), and the
    plugin beside them as ``fconv_plugin``: README.md's lines run from the repository root."""
    from subword_nmt.apply_bpe import BPE
    from subword_nmt.learn_bpe import learn_bpe

    scene = tmp_path_factory.mktemp("readme")
    rng = random.Random(7)
    words = {"de": [f"wort{i}" for i in range(24)], "en": [f"word{i}" for i in range(24)]}
    splits = {"train": 160, "valid": 16, "test": 8}
    text = {}
    for split, count in splits.items():
        rows = [rng.sample(range(24), rng.randint(3, 8)) for _ in range(count)]
        for language in ("de", "en"):
            text[split, language] = [" ".join(words[language][i] for i in row) for row in rows]
    raw = scene / "raw.txt"
    raw.write_text("\n".join(text["train", "de"] + text["train", "en"]) + "\n")
    with open(raw) as source, open(scene / "codes", "w") as codes:
        learn_bpe(source, codes, 40)
    with open(scene / "codes") as codes:
        bpe = BPE(codes)
    for (split, language), lines in text.items():
        (scene / f"{split}.{language}").write_text("\n".join(bpe.process_line(line) for line in lines) + "\n")
    (scene / "fconv_plugin").symlink_to(ROOT / "fconv_plugin")
    return scene


@pytest.mark.long
def test_readmes_fairseq_lines_then_usage_and_deployment(german_english_corpus):
    """README.md's four fairseq lines in order (training bounded to one update), then
    docs/usage.md's --replace-unk lines and docs/deployment.md's int8 lines on their model."""
    scene = german_english_corpus
    for start in ("fairseq-preprocess --source-lang de", "fairseq-train data-bin --user-dir fconv_plugin --arch"):
        result = _run(documented("README.md", start), scene, timeout=1200)
    assert "fconv_plugin: replaced fairseq.models.fconv.FConvModel" in result.stderr + result.stdout
    generated = _run(documented("README.md", "fairseq-generate data-bin --user-dir fconv_plugin"), scene).stdout
    assert len(re.findall(r"^H-\d+\t", generated, re.M)) == 8
    interactive = _run(documented("README.md", "fairseq-interactive data-bin --user-dir fconv_plugin"), scene,
                       input="wort1 wort2 wort3\nwort4 wort5\n").stdout
    assert len(re.findall(r"^D-\d+\t", interactive, re.M)) == 2

    _run(documented("usage.md", "python -m fconv_plugin.cli.unk_dict"), scene)
    assert (scene / "unk-dict.txt").read_text().strip()
    _run(documented("usage.md", "cp test.de data-bin/test.de-en.de"), scene)
    generated = _run(documented("usage.md", "fairseq-generate data-bin --user-dir fconv_plugin"), scene).stdout
    assert len(re.findall(r"^H-\d+\t", generated, re.M)) == 8
    interactive = _run(documented("usage.md", "fairseq-interactive data-bin --user-dir fconv_plugin"), scene,
                       input="wort1 wort2 unbekannt\n").stdout
    assert len(re.findall(r"^D-\d+\t", interactive, re.M)) == 1

    _run(documented("deployment.md", "fconv-quantize checkpoints/checkpoint_best.pt"), scene)
    generated = _run(documented("deployment.md", "fairseq-generate data-bin --user-dir fconv_plugin"), scene).stdout
    assert len(re.findall(r"^H-\d+\t", generated, re.M)) == 8


def test_readmes_user_dir_expression_names_the_installed_package(tmp_path):
    """The line's ``...`` stands for the training options above; its point, the expression
    in --user-dir, is run from elsewhere than the repository and names the package."""
    line = documented("README.md", 'fairseq-train data-bin --user-dir "$(python -c')
    expression = re.search(r'--user-dir "\$\((.*)\)"', line).group(1)
    directory = Path(_run(expression, tmp_path).stdout.strip())
    assert (directory / "__init__.py").is_file() and directory.name == "fconv_plugin"


def test_fconv_translate_needs_no_languages_where_the_data_bin_names_them(quickstart_run, tmp_path):
    """The same crash hydra gave fconv-attention (tokenizer.source_lang=null) reached every
    command of the inference core; the languages now come from the data-bin for all of them."""
    result = subprocess.run([str(warm_commands.bin_dir() / "fconv-translate"), str(quickstart_run / "data-bin"), "--path",
                             str(quickstart_run / "checkpoints" / "checkpoint_best.pt"), "--tokenizer", "moses",
                             "--bpe", "subword_nmt", "--bpe-codes", str(quickstart_run / "codes"), "--no-progress-bar"],
                            input="Y dijo Dios: Sea la luz.\n", capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(result.stdout.splitlines()) == 1 and result.stdout.strip()
