#!/usr/bin/env python3
"""LocalStack 4.14 community as a host process (no Docker), with stand-ins for the two pieces it downloads.

``run.py install`` creates, under ``localstack/build/host/`` (cached: redone only when these inputs change; safe to run
concurrently and again):

* ``localstack-venv/`` — ``localstack-core[runtime]==4.14.0`` on Python 3.13 (4.14 does not run on 3.11),
  constrained to the pins of that release's own runtime requirements (``constraints-4.14.0.txt``; unpinned,
  pip picks a cbor2 and a pyOpenSSL it cannot use), plus ``plugin/``: DynamoDB and DynamoDB Streams from
  LocalStack's bundled moto (``PROVIDER_OVERRIDE_DYNAMODB=moto``, ``PROVIDER_OVERRIDE_DYNAMODBSTREAMS=moto``)
  and a Lambda runtime executor running each execution environment as a host process
  (``LAMBDA_RUNTIME_EXECUTOR=host-process``).
* ``runtimes/python3.12/`` — the Lambda runtime those processes run: Python 3.12 with boto3 (pinned by the
  project's ``constraints.txt``) and nothing else, as Lambda's image has; the function's code brings the rest.

Interpreters: ``$LOCALSTACK_HOST_PYTHON`` / ``$LAMBDA_HOST_PYTHON312``, else pyenv's, else ``python3.13`` /
``python3.12`` on ``PATH``. Prints the paths as JSON: ``{"python": ..., "runtimes_dir": ...}``.

``run.py serve [--port 4566]`` installs (a no-op when cached), then becomes LocalStack on ``127.0.0.1:PORT``
with the services of ``localstack/docker-compose.yml`` and the two stand-ins selected; Ctrl-C stops it.
Its working files go to ``localstack/build/host/run-PORT/``.
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE.parent / "build" / "host"
LOCALSTACK = "localstack-core[runtime]==4.14.0"
CONSTRAINTS = HERE / "constraints-4.14.0.txt"
PLUGIN = HERE / "plugin"
#: What the Lambda Python runtime provides (the layer leaves these out), pinned by the project's constraints.
RUNTIME_DISTRIBUTIONS = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six")


def find_python(version: str, env_var: str) -> str:
    on_path = shutil.which(f"python{version}") or ""
    candidates = [os.environ.get(env_var, ""),
                  *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python3")), reverse=True),
                  "" if "/shims/" in on_path else on_path]  # a pyenv shim may name a version it will not run
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise SystemExit(f"error: no Python {version} found: install one, put python{version} on PATH or set {env_var}")


def digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def tree_bytes(folder: Path) -> bytes:
    return b"".join(p.relative_to(folder).as_posix().encode() + p.read_bytes() for p in sorted(folder.rglob("*"))
                    if p.is_file() and "__pycache__" not in p.parts)


def run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                         f"{proc.stderr[-6000:]}")


def ensure_venv(target: Path, python: str, key: str, installs: list[list[str]]) -> Path:
    """A virtualenv at ``target`` holding ``installs``; rebuilt when ``key`` (a digest of its inputs) changes."""
    stamp = target / ".installed"
    if stamp.is_file() and stamp.read_text() == key:
        return target
    # Built in place (a venv's scripts name their own absolute path); the stamp, written last, marks it done.
    shutil.rmtree(target, ignore_errors=True)
    run([python, "-m", "venv", str(target)])
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    for args in installs:
        run(pip + args)
    stamp.write_text(key)
    return target


def plugin_copy() -> Path:
    """The plugin's sources copied out of the checkout (pip's build leaves ``build/`` next to them)."""
    target = OUT / "plugin-src"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(PLUGIN, target, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    return target


def runtime_pins() -> list[str]:
    wanted = {d.replace("_", "-").lower() for d in RUNTIME_DISTRIBUTIONS}
    pins = [line.strip() for line in (ROOT / "constraints.txt").read_text().splitlines()
            if "==" in line and line.split("==", 1)[0].strip().replace("_", "-").lower() in wanted]
    if len(pins) != len(wanted):
        raise SystemExit(f"error: constraints.txt must pin each of {', '.join(sorted(wanted))}")
    return pins


def install() -> dict[str, str]:
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        python313 = find_python("3.13", "LOCALSTACK_HOST_PYTHON")
        python312 = find_python("3.12", "LAMBDA_HOST_PYTHON312")
        venv = ensure_venv(
            OUT / "localstack-venv", python313,
            digest(python313, LOCALSTACK, CONSTRAINTS.read_bytes(), tree_bytes(PLUGIN)),
            [["-c", str(CONSTRAINTS), LOCALSTACK], ["--no-deps", str(plugin_copy())]],
        )
        pins = runtime_pins()
        runtime = ensure_venv(OUT / "runtimes" / "python3.12", python312, digest(python312, *pins), [pins])
    return {"python": str(venv / "bin" / "python"), "runtimes_dir": str(runtime.parent)}


def compose_services() -> str:
    """The ``SERVICES`` list of ``localstack/docker-compose.yml``: the host run enables exactly those."""
    found = re.search(r"^\s*-\s*SERVICES=([\w,-]+)\s*$", (HERE.parent / "docker-compose.yml").read_text(), re.M)
    if found is None:
        raise SystemExit("error: localstack/docker-compose.yml sets no SERVICES=... list")
    return found.group(1)


def serve_environment(port: int, paths: dict[str, str], workdir: Path) -> dict[str, str]:
    """LocalStack's configuration for a host run on ``127.0.0.1:port`` (its files under ``workdir``)."""
    (workdir / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", str(workdir)),
        "TMPDIR": str(workdir / "tmp"),  # where LocalStack's Lambda unzips each function's code
        "FILESYSTEM_ROOT": str(workdir / "fs"),
        "GATEWAY_LISTEN": f"127.0.0.1:{port}", "LOCALSTACK_HOST": f"127.0.0.1:{port}",
        "SERVICES": compose_services(),
        "PROVIDER_OVERRIDE_DYNAMODB": "moto", "PROVIDER_OVERRIDE_DYNAMODBSTREAMS": "moto",
        "LAMBDA_RUNTIME_EXECUTOR": "host-process", "LAMBDA_HOST_RUNTIMES_DIR": paths["runtimes_dir"],
        # No DNS server (port 53), no download of the TLS certificate, no usage analytics.
        "DNS_ADDRESS": "0", "SKIP_SSL_CERT_DOWNLOAD": "1", "DISABLE_EVENTS": "1",
        "DEBUG": os.environ.get("DEBUG", "0"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="install (or reuse) the LocalStack venv and the Lambda host runtimes")
    serve = sub.add_parser("serve", help="install, then run LocalStack on 127.0.0.1:PORT until Ctrl-C")
    serve.add_argument("--port", type=int, default=4566)
    serve.add_argument("--workdir", type=Path, default=None, help="default localstack/build/host/run-PORT")
    ns = parser.parse_args(argv)
    paths = install()
    if ns.command == "install":
        print(json.dumps(paths))
        return 0
    workdir = (ns.workdir or OUT / f"run-{ns.port}").resolve()
    env = serve_environment(ns.port, paths, workdir)
    os.chdir(workdir)  # not the repository: its localstack/ folder must not shadow the package
    os.execve(paths["python"], [paths["python"], "-m", "localstack.runtime.main"], env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
