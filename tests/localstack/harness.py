"""Real LocalStack 4.14 community for the deploy test: on the host (no Docker) or as the official image.

``DURASTATE_LOCALSTACK=host`` (the default) runs ``localstack-core`` 4.14.0 as a host process, installed by
``localstack/host/run.py`` (cached under ``localstack/build/host``). Two pieces of LocalStack are
downloads at first use that this machine cannot have, and only those two are replaced, by the plugins that
install puts into LocalStack's own venv: DynamoDB (DynamoDB Local, a Java program; and its streams, which
LocalStack serves from kinesis-mock, another download) comes from the moto LocalStack bundles, through
LocalStack's provider override; and each Lambda execution environment runs as a host process instead of a
container with LocalStack's runtime-init binary, given the function's unzipped code and no layer, as the
community executor gives it. CloudFormation, IAM, STS, S3, SQS, the event source mapping pollers,
EventBridge, SNS, CloudWatch and Logs are LocalStack's own.

``DURASTATE_LOCALSTACK=docker`` starts ``localstack/docker-compose.yml`` (the image the docs pin) on a free
port instead, and its Lambda runs the functions in containers.

Either way the ``SERVICES`` list is the compose file's, so the test proves the documented list deploys.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "localstack" / "docker-compose.yml"
REGION = "us-east-1"
ACCOUNT = "000000000000"
T = TypeVar("T")


def compose_environment() -> dict[str, str]:
    """The LocalStack container's environment as the compose file sets it (``KEY=value`` entries)."""
    service = yaml.safe_load(COMPOSE.read_text())["services"]["localstack"]
    return dict(entry.split("=", 1) for entry in service["environment"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(probe: Callable[[], T | None], what: str, timeout: float, interval: float = 0.5) -> T:
    """Poll ``probe`` until it returns something other than None/False; fail after ``timeout`` seconds
    saying what was awaited and what the last probe saw."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except Exception as exc:  # a service still starting answers with errors: keep polling
            last = exc
        else:
            if last is not None and last is not False:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last!r}")
        time.sleep(interval)


def _health(endpoint: str, services: list[str]) -> bool:
    with urllib.request.urlopen(f"{endpoint}/_localstack/health", timeout=5) as resp:
        state = json.load(resp)["services"]
    return all(state.get(s) in ("available", "running") for s in services)


def lambda_architecture() -> str:
    """The functions' architecture: this machine's (the bundled wheels must load where they run)."""
    return "x86_64" if platform.machine() in ("x86_64", "AMD64") else "arm64"


_early_install: subprocess.Popen[bytes] | None = None


def install_in_background() -> None:
    """Start ``run.py install`` now, in its own process, so that a fresh clone's LocalStack install (minutes of
    pip) overlaps the tests that run before this package's instead of adding to them. Its output is not kept:
    :func:`host_localstack` runs the install again once it has ended, a no-op when it succeeded, which reports
    any failure with its output."""
    global _early_install
    if _early_install is None and os.environ.get("DURASTATE_LOCALSTACK", "host") == "host":
        _early_install = subprocess.Popen([sys.executable, str(ROOT / "localstack" / "host" / "run.py"), "install"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True)


@contextlib.contextmanager
def host_localstack(workdir: Path) -> Iterator[str]:
    """LocalStack 4.14 as a host process (``localstack/host/run.py serve``) on a free loopback port; yields
    its endpoint URL."""
    run = [sys.executable, str(ROOT / "localstack" / "host" / "run.py")]
    if _early_install is not None:  # started at collection: wait for it; the install below is then cached
        _early_install.wait(timeout=1800)
    proc = subprocess.run([*run, "install"], capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"installing LocalStack failed:\n{proc.stdout}\n{proc.stderr}")
    port = free_port()
    log_path = workdir / "localstack.log"
    with log_path.open("wb") as log:  # `serve` becomes the LocalStack process (exec): same pid
        server = subprocess.Popen([*run, "serve", "--port", str(port), "--workdir", str(workdir / "localstack")],
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            if server.poll() is not None:
                raise AssertionError(f"LocalStack exited ({server.returncode}):\n{log_path.read_text()[-4000:]}")
            return _health(endpoint, compose_environment()["SERVICES"].split(","))

        wait_for(ready, "LocalStack's health endpoint", timeout=120)
        yield endpoint
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        kept = ROOT / "localstack" / "build" / "host" / "last-test.log"  # pytest's temp folders rotate
        shutil.copyfile(log_path, kept)
        print(f"LocalStack log: {kept}")


@contextlib.contextmanager
def docker_localstack(workdir: Path) -> Iterator[str]:
    """The official image from ``localstack/docker-compose.yml``, on a free port; yields its endpoint."""
    docker = shutil.which("docker")
    if docker is None:
        raise AssertionError("DURASTATE_LOCALSTACK=docker needs the docker CLI and a running daemon")
    port = free_port()
    project = f"durastate-test-{port}"
    env = {**os.environ, "LOCALSTACK_PORT": str(port), "LOCALSTACK_CONTAINER_NAME": project,
           "LOCALSTACK_VOLUME_DIR": str(workdir / "volume")}
    compose = [docker, "compose", "-f", str(COMPOSE), "-p", project]
    subprocess.run([*compose, "up", "-d"], env=env, check=True, timeout=900)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _health(endpoint, compose_environment()["SERVICES"].split(",")),
                 "LocalStack's health endpoint", timeout=180)
        yield endpoint
    finally:
        subprocess.run([*compose, "down", "-v"], env=env, check=False, timeout=300)


def localstack(workdir: Path) -> contextlib.AbstractContextManager[str]:
    mode = os.environ.get("DURASTATE_LOCALSTACK", "host")
    if mode == "host":
        return host_localstack(workdir)
    if mode == "docker":
        return docker_localstack(workdir)
    raise AssertionError(f"DURASTATE_LOCALSTACK must be host or docker, not {mode!r}")


def cdklocal_env(endpoint: str) -> dict[str, str]:
    """What ``cdklocal`` 3 needs: the endpoint for every service and, since it refuses ``AWS_ENDPOINT_URL``
    alone, for S3 too (an IP address: path-style bucket URLs); the venv's Node first on ``PATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update({
        "PATH": os.pathsep.join([str(ROOT / "node_modules" / ".bin"), str(Path(sys.executable).parent),
                                 env.get("PATH", "")]),
        "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
        "CDK_DISABLE_CLI_TELEMETRY": "1", "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    })
    return env


def cdklocal(args: list[str], env: dict[str, str], timeout: float = 900) -> str:
    proc = subprocess.run([str(ROOT / "node_modules" / ".bin" / "cdklocal"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"cdklocal {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-8000:]}")
    return proc.stdout + proc.stderr
