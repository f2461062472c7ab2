"""A Lambda runtime executor that runs each execution environment as a process on this host.

LocalStack's community executor starts a container from the runtime's image, copies the function's unzipped
code to ``/var/task`` (and nothing of its layers) and LocalStack's runtime-init binary into it; that binary
serves ``POST /invoke`` and calls back to ``/_localstack_lambda/<executor-id>/...`` with the environment's
status and each invocation's logs and result. This executor keeps that contract with a process instead of a
container: ``runtime/bootstrap.py`` on the host Python of the function's runtime (a virtualenv holding only
boto3, as Lambda's image does), with the function's unzipped code as its only other import path. The
function's layers are ignored exactly as the community executor ignores them. Unlike a container, the
process is not confined (it sees this host's files) and an invocation past the function's timeout is not
cut off by the environment (LocalStack's own invoke deadline still applies).

The host runtimes live in ``$LAMBDA_HOST_RUNTIMES_DIR/<runtime>/bin/python`` (``python3.12``, ...), which
``localstack/host/run.py`` creates.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from localstack.services.lambda_.invocation.executor_endpoint import ExecutorEndpoint
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin
from localstack.services.lambda_.invocation.runtime_executor import LambdaRuntimeException, RuntimeExecutor
from localstack.utils.net import get_free_tcp_port

from localstack import config

BOOTSTRAP = Path(__file__).resolve().parent / "runtime" / "bootstrap.py"
#: Logs kept per environment for ``get_logs`` (LocalStack prints them when a start fails or times out).
_LOG_LIMIT = 200_000


def host_python(runtime: str) -> Path:
    root = os.environ.get("LAMBDA_HOST_RUNTIMES_DIR", "")
    python = Path(root) / runtime / "bin" / "python"
    if not root or not python.is_file():
        raise LambdaRuntimeException(
            f"no host runtime for {runtime}: expected {python} (set LAMBDA_HOST_RUNTIMES_DIR; "
            "localstack/host/run.py creates one per Lambda Python runtime)")
    return python


class HostProcessRuntimeExecutor(RuntimeExecutor):
    """One execution environment = one host process serving ``/invoke`` on a free loopback port."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self.port = get_free_tcp_port()
        self.executor_endpoint = ExecutorEndpoint(self.id, container_address="127.0.0.1",
                                                  container_port=self.port)
        self.process: subprocess.Popen[bytes] | None = None
        self._logs = bytearray()

    def start(self, env_vars: dict[str, str]) -> None:
        runtime = self.function_version.config.runtime
        if not runtime or not runtime.startswith("python"):
            raise LambdaRuntimeException(f"the host-process executor runs Python functions only, not {runtime}")
        code = self.function_version.config.code.get_unzipped_code_location()
        env = {k: str(v) for k, v in env_vars.items()}
        env.update({
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOST_RUNTIME_TASK_ROOT": str(code),
            "HOST_RUNTIME_INVOKE_PORT": str(self.port),
        })
        self.executor_endpoint.start()
        self.process = subprocess.Popen(
            [str(host_python(runtime)), "-X", "utf8", str(BOOTSTRAP)], cwd=code, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        threading.Thread(target=self._collect, args=(self.process,), daemon=True,
                         name=f"lambda-host-{self.id}").start()
        self.executor_endpoint.wait_for_startup()

    def _collect(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stderr.buffer.write(f"[lambda {self.function_version.id.function_name}] ".encode() + line)
            self._logs += line
            del self._logs[:-_LOG_LIMIT]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        with contextlib.suppress(Exception):  # as the Docker executor: a stop never fails on its endpoint
            self.executor_endpoint.shutdown()

    def get_address(self) -> str:
        return "127.0.0.1"

    def get_endpoint_from_executor(self) -> str:
        return "127.0.0.1"

    def get_runtime_endpoint(self) -> str:
        return (f"http://127.0.0.1:{config.GATEWAY_LISTEN[0].port}"
                f"{self.executor_endpoint.get_endpoint_prefix()}")

    def invoke(self, payload: dict[str, Any]) -> InvocationResult:
        return self.executor_endpoint.invoke(payload)

    def get_logs(self) -> str:
        return self._logs.decode("utf-8", errors="replace")

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass


class HostProcessExecutorPlugin(RuntimeExecutorPlugin):
    name = "host-process"

    def load(self, *args: Any, **kwargs: Any) -> type[RuntimeExecutor]:
        return HostProcessRuntimeExecutor
