"""The other durable-statechart engine on the package index, ``harel``, as a benchmark peer.

It installs as the import name ``harel`` and has its own pinned dependencies, so it lives in a virtualenv
of its own (:data:`VENV`, made on first use: ``python -m bench.harel_peer`` — also a step of ``make
bench`` — or any run of the ``peer`` section). Each contender is a subprocess of that virtualenv running
``bench/harel_driver.py``, kept alive across repeats so that durastate's runs and harel's interleave in
the same benchmark run; a batch is measured inside the subprocess (no pipe in the timing) and verified
there (every event processed, the state where chart 1 ends).

When the virtualenv cannot be made (no registry reachable, say), :func:`ensure_peer` returns why and the
section is reported as skipped with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import IO, Any

HAREL_VERSION = "0.9.0"
"""The peer's version: the only place it is pinned."""
REQUIREMENT = f"harel[postgres]=={HAREL_VERSION}"
VENV = Path(os.environ.get("DURASTATE_BENCH_PEER_VENV",
                           Path.home() / ".cache" / "durastate-bench" / f"harel-{HAREL_VERSION}"))
"""Where the peer's virtualenv lives (outside the checkout; ``DURASTATE_BENCH_PEER_VENV`` moves it)."""
DRIVER = Path(__file__).with_name("harel_driver.py")


def python() -> Path:
    return VENV / "bin" / "python"


def installed_version() -> str | None:
    """The harel version in the peer's virtualenv, or ``None`` if there is none."""
    if not python().exists():
        return None
    out = subprocess.run([str(python()), "-c", "from importlib.metadata import version; print(version('harel'))"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def ensure_peer(log: Any = print) -> str | None:
    """Make the peer's virtualenv with :data:`REQUIREMENT` if it is missing; ``None`` when ready, else why
    it is not (the benchmark then skips the peer with that reason)."""
    if installed_version() == HAREL_VERSION:
        return None
    log(f"[bench] installing the peer {REQUIREMENT} into {VENV} ...")
    try:
        if not python().exists():
            venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        done = subprocess.run([str(python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                               REQUIREMENT], capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not make the peer's virtualenv at {VENV}: {exc}"
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
        why = lines[-1] if lines else f"pip exited with {done.returncode}"
        return f"could not install {REQUIREMENT} (is the package index reachable?): {why}"
    if installed_version() != HAREL_VERSION:
        return f"{REQUIREMENT} did not install into {VENV}"
    return None


class PeerProcess:
    """One harel contender in its own process: call it to measure one batch (events per second)."""

    def __init__(self, **cfg: Any) -> None:
        self.proc = subprocess.Popen([str(python()), "-I", str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self._say(json.dumps(cfg))
        reply = self._read()
        if not reply.get("ready"):
            self.close()
            raise RuntimeError(f"harel {cfg.get('kind')} did not start: {reply.get('error')}\n"
                               f"{reply.get('traceback', '')}")

    def _say(self, line: str) -> None:
        stdin: IO[str] | None = self.proc.stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()

    def _read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.proc.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the harel driver exited (code {self.proc.wait()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def __call__(self) -> float:
        self._say("run")
        reply = self._read()
        if "rate" not in reply:
            raise RuntimeError(f"harel: {reply.get('error')}\n{reply.get('traceback', '')}")
        return float(reply["rate"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._say("quit")
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


if __name__ == "__main__":  # `make bench`'s step: make the peer's virtualenv if it is missing
    why = ensure_peer()
    if why:
        print(f"[bench] the harel peer will be skipped: {why}", file=sys.stderr)
    else:
        print(f"[bench] peer ready: harel {HAREL_VERSION} in {VENV}")
