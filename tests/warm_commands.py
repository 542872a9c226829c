"""This environment's fairseq and fconv commands, each run in its own process forked from one
that has already imported the libraries (torch, numpy, scipy, scikit-learn, hydra, ...) and
fairseq itself, so that a test's command does not spend ~5.5 of its ~6 s starting up (issue
62: the suite starts hundreds of such processes, and importing was most of many tests' time).

Each command imports fairseq_cli and the plugin itself, in its own order, and runs as its own
process with its own arguments, environment, directory, standard streams (rebuilt as a new
interpreter builds them for that environment) and exit status. fairseq is out of the
command's ``sys.modules`` until the command first imports it; then it is put back, and what
importing it wrote and did to logging (text_to_speech's ``logging.basicConfig`` and its
request for tensorboardX) is done again at that moment, so that the command's log reads as a
new process's would, whether it set up logging before importing fairseq (fairseq-train) or
not (fairseq-generate). What would make those libraries load differently (``OMP_*``,
``PYTHONPATH``, another locale's encoding, other resource limits) makes the command run as a
plain process instead: the shim then ``exec``s the real script, as it does whenever no warm
process answers.

Three parts, one file:
- ``bin_dir()``: a directory of shims, one per console script of this environment
  (``fairseq-train``, ``fconv-translate``, ...) and for its ``python`` (``python SCRIPT.py``
  and ``python -m MODULE`` run warm, with ``sys.executable`` this shim, so that what they
  start runs warm too), beside links to its other programs;
- the shim's side (``run_shim``, standard library only, started with ``python -S``): sends
  its argv, environment, directory and file descriptors 0-2 to the warm process, forwards
  signals to the command and exits as the command exited (killed with the same signal);
- the warm process (``serve``, started by ``start()`` from tests/conftest.py): imports the
  libraries once and forks a child per command; a child whose shim dies is killed, so a
  test's timeout or SIGKILL reaches the command.

A preloaded library (``LD_PRELOAD``) is chosen as a process starts: the examples start
fairseq-train and their speed probe with tcmalloc where it is installed
(``fconv_plugin.host_memory.training_preload``), so a second warm process runs with it
preloaded, and each shim asks the warm process whose ``LD_PRELOAD`` is its own
(``_socket_for``).
"""

import hashlib
import json
import os
import signal
import socket
import struct
import sys
import tempfile
from pathlib import Path

REAL_BIN = Path(sys.executable).parent
_HERE = Path(__file__).resolve()
# what changes how torch, numpy, scipy or Python itself start up: a command whose value for
# any of these differs from the warm process's runs as a plain process
_IMPORT_TIME = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "GOTOBLAS", "BLIS_", "NUMEXPR_", "NPY_", "SCIPY_",
                "SKLEARN_", "JOBLIB_", "TORCH", "PYTORCH", "CUDA", "NVIDIA", "LD_", "MALLOC", "PYTHON")
# ... except what the child sets up as a new interpreter would from its environment
_REBUILT_IN_THE_CHILD = {"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONWARNINGS"}
# ... and what torch reads only when it is used, from the environment the child has by then
# (inductor's cache directory, which torch.compile also writes into the process's environment)
_READ_WHEN_USED = {"TORCHINDUCTOR_CACHE_DIR"}
# ... and what scikit-learn and joblib set with os.environ.setdefault when imported, for Intel's
# OpenMP, which nothing here loads (torch's is GNU's): a command's imports set them the same way
SET_BY_IMPORTS = {"KMP_DUPLICATE_LIB_OK": "True", "KMP_INIT_AT_FORK": "FALSE"}
_state = {}


def _import_time_environment(env):
    return {name: value for name, value in env.items()
            if name.startswith(_IMPORT_TIME) and name not in _REBUILT_IN_THE_CHILD and name not in _READ_WHEN_USED
            and not (name in SET_BY_IMPORTS and value == SET_BY_IMPORTS[name])}


