"""Every fenced code block of README.md and docs/*.md runs here, so a document cannot drift from the code.

One test per block, named ``FILE:LINE`` (the line of the opening fence). What a block does depends on its
language (the fence's info string):

``bash`` / ``sh`` / ``shell``
    A bash script (``set -euo pipefail``). Commands run as written, so ``durastate`` is the real command
    (the venv's ``bin`` is first on ``PATH``) and ``.venv/bin/durastate`` works too (see *workspace*).
    Background jobs a block starts with ``&`` are stopped when the block ends.
``console``
    A shell session: each line ``$ COMMAND`` is run, and the lines after it (up to the next ``$``) are the
    output the document shows. That output must be printed (stdout and stderr together): the shown lines
    must appear in the command's output in the same order, each matching a whole line, where runs of
    spaces match any run of spaces, ``…`` or ``...`` match anything and a time ``HH:MM:SS`` matches any
    time. A command passes if it exits 0 — or, when its shown output has a line starting ``error:``,
    if it fails. Output a document does not show is not checked.
``python``
    Run as a script (fed to this interpreter on stdin, so the working folder is on ``sys.path``).
``yaml`` / ``json``
    Parsed. A YAML block whose first line is a comment naming a file (``# definitions/door.yaml``), or any
    block with a ``file PATH`` marker, is written to that path, for the blocks after it. A definition
    (a mapping with ``id``, ``initial`` and ``states``) that is not written to a file must load.
``text``
    Literal text (a folder tree): not run. A block without a language is an error.

Every Python block is also compiled and checked for undefined names (ruff F821), and every shell block
with ``bash -n``, even when it is not run. A block that prints a Python traceback fails, whatever its
exit status.

**Workspace.** The blocks of one document run in order, in one temporary folder that stands for the
repository root: it holds a copy of ``examples/``, ``.venv`` (a link to this virtualenv) and, for the
documents under docs/, the files README.md's blocks write (``definitions/door.yaml``) — a reader who
followed the README has them. Exported variables and the working folder carry over from one shell block
to the next, and every block sees the exported variables; ``AWS_*`` and ``DURASTATE_*`` from the
environment of the test run do not leak in, and no AWS credentials or config files are visible.

**The clock.** Every block runs on the command line's manual clock: ``DURASTATE_CLOCK`` is set to
:data:`DOC_CLOCK` (2026-01-05T10:00:00Z), so every ``durastate`` command of a document sees that instant,
however long the machine takes between two of them, and only ``--advance`` moves time (a retry due in 10 s
never fires on its own, a timer armed for 15 minutes shows "in 15m"). Nothing a document shows depends on
the speed of the machine; a Python block that wants time uses ``ManualClock``. A block
run on its own (``-k``) first runs the blocks before it; if one of those failed, it fails saying which.
A block that is not run (``skip``, ``needs-aws``, ``covered-by``) is only checked and needs nothing before
it.

**Markers.** An HTML comment ``<!-- doc-test: DIRECTIVE -->`` on the line right above a block's opening
fence (several may stack) says how to run it; a marker anywhere else is an error. Directives:

``skip REASON``
    Not run, for the reason given (which the test reports).
``needs-aws [REASON]``
    Not run: it needs real AWS credentials and account (``cdk deploy``, ``aws logs tail`` …).
``covered-by PATH[::TEST]… [REASON]``
    Not run here because the named tests run the same thing (``make demo``, a pytest command); the test
    checks that each named file and test exists.
``interrupt-on TEXT``
    A command that runs until Ctrl-C (``durastate serve``): once the block's output shows TEXT, it gets
    SIGINT, as from Ctrl-C, and must then exit 0.
``background TEXT``
    A server the next blocks use "in another shell" (``durastate local``): started in the background,
    waited for until its output shows TEXT, stopped with SIGINT after the document's last block.
``port NUMBER``
    A local port the document uses (4566, 5000): in this block and every later block of the document
    the number is replaced by a free port, so a run never collides with a server already listening.
``postgres``
    Runs against the test PostgreSQL server (``DURASTATE_TEST_POSTGRES``, default
    ``postgresql://postgres@127.0.0.1:5432/test``) in a fresh schema: the document's DSN
    ``postgresql://postgres@127.0.0.1:5432/test`` becomes the test server's and ``schema=durastate``
    (also quoted) the fresh schema, dropped after the document's last block. Skipped if no server answers.
``local-stack``
    Runs with the environment of a local AWS stack the test starts for the document (``durastate local``
    on a free port, from the real ``cdk synth`` of this app): ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
    dummy credentials and ``DURASTATE_QUEUE_URL``.
``file PATH``
    Write the block (YAML or JSON) to PATH.
``slow``
    Marks the test ``@pytest.mark.slow`` (so do ``background`` and ``local-stack``); only blocks that
    spawn a local AWS stack, moto's server or ``cdk synth`` are slow. A block that runs after a slow one
    in its document must be slow too (it may need it). A block running ``make synth`` must be slow:
    ``make`` on the blocks' ``PATH`` is a stand-in that answers ``make synth`` by linking the session's
    real ``cdk synth`` output (tests/infra/synth.py) as ``cdk.out``, and refuses any other target — the
    Makefile's targets need the whole checkout and may reinstall the shared virtualenv.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
VENV = Path(sys.executable).parent.parent
PG_SERVER = os.environ.get("DURASTATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
PG_DOC_DSN = "postgresql://postgres@127.0.0.1:5432/test"

SHELL = {"bash", "sh", "shell"}
LANGUAGES = SHELL | {"console", "python", "yaml", "json", "text"}
DIRECTIVES = {"skip", "needs-aws", "covered-by", "interrupt-on", "background", "port", "postgres",
              "local-stack", "file", "slow"}
NOT_RUN = {"skip", "needs-aws", "covered-by"}
TIMEOUT = 120.0
DOC_CLOCK = "1767607200"
"""2026-01-05T10:00:00Z, in epoch seconds: the instant every block's commands run at (``DURASTATE_CLOCK``)."""
SLOW_TIMEOUT = 900.0

FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
FILE_COMMENT = re.compile(r"^#\s*(?P<path>[\w./-]+\.(?:ya?ml|json))\s*$")
TIME = re.compile(r"\d\d:\d\d:\d\d")
TRACEBACK = "Traceback (most recent call last)"


# -- reading the documents ------------------------------------------------------------------------------
@dataclass
class Block:
    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    directives: list[tuple[str, str]] = field(default_factory=list)

    @property
    def rel(self) -> str:
        return self.doc.relative_to(ROOT).as_posix()

    @property
    def id(self) -> str:
        return f"{self.rel}:{self.line}"

    def has(self, name: str) -> bool:
        return any(d == name for d, _ in self.directives)

    def arg(self, name: str) -> str:
        return next(a for d, a in self.directives if d == name)

    @property
    def slow(self) -> bool:
        return self.has("slow") or self.has("background") or self.has("local-stack")

    @property
    def target_file(self) -> str | None:
        if self.has("file"):
            return self.arg("file")
        if self.lang == "yaml":
            m = FILE_COMMENT.match(self.text.split("\n", 1)[0])
            if m:
                return m.group("path")
        return None


def parse(doc: Path) -> tuple[list[Block], list[str]]:
    """The document's fenced blocks with their markers, and every problem with the markers or languages."""
    lines = doc.read_text().splitlines()
    rel = doc.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    problems: list[str] = []
    pending: list[tuple[int, str, str]] = []
    i = 0
    while i < len(lines):
        marker = MARKER.match(lines[i])
        fence = FENCE.match(lines[i])
        if marker:
            name, _, arg = marker.group("body").partition(" ")
            if name not in DIRECTIVES:
                problems.append(f"{rel}:{i + 1}: unknown doc-test directive {name!r} (known: {sorted(DIRECTIVES)})")
            pending.append((i + 1, name, arg.strip()))
            i += 1
            continue
        if fence:
            if pending and pending[-1][0] != i:
                problems.append(f"{rel}:{pending[-1][0]}: a doc-test marker must be on the line right above "
                                "the opening fence")
            info = fence.group("info").strip()
            lang = info.split()[0] if info else ""
            close = re.compile("^" + re.escape(fence.group("fence")[0]) + "{" + str(len(fence.group("fence")))
                               + r",}\s*$")
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            if j == len(lines):
                problems.append(f"{rel}:{i + 1}: code block is never closed")
            block = Block(doc, i + 1, lang, "\n".join(lines[i + 1:j]) + "\n", [(n, a) for _, n, a in pending])
            if not lang:
                problems.append(f"{rel}:{i + 1}: code block without a language (use text for literal text)")
            elif lang not in LANGUAGES:
                problems.append(f"{rel}:{i + 1}: code block language {lang!r} is not one the doc tests know "
                                f"({sorted(LANGUAGES)})")
            for name, arg in block.directives:
                if name in ("skip", "covered-by", "file", "background", "interrupt-on") and not arg:
                    problems.append(f"{rel}:{i + 1}: '{name}' needs an argument")
                if name == "port" and not arg.isdigit():
                    problems.append(f"{rel}:{i + 1}: port takes a number, not {arg!r}")
            if sum(block.has(d) for d in NOT_RUN) > 1:
                problems.append(f"{rel}:{i + 1}: give one reason not to run a block, not several")
            runs = not any(block.has(d) for d in NOT_RUN)
            if runs and PG_DOC_DSN in block.text and not block.has("postgres"):
                problems.append(f"{rel}:{i + 1}: this block uses {PG_DOC_DSN}: mark it postgres, so that it runs "
                                "in a fresh schema of the test server")
            if runs and not block.slow and any(b.slow and not any(b.has(d) for d in NOT_RUN) for b in blocks):
                problems.append(f"{rel}:{i + 1}: this block runs after a slow block of the document (which "
                                "it may need), so it must be slow too")
            blocks.append(block)
            pending = []
            i = j + 1
            continue
        if pending and lines[i].strip():
            problems.append(f"{rel}:{pending[-1][0]}: a doc-test marker must be on the line right above the "
                            "opening fence")
            pending = []
        i += 1
    if pending:
        problems.append(f"{rel}:{pending[-1][0]}: a doc-test marker with no code block after it")
    return blocks, problems