def _interpreter_facts():
    """What this interpreter decided at start-up from its environment, beside the variables."""
    import codecs
    import locale
    import resource

    limits = {name: resource.getrlimit(getattr(resource, name))
              for name in ("RLIMIT_FSIZE", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_CPU",
                           "RLIMIT_CORE", "RLIMIT_NPROC", "RLIMIT_MEMLOCK")}
    return {"filesystem": [codecs.lookup(sys.getfilesystemencoding()).name, sys.getfilesystemencodeerrors()],
            "preferred": codecs.lookup(locale.getpreferredencoding(False)).name,
            "limits": {name: list(value) for name, value in limits.items()}}


def _stream_facts():
    """How this interpreter built its standard streams (encoding, errors, buffering)."""
    facts = []
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if stream is None:
            facts.append(None)
            continue
        facts.append({"encoding": stream.encoding, "errors": stream.errors, "line_buffering": stream.line_buffering,
                      "write_through": getattr(stream, "write_through", False),
                      "raw": type(getattr(stream, "buffer", None)).__name__ == "FileIO"})
    return facts


# --- the shim's side (standard library only) ----------------------------------------------

def _send(connection, message: dict, fds=()):
    payload = json.dumps(message).encode()
    data = struct.pack("!I", len(payload)) + payload
    if fds:
        socket.send_fds(connection, [data], list(fds))
    else:
        connection.sendall(data)


def _receive(connection, with_fds=False):
    """(message, fds); (None, []) when the other side closed."""
    head, fds = b"", []
    while len(head) < 4:
        if with_fds and not head:
            chunk, fds, _, _ = socket.recv_fds(connection, 4, 3)
        else:
            chunk = connection.recv(4 - len(head))
        if not chunk:
            return None, fds
        head += chunk
    (length,) = struct.unpack("!I", head)
    payload = b""
    while len(payload) < length:
        chunk = connection.recv(length - len(payload))
        if not chunk:
            return None, fds
        payload += chunk
    return json.loads(payload), fds


def _exec(program, argv):
    for name in ("SIGPIPE", "SIGXFSZ"):  # as a new process would find them
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    os.execv(program, argv)


def run_shim(socket_path: str, script: str):
    """A console script's shim: the command runs warm, or this process becomes the real script."""
    argv = [script, *sys.argv[1:]]
    _run_warm(socket_path, {"run": "path", "target": script, "argv": argv, "sys_path0": os.path.dirname(script)},
              lambda: _exec(script, argv))


def run_python_shim(socket_path: str, python: str):
    """``python SCRIPT.py ...`` and ``python -m MODULE ...`` run warm; any other use of the
    interpreter (``-c``, options, standard input) becomes the real interpreter."""
    args = sys.argv[1:]
    plain = lambda: _exec(python, [python, *args])  # noqa: E731
    if len(args) >= 2 and args[0] == "-m" and not args[1].startswith("-"):
        how = {"run": "module", "target": args[1], "argv": ["-m", *args[2:]], "sys_path0": os.getcwd()}
    elif args and args[0].endswith(".py") and not args[0].startswith("-") and os.path.isfile(args[0]):
        how = {"run": "path", "target": args[0], "argv": args,
               "sys_path0": os.path.dirname(os.path.realpath(args[0]))}
    else:
        plain()
    _run_warm(socket_path, how, plain)


def _socket_for(socket_path: str, preload: str) -> str:
    """The socket of the warm process started with ``LD_PRELOAD=preload`` (none: ``socket_path`` itself)."""
    if not preload:
        return str(socket_path)
    return f"{socket_path}.{hashlib.sha1(preload.encode()).hexdigest()[:12]}"  # AF_UNIX paths end at 107 bytes


def _run_warm(socket_path: str, how: dict, plain):
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(_socket_for(socket_path, os.environ.get("LD_PRELOAD", "")))
    except OSError:
        plain()
    request = {**how, "shim": os.getpid(), "env": dict(os.environ), "cwd": os.getcwd(), "facts": _interpreter_facts(),
               "streams": _stream_facts(), "affinity": sorted(os.sched_getaffinity(0)),
               "executable": os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "python")}
    _send(connection, request, fds=(0, 1, 2))
    answer, _ = _receive(connection)
    if not answer or "pid" not in answer:
        connection.close()
        plain()
    pid = answer["pid"]

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), forward)
    ended, _ = _receive(connection)  # a forwarded signal's EINTR is retried by Python (PEP 475)
    if ended is None:
        sys.stderr.write(f"warm_commands: the warm process ended before {how['target']} did\n")
        os._exit(1)
    status = ended["status"]
    if status < 0:  # killed: die of the same signal (SIGKILL and SIGSTOP have no handler to reset)
        if -status not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)


# --- the shims' directory -------------------------------------------------------------------

def _is_command(script: Path) -> bool:
    """A console script of fairseq's or the plugin's, run by this environment's Python."""
    if not (script.name.startswith(("fairseq-", "fconv-")) and script.is_file()):
        return False
    with open(script, "rb") as f:
        return f.readline().strip() == f"#!{sys.executable}".encode()


def bin_dir() -> Path:
    """The shims, made once per process, and the warm process started behind them (in the
    background: until it listens, and wherever it does not answer, each shim runs its real script)."""
    if "bin" not in _state:
        root = Path(tempfile.mkdtemp(prefix="fconv-warm-"))
        bin_path = root / "bin"
        bin_path.mkdir()
        socket_path = root / "warm.sock"
        for entry in sorted(REAL_BIN.iterdir()):
            shim = bin_path / entry.name
            if _is_command(entry):
                shim.write_text(f"#!{sys.executable} -S\nimport sys\nsys.path.insert(0, {str(_HERE.parent)!r})\n"
                                f"import warm_commands\nwarm_commands.run_shim({str(socket_path)!r}, {str(entry)!r})\n")
                shim.chmod(0o755)
            elif entry.name.startswith("python"):  # a link would make Python look for the environment beside it
                shim.write_text(f"#!{sys.executable} -S\nimport sys\nsys.path.insert(0, {str(_HERE.parent)!r})\n"
                                f"import warm_commands\nwarm_commands.run_python_shim({str(socket_path)!r}, {str(entry)!r})\n")
                shim.chmod(0o755)
            else:
                shim.symlink_to(entry)
        _state.update(root=root, bin=bin_path, socket=socket_path)
        _start()
    return _state["bin"]


def venv_dir() -> Path:
    """A directory laid out as a virtual environment's for scripts that take ``VENV=``: its
    bin/ holds the shims."""
    return bin_dir().parent