PARSED = {doc: parse(doc) for doc in DOCUMENTS}
BLOCKS = [block for blocks, _ in PARSED.values() for block in blocks]
README_FILES = [b for b in PARSED[ROOT / "README.md"][0] if b.target_file and not any(b.has(d) for d in NOT_RUN)]


# -- running processes ----------------------------------------------------------------------------------
class BlockFailed(AssertionError):
    pass


@dataclass
class Finished:
    code: int
    output: str


def tail(text: str, limit: int = 6000) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def start_process(argv: list[str], *, stdin: str, env: dict[str, str], cwd: Path, out: Path) -> subprocess.Popen[bytes]:
    """A process in its own process group (so it and whatever it starts can be signalled together)."""
    src = out.with_suffix(".stdin")
    src.write_text(stdin)
    with open(src, "rb") as fin, open(out, "wb") as fout:
        return subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop_group(proc: subprocess.Popen[bytes], first: int = signal.SIGINT, grace: float = 20.0) -> None:
    """Signal the process group (Ctrl-C first), then SIGKILL whatever is left of it."""
    signal_group(proc, first)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def run_process(argv: list[str], *, stdin: str, env: dict[str, str], cwd: Path, out: Path, timeout: float,
                interrupt_on: str | None = None) -> Finished:
    proc = start_process(argv, stdin=stdin, env=env, cwd=cwd, out=out)
    try:
        if interrupt_on is not None:
            wait_for_output(proc, out, interrupt_on, timeout)
            signal_group(proc, signal.SIGINT)  # what Ctrl-C in a terminal does
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc, signal.SIGTERM, 5)
            raise BlockFailed(f"still running after {timeout:.0f}s; output:\n{tail(out.read_text(errors='replace'))}"
                              ) from None
    finally:
        # Background jobs the block started (`server &`) end with it.
        if proc.poll() is None:
            stop_group(proc, signal.SIGTERM, 5)
        else:
            signal_group(proc, signal.SIGTERM)
    return Finished(code, out.read_text(errors="replace"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_output(proc: subprocess.Popen[bytes], out: Path, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = out.read_text(errors="replace")
        if text in seen:
            return seen
        if proc.poll() is not None:
            raise BlockFailed(f"exited ({proc.returncode}) before printing {text!r}:\n{tail(seen)}")
        time.sleep(0.1)
    raise BlockFailed(f"did not print {text!r} within {timeout:.0f}s:\n{tail(out.read_text(errors='replace'))}")


# -- checks ---------------------------------------------------------------------------------------------
def static_check(block: Block) -> None:
    """Syntax (and, for Python, undefined names) of every shell and Python block, run or not."""
    if block.lang == "python":
        try:
            compile(block.text, block.id, "exec")
        except SyntaxError as exc:
            raise BlockFailed(f"{block.id}: not valid Python as a script: {exc}") from None
        ruff = Path(sys.executable).with_name("ruff")
        if ruff.exists():
            proc = subprocess.run([str(ruff), "check", "--isolated", "--no-cache", "--select", "F821,F823",
                                   "--output-format", "concise", "--stdin-filename", "block.py", "-"],
                                  input=block.text, capture_output=True, text=True, timeout=60)
            if proc.returncode != 0:
                raise BlockFailed(f"{block.id}: undefined names (the line numbers count from the block's "
                                  f"first line, {block.line + 1}):\n{proc.stdout}{proc.stderr}")
    elif block.lang in SHELL:
        proc = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise BlockFailed(f"{block.id}: bash syntax error:\n{proc.stderr}")
    elif block.lang == "console":
        proc = subprocess.run(["bash", "-n"], input="\n".join(c for c, _ in console_commands(block.text)),
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise BlockFailed(f"{block.id}: bash syntax error:\n{proc.stderr}")


def console_commands(text: str) -> list[tuple[str, list[str]]]:
    """``$ command`` lines with the output lines shown after each."""
    commands: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            if line.strip():
                commands[-1][1].append(line)
        elif line.strip():
            raise BlockFailed(f"console output before any '$ ' command: {line!r}")
    return commands


def line_pattern(shown: str) -> re.Pattern[str]:
    parts = []
    for piece in re.split(r"(…|\.\.\.|\d\d:\d\d:\d\d|\s+)", shown.strip()):
        if piece in ("…", "..."):
            parts.append(".*")
        elif TIME.fullmatch(piece):
            parts.append(r"\d\d:\d\d:\d\d")
        elif piece and piece.isspace():
            parts.append(r"\s+")
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def check_shown_output(command: str, shown: list[str], actual: str) -> None:
    lines = [ln.strip() for ln in actual.splitlines()]
    at = 0
    for want in shown:
        pattern = line_pattern(want)
        for k in range(at, len(lines)):
            if pattern.fullmatch(lines[k]):
                at = k + 1
                break
        else:
            raise BlockFailed(f"`$ {command}`: the document shows the line\n    {want.strip()}\nbut the command "
                              f"printed (in order, no such line after the ones matched so far):\n{actual}")


def covered_by(block: Block) -> str:
    words = block.arg("covered-by").split()
    refs = [w for w in words if w.startswith("tests/")]
    if not refs:
        raise BlockFailed(f"{block.id}: covered-by names no tests/… file")
    for ref in refs:
        path, _, test = ref.partition("::")
        if not (ROOT / path).exists():
            raise BlockFailed(f"{block.id}: covered-by names {path}, which does not exist")
        if test and not re.search(rf"^\s*(async\s+)?def {re.escape(test)}\(", (ROOT / path).read_text(), re.M):
            raise BlockFailed(f"{block.id}: covered-by names {test} in {path}, which has no such test")
    return " ".join(refs)


# -- one document's run ---------------------------------------------------------------------------------
class DocRun:
    """The workspace and the state (environment, folder, servers) the blocks of one document share."""

    def __init__(self, doc: Path, base: Path, tmp_factory: pytest.TempPathFactory) -> None:
        self.doc = doc
        self.blocks = PARSED[doc][0]
        self.tmp_factory = tmp_factory
        self.home = base
        self.ws = base / "repo"
        self.logs = base / "logs"
        self.shim = base / "shim"
        for d in (self.ws, self.logs, self.shim):
            d.mkdir(parents=True)
        shutil.copytree(ROOT / "examples", self.ws / "examples", ignore=shutil.ignore_patterns("__pycache__"))
        (self.ws / ".venv").symlink_to(VENV)
        if doc.name != "README.md" or doc.parent != ROOT:
            for b in README_FILES:
                self.write_file(b)
        make = self.shim / "make"
        make.write_text('#!/usr/bin/env bash\n'
                        'if [ "$*" = synth ] && [ -n "${DOCTEST_CDK_OUT:-}" ]; then\n'
                        '  ln -sfn "$DOCTEST_CDK_OUT" cdk.out && echo "doc-test: cdk.out -> $DOCTEST_CDK_OUT"\n'
                        '  exit 0\nfi\n'
                        'echo "doc-test: \'make $*\' is not run by the doc tests (see tests/docs/test_doc_blocks.py)"'
                        ' >&2\nexit 2\n')
        make.chmod(0o755)
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("DURASTATE_", "AWS_", "HAREL_"))}
        path = [str(self.shim), str(VENV / "bin"), str(ROOT / "node_modules" / ".bin"), keep.get("PATH", "")]
        self.env: dict[str, str] = {
            **keep, "PATH": os.pathsep.join(path), "COLUMNS": "200", "NO_COLOR": "1", "PYTHONUNBUFFERED": "1",
            "AWS_CONFIG_FILE": str(base / "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": str(base / "no-aws-creds"),
            "AWS_EC2_METADATA_DISABLED": "true", "DURASTATE_CLOCK": DOC_CLOCK,
        }
        self.cwd = self.ws
        self.status: dict[int, str] = {}
        self.ports: dict[str, str] = {}
        self.schemas: list[str] = []
        self.servers: list[tuple[Block, subprocess.Popen[bytes], Path]] = []
        self.stack_env: dict[str, str] | None = None

    def write_file(self, block: Block) -> None:
        target = block.target_file
        assert target is not None
        path = (self.ws / target).resolve()
        if self.ws.resolve() not in path.parents:
            raise BlockFailed(f"{block.id}: file {target} is outside the workspace")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text)

    # The blocks before this one, then this one.
    def run(self, block: Block) -> None:
        index = self.blocks.index(block)
        try:
            if not any(block.has(d) for d in NOT_RUN):  # a block that is not run depends on nothing
                self.run_earlier(self.blocks[:index])
            self.execute(block)
        finally:
            if index == len(self.blocks) - 1:
                self.close()

    def run_earlier(self, earlier_blocks: list[Block]) -> None:
        for earlier in earlier_blocks:
            if self.status.get(earlier.line) == "failed":
                raise BlockFailed(f"an earlier block of {earlier.rel} failed: line {earlier.line}")
            if earlier.line not in self.status:
                try:
                    self.execute(earlier)
                except BaseException as exc:
                    if isinstance(exc, pytest.skip.Exception):
                        continue
                    raise BlockFailed(f"the earlier block at {earlier.id} failed:\n{exc}") from None

    def execute(self, block: Block) -> None:
        if block.line in self.status:
            if self.status[block.line] == "failed":
                raise BlockFailed(f"{block.id} failed before")
            return
        try:
            static_check(block)
            if block.has("port"):
                self.ports.setdefault(block.arg("port"), str(free_port()))
            not_run = self.not_run_reason(block)
            if not_run is None:
                self.execute_block(block)
        except pytest.skip.Exception:
            self.status[block.line] = "skipped"
            raise
        except BaseException:
            self.status[block.line] = "failed"
            raise
        if not_run is not None:
            self.status[block.line] = "skipped"
            pytest.skip(not_run)
        self.status[block.line] = "passed"

    def not_run_reason(self, block: Block) -> str | None:
        if block.has("skip"):
            return f"not run: {block.arg('skip')}"
        if block.has("needs-aws"):
            return "not run: needs real AWS credentials" + (f" ({block.arg('needs-aws')})"
                                                             if block.arg("needs-aws") else "")
        if block.has("covered-by"):
            return f"not run here: covered by {covered_by(block)}"
        return None

    def source(self, block: Block) -> str:
        text = block.text
        for number, port in self.ports.items():
            text = re.sub(rf"\b{number}\b", port, text)
        if block.has("postgres"):
            text = self.postgres(text)
        return text

    def postgres(self, text: str) -> str:
        psycopg = pytest.importorskip("psycopg")
        try:
            psycopg.connect(PG_SERVER, connect_timeout=5).close()
        except psycopg.OperationalError as exc:
            pytest.skip(f"PostgreSQL not reachable at {PG_SERVER}: {exc}")
        schema = f"doc_{uuid.uuid4().hex[:10]}"
        self.schemas.append(schema)
        base, _, query = PG_SERVER.partition("?")
        if query:
            text = text.replace(PG_DOC_DSN + "?", f"{base}?{query}&").replace(PG_DOC_DSN, f"{base}?{query}")
        else:
            text = text.replace(PG_DOC_DSN, base)
        return re.sub(r"""(schema=["']?)durastate\b""", rf"\g<1>{schema}", text)

    def execute_block(self, block: Block) -> None:
        text = self.source(block)
        if block.lang in ("yaml", "json"):
            self.data_block(block, text)
            return
        if block.lang == "text":
            return
        env = dict(self.env)
        injected: dict[str, str] = {}
        if "make synth" in text:
            if not block.slow:
                raise BlockFailed(f"{block.id} runs `make synth` (the real cdk synth): mark it slow")
            injected["DOCTEST_CDK_OUT"] = str(self.cloud_assembly())
        if block.has("local-stack"):
            injected.update(self.local_stack())
        env.update(injected)
        timeout = SLOW_TIMEOUT if block.slow else TIMEOUT
        out = self.logs / f"L{block.line}.out"
        envfile, pwdfile = self.logs / f"L{block.line}.env", self.logs / f"L{block.line}.pwd"
        if block.lang in SHELL or block.lang == "console":
            trap = (f"trap 'env -0 > {shlex.quote(str(envfile))}; pwd > {shlex.quote(str(pwdfile))}' EXIT\n")
            if block.lang == "console":
                script = "set -o pipefail\n" + trap + self.console_script(text)
            else:
                script = "set -euo pipefail\n" + trap + text
            argv = ["bash", "-s"]
        else:
            script, argv = text, [sys.executable, "-"]
        if block.has("background"):
            self.start_server(block, argv, script, env, out)
            return
        interrupt = block.arg("interrupt-on") if block.has("interrupt-on") else None
        done = run_process(argv, stdin=script, env=env, cwd=self.cwd, out=out, timeout=timeout,
                           interrupt_on=interrupt)
        if TRACEBACK in done.output:
            raise BlockFailed(f"{block.id} printed a traceback:\n{tail(done.output)}")
        if block.lang == "console":
            self.check_console(block, text, done)
        elif done.code != 0:
            where = (f" (a traceback's `<stdin>` line N is line {block.line} + N of {block.rel})"
                     if block.lang == "python" else "")
            raise BlockFailed(f"{block.id} exited with {done.code}{where}; output:\n{tail(done.output)}")
        if block.lang != "python":
            self.carry_over(envfile, pwdfile, injected)

    def data_block(self, block: Block, text: str) -> None:
        try:
            data = json.loads(text) if block.lang == "json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise BlockFailed(f"{block.id}: does not parse as {block.lang}: {exc}") from None
        if block.target_file:
            self.write_file(block)
        elif isinstance(data, dict) and {"id", "initial", "states"} <= data.keys():
            from durastate.engine import load_definition

            load_definition(text)  # the text: durastate's YAML loader keeps `on:` a string

    @staticmethod
    def console_script(text: str) -> str:
        parts = []
        for n, (command, _) in enumerate(console_commands(text)):
            parts.append(f"printf '\\036doc-test-begin {n}\\n'\n{{ {command}\n}} 2>&1\n"
                         f"printf '\\036doc-test-end {n} %d\\n' \"$?\"\n")
        return "".join(parts)

    def check_console(self, block: Block, text: str, done: Finished) -> None:
        commands = console_commands(text)
        results: dict[int, tuple[int, str]] = {}
        for m in re.finditer(r"\x1edoc-test-begin (\d+)\n(.*?)\x1edoc-test-end \1 (\d+)\n", done.output, re.S):
            results[int(m.group(1))] = (int(m.group(3)), m.group(2))
        for n, (command, shown) in enumerate(commands):
            if n not in results:
                raise BlockFailed(f"{block.id}: `$ {command}` did not finish; output:\n{tail(done.output)}")
            code, output = results[n]
            expect_error = any(s.strip().startswith("error:") for s in shown)
            if expect_error and code == 0:
                raise BlockFailed(f"{block.id}: `$ {command}` succeeded, but the document shows an error:\n"
                                  f"{output}")
            if not expect_error and code != 0:
                raise BlockFailed(f"{block.id}: `$ {command}` exited with {code}:\n{output}")
            check_shown_output(command, shown, output)

    def carry_over(self, envfile: Path, pwdfile: Path, injected: dict[str, str]) -> None:
        """What the shell block exported (not what the test gave it for this block only) and its folder."""
        if envfile.exists():
            env = {}
            for item in envfile.read_bytes().split(b"\0"):
                name, sep, value = item.decode(errors="replace").partition("=")
                if not sep or name in ("_", "SHLVL", "PWD", "OLDPWD"):
                    continue
                if name in injected and injected[name] == value and self.env.get(name) != value:
                    continue
                env[name] = value
            self.env = env
        if pwdfile.exists():
            self.cwd = Path(pwdfile.read_text().strip())

    # -- servers ------------------------------------------------------------------------------------------
    def start_server(self, block: Block, argv: list[str], script: str, env: dict[str, str], out: Path) -> None:
        proc = start_process(argv, stdin=script, env=env, cwd=self.cwd, out=out)
        self.servers.append((block, proc, out))
        wait_for_output(proc, out, block.arg("background"), SLOW_TIMEOUT)

    def cloud_assembly(self) -> Path:
        from tests.infra.synth import synth_once

        return synth_once(self.tmp_factory.mktemp("doc-synth"))

    def local_stack(self) -> dict[str, str]:
        if self.stack_env is None:
            template = self.cloud_assembly() / "DurastateStack.template.json"
            argv = [str(VENV / "bin" / "durastate"), "local", "--template", str(template), "--port", "0", "-q"]
            out = self.logs / "local-stack.out"
            stack_env = {**self.env, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test",
                         "AWS_SECRET_ACCESS_KEY": "test"}
            proc = start_process(argv, stdin="", env=stack_env, cwd=self.home, out=out)
            self.servers.append((self.blocks[0], proc, out))
            seen = wait_for_output(proc, out, "dlq ", SLOW_TIMEOUT)
            endpoint = re.search(r"^endpoint\s+(\S+)", seen, re.M)
            queue = re.search(r"^queue\s+(\S+)", seen, re.M)
            assert endpoint and queue, seen
            self.stack_env = {"AWS_ENDPOINT_URL": endpoint.group(1), "AWS_REGION": "us-east-1",
                              "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test",
                              "AWS_SECRET_ACCESS_KEY": "test", "DURASTATE_QUEUE_URL": queue.group(1)}
        return self.stack_env

    def close(self) -> None:
        errors = []
        for block, proc, out in self.servers:
            if proc.poll() is not None and block.has("background"):
                errors.append(f"the server of {block.id} ended early ({proc.returncode}):\n"
                              f"{tail(out.read_text(errors='replace'))}")
            stop_group(proc)
            if TRACEBACK in out.read_text(errors="replace"):
                errors.append(f"the server of {block.id} printed a traceback:\n{tail(out.read_text(errors='replace'))}")
        self.servers.clear()
        if self.schemas:
            import psycopg

            with psycopg.connect(PG_SERVER, autocommit=True, connect_timeout=5) as conn:
                for schema in self.schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            self.schemas.clear()
        if errors:
            raise BlockFailed("\n".join(errors))


# -- the tests ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def doc_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Path, DocRun]]:
    runs: dict[Path, DocRun] = {}
    yield runs
    for run in runs.values():
        with contextlib.suppress(Exception):
            run.close()


def _doc_run(runs: dict[Path, DocRun], doc: Path, factory: pytest.TempPathFactory) -> DocRun:
    if doc not in runs:
        base = Path(tempfile.mkdtemp(prefix=f"doc-{doc.stem}-", dir=factory.getbasetemp()))
        runs[doc] = DocRun(doc, base, factory)
    return runs[doc]


def _param(block: Block) -> Any:
    marks = [pytest.mark.slow] if block.slow else []
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_doc_block(block: Block, doc_runs: dict[Path, DocRun], tmp_path_factory: pytest.TempPathFactory) -> None:
    _doc_run(doc_runs, block.doc, tmp_path_factory).run(block)


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[d.relative_to(ROOT).as_posix() for d in DOCUMENTS])
def test_doc_markers(doc: Path) -> None:
    """Every block has a language the tests know, every marker is attached to a block and well formed."""
    problems = PARSED[doc][1]
    assert not problems, "\n".join(problems)