def _start():
    import atexit
    import subprocess

    from fconv_plugin import host_memory

    own = os.environ.get("LD_PRELOAD", "")
    # this process's own preload, and tcmalloc where installed and nothing else is preloaded, as the examples do
    tcmalloc = host_memory.tcmalloc_installed()
    preloads = [own] + ([tcmalloc] if tcmalloc and not own else [])
    _state["processes"] = []
    for number, preload in enumerate(preloads):
        environment = {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}
        if preload:
            environment["LD_PRELOAD"] = preload
        with open(_state["root"] / f"warm{number or ''}.log", "wb") as log:
            _state["processes"].append(subprocess.Popen(
                [sys.executable, str(_HERE), "serve", _socket_for(_state["socket"], preload)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=environment))
    _state["process"] = _state["processes"][0]
    _state["listening"] = Path(_socket_for(_state["socket"], own))
    atexit.register(stop)


def log() -> str:
    """The warm processes' log: a line per command each ran (``warm: PID runs ARGV``, ``warm: PID ended with STATUS``)."""
    if "root" not in _state:
        return ""
    return "".join(path.read_text() for path in sorted(_state["root"].glob("warm*.log")))


def summary(text: str = None) -> str:
    """One line: how many commands ran warm, how many plainly and why (for the session's report),
    from ``text`` (warm processes' logs; this process's own if not given)."""
    import collections
    import re

    text = log() if text is None else text
    warm = len(re.findall(r"^warm: \d+ runs ", text, re.MULTILINE))
    plain = collections.Counter(re.findall(r"^warm: plain .*?: ((?:another|no) [^\n]*)$", text, re.MULTILINE))
    reasons = "; ".join(f"{count} for {reason}" for reason, count in plain.most_common())
    return f"commands run warm: {warm}; plainly: {sum(plain.values())}" + (f" ({reasons})" if reasons else "")


def command_pid(pid: int) -> int:
    """The process running the command that the shim ``pid`` started, to signal it directly
    (a SIGKILL at a chosen moment): the warm process's child once it has forked one, otherwise
    ``pid`` itself (a plain command is the shim's own process after ``exec``, and a command not
    yet forked dies with its shim)."""
    try:
        return int((_state["root"] / "pids" / str(pid)).read_text())
    except (KeyError, OSError, ValueError):
        return pid


def wait_until_warm(timeout: float = 120) -> bool:
    """Whether the warm process listens (waiting up to ``timeout`` seconds for it)."""
    import time

    bin_dir()
    deadline = time.monotonic() + timeout
    while not _state["listening"].exists():
        if time.monotonic() > deadline or _state["process"].poll() is not None:
            return False
        time.sleep(0.2)
    return True


def stop():
    import shutil

    _state.pop("process", None)
    for process in _state.pop("processes", []):
        process.terminate()
        try:
            process.wait(timeout=30)
        except Exception:
            process.kill()
    root = _state.pop("root", None)
    _state.pop("bin", None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


# --- the warm process -------------------------------------------------------------------------

def _modules_fairseq_imports():
    """Every module ``import fairseq`` loads that is not fairseq's, in the order they finished
    loading: learnt in a forked child, so that this process imports them before fairseq (what
    they write as they load is then apart from what fairseq's import writes and logs)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        before = set(sys.modules)
        import fairseq  # noqa: F401

        names = [name for name in sys.modules if name not in before
                 and name.split(".")[0] not in ("fairseq", "fairseq_cli", "__main__", "__mp_main__")]
        with os.fdopen(write, "w") as out:
            json.dump(names, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        names = json.load(f)
    os.waitpid(pid, 0)
    return names


def _captured_output(action):
    """Run ``action``; return (its result, what it wrote on file descriptors 1 and 2)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    captured = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    os.dup2(captured[0].fileno(), 1)
    os.dup2(captured[1].fileno(), 2)
    try:
        result = action()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
    output = []
    for f in captured:
        f.seek(0)
        output.append(f.read().decode("latin-1"))
        f.close()
    return result, output


def _import_libraries(names):
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            pass  # made at run time, not importable by name
    return len(names)


def _import_fairseq_recording_its_logging():
    """Import fairseq here without letting it touch this process's logging; return what it
    did to logging, in order, for a command to do again where it imports fairseq: its
    ``logging.basicConfig`` calls (text_to_speech's) and the records it logged (the request
    for tensorboardX), each emitted again only where that command's logging lets it through."""
    import logging

    events = []
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)

    class Recorder(logging.Handler):
        def emit(self, record):
            events.append(["log", record.name, record.levelno, record.msg, record.args])

    def basic_config(**kwargs):
        if set(kwargs) - {"format", "datefmt", "style", "level"}:  # a stream or file: of this process
            raise RuntimeError(f"fairseq's import calls logging.basicConfig({kwargs}); it cannot be done again later")
        events.append(["basicConfig", kwargs])

    recorder = Recorder()
    real_basic_config, logging.basicConfig = logging.basicConfig, basic_config
    root.addHandler(recorder)
    root.setLevel(logging.NOTSET)  # every record reaches the recorder; the command's own levels decide later
    try:
        import fairseq  # noqa: F401
    finally:
        logging.basicConfig = real_basic_config
        root.removeHandler(recorder)
        root.setLevel(level)
    if root.handlers != handlers:
        raise RuntimeError("importing fairseq changed the root logger's handlers")
    return events


def _preload():
    """Import the libraries, then fairseq; return what importing the libraries wrote on
    stdout and stderr, and fairseq's import: what it wrote there and did to logging."""
    names = _modules_fairseq_imports()
    count, output = _captured_output(lambda: _import_libraries(names))
    logging_events, fairseq_output = _captured_output(_import_fairseq_recording_its_logging)
    fairseq_modules = sorted(name for name in sys.modules if name == "fairseq" or name.startswith("fairseq."))
    return output, count + len(fairseq_modules), {"output": fairseq_output, "logging": logging_events}


class _FairseqImportedAgain:
    """In a command's process: fairseq, imported already in the warm process, taken out of
    ``sys.modules`` until the command first imports it (every import of a fairseq module
    begins with the package), then put back in one step, with what its import wrote and did
    to logging done again at that moment, as a new process would import it."""

    def __init__(self, fairseq_import):
        self.modules = {name: module for name, module in sys.modules.items()
                        if name == "fairseq" or name.startswith("fairseq.")}
        self.spec = self.modules["fairseq"].__spec__
        self.fairseq_import = fairseq_import
        for name in self.modules:
            del sys.modules[name]
        sys.meta_path.insert(0, self)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "fairseq" or self not in sys.meta_path:
            return None
        import importlib.util

        spec = importlib.util.spec_from_loader("fairseq", self, origin=self.spec.origin, is_package=True)
        spec.submodule_search_locations = self.spec.submodule_search_locations
        return spec

    def create_module(self, spec):
        return self.modules["fairseq"]

    def exec_module(self, module):
        import logging

        sys.meta_path.remove(self)
        module.__spec__ = self.spec  # the import system set this finder's; the module keeps its own loader
        sys.modules.update(self.modules)
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, text in zip((1, 2), self.fairseq_import["output"]):
            if text:
                os.write(fd, text.encode("latin-1"))
        for event in self.fairseq_import["logging"]:
            if event[0] == "basicConfig":
                logging.basicConfig(**event[1])
            else:
                _, name, level, message, args = event
                logging.getLogger(name).log(level, message, *(args if isinstance(args, tuple) else (args,)))


def _new_stream(fd, facts, name):
    import io

    if facts is None:
        return None
    raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
    raw.name = name
    binary = raw if facts["raw"] else (io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw))
    return io.TextIOWrapper(binary, encoding=facts["encoding"], errors=facts["errors"],
                            line_buffering=facts["line_buffering"], write_through=facts["write_through"])


def _warning_options(options, startup_filters):
    """PYTHONWARNINGS's filters where a new interpreter puts them: before its default ones
    and behind what libraries added since (each inserts at the front)."""
    import warnings

    added_by_libraries = len(warnings.filters) - startup_filters
    ours = warnings.filters[:added_by_libraries]
    warnings.filters[:added_by_libraries] = []
    warnings._processoptions(options)
    warnings.filters[:0] = ours
    warnings._filters_mutated()
    sys.warnoptions[:] = options


def _become_the_command(connection, request, fds, output, fairseq_import, startup_filters):
    """In the forked child: take the shim's streams, directory and environment, run the script,
    exit as an interpreter running it would."""
    import atexit
    import locale
    import random
    import runpy
    import threading
    import traceback

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    try:
        locale.setlocale(locale.LC_CTYPE, "")
    except locale.Error:
        pass
    os.sched_setaffinity(0, request["affinity"])
    names = ("<stdin>", "<stdout>", "<stderr>")
    streams = [_new_stream(fd, facts, names[fd]) for fd, facts in enumerate(request["streams"])]
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
    for handler in _handlers_on_old_streams():
        handler.setStream(sys.stderr if handler.stream is _ORIGINAL_STREAMS[2] else sys.stdout)
    sys.dont_write_bytecode = bool(request["env"].get("PYTHONDONTWRITEBYTECODE"))
    options = [option for option in request["env"].get("PYTHONWARNINGS", "").split(",") if option.strip()]
    if options and not sys.warnoptions:
        _warning_options(options, startup_filters)
    tempfile.tempdir = None
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    sys.argv = list(request["argv"])
    sys.path[0] = request["sys_path0"]
    # the shims' python, so that what this command starts with sys.executable runs warm too
    sys.executable = request["executable"]
    for fd, text in zip((1, 2), output):
        if text:
            os.write(fd, text.encode("latin-1"))
    _FairseqImportedAgain(fairseq_import)

    def die_with_the_shim():
        try:
            while connection.recv(1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=die_with_the_shim, daemon=True).start()
    code, interrupted = 0, False
    try:
        if request["run"] == "module":
            runpy.run_module(request["target"], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(os.path.abspath(request["target"]), run_name="__main__")  # __file__ as Python sets it
    except SystemExit as exit_:
        if exit_.code is None:
            code = 0
        elif isinstance(exit_.code, int):
            code = exit_.code
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):  # as the interpreter's exit flushes them
            try:
                if stream is not None and not stream.closed:
                    stream.flush()
            except Exception:
                code = code or 120
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


_ORIGINAL_STREAMS = (sys.stdin, sys.stdout, sys.stderr)


def _handlers_on_old_streams():
    import logging

    loggers = [logging.getLogger()] + [logger for logger in logging.Logger.manager.loggerDict.values()
                                       if isinstance(logger, logging.Logger)]
    return [handler for logger in loggers for handler in logger.handlers
            if isinstance(handler, logging.StreamHandler) and handler.stream in _ORIGINAL_STREAMS[1:]]


def _why_plain(request, fds, facts, environment):
    """Why this request must run as a plain process ("" where it can run warm)."""
    if request is None or len(fds) != 3:
        return "no request"
    if request["facts"] != facts:
        return "another locale's encodings or other resource limits"
    theirs = _import_time_environment(request["env"])
    if "PYTHONWARNINGS" in environment:
        theirs["PYTHONWARNINGS"] = request["env"].get("PYTHONWARNINGS")
    differ = sorted(name for name in set(theirs) | set(environment) if theirs.get(name) != environment.get(name))
    return f"another {', '.join(differ)}" if differ else ""


def serve(socket_path: str):
    """Import the libraries, then fork a child per request until terminated."""
    import selectors

    import warnings

    environment = _import_time_environment(os.environ)
    if os.environ.get("PYTHONWARNINGS"):
        environment["PYTHONWARNINGS"] = os.environ["PYTHONWARNINGS"]  # only a command without it is rebuilt
    startup_filters = len(warnings.filters)  # the interpreter's own, before any library adds to them
    output, count, fairseq_import = _preload()
    facts = _interpreter_facts()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".new")
    os.rename(socket_path + ".new", socket_path)  # shims connect only once the imports are done
    listener.listen(64)
    pids = Path(socket_path).parent / "pids"  # shim's pid -> its command's (command_pid)
    pids.mkdir(exist_ok=True)
    print(f"warm: {count} modules imported; listening on {socket_path}", flush=True)
    children = {}
    parent = os.getppid()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while os.getppid() == parent:  # ends with the test session that started it
        for _ in selector.select(timeout=0.05):
            connection, _ = listener.accept()
            try:
                request, fds = _receive(connection, with_fds=True)
            except (OSError, ValueError):
                request, fds = None, []
            plain = _why_plain(request, fds, facts, environment)
            if plain:
                print(f"warm: plain {' '.join(request['argv']) if request else ''}: {plain}", flush=True)
                for fd in fds:
                    os.close(fd)
                try:
                    _send(connection, {"plain": True})
                except OSError:
                    pass
                connection.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                try:
                    selector.close()
                    listener.close()
                    for other, _ in children.values():
                        other.close()
                    for name in ("SIGTERM", "SIGCHLD"):
                        signal.signal(getattr(signal, name), signal.SIG_DFL)
                    for name, value in SET_BY_IMPORTS.items():
                        request["env"].setdefault(name, value)
                    _become_the_command(connection, request, fds, output, fairseq_import, startup_filters)
                finally:
                    os._exit(70)
            for fd in fds:
                os.close(fd)
            print(f"warm: {pid} runs {' '.join(request['argv'])}", flush=True)
            (pids / f"{request['shim']}.new").write_text(str(pid))
            os.rename(pids / f"{request['shim']}.new", pids / str(request["shim"]))
            children[pid] = (connection, request["shim"])
            try:
                _send(connection, {"pid": pid})
            except OSError:
                pass
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            connection, shim = children.pop(pid, (None, None))
            if connection is None:
                continue
            (pids / str(shim)).unlink(missing_ok=True)
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            print(f"warm: {pid} ended with {code}", flush=True)
            try:
                _send(connection, {"status": code})
            except OSError:
                pass
            connection.close()


if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    serve(sys.argv[2])
