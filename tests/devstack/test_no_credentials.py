"""``durastate local`` used from a shell with no AWS configuration at all: no ``AWS_*`` variable, a ``HOME``
without ``~/.aws``, no instance role.

The lines ``durastate local`` prints for talking to the stack are pasted as printed and must work; the
``durastate`` commands need no credentials for a local endpoint (moto accepts any: the CLI supplies dummy
ones); and against real AWS, missing credentials end in one line saying what to set — never "unexpected
… please report it".
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from durastate.cli import run

pytestmark = pytest.mark.slow

TIMEOUT = 120.0
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
DURASTATE = [sys.executable, "-m", "durastate.cli"]


def bare_env(home: Path) -> dict[str, str]:
    """This process's environment without any AWS or durastate setting, ``HOME`` an empty folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DURASTATE_"))}
    # No instance role either (a CI runner on EC2 has one): this is not an AWS configuration a user sets.
    env.update(HOME=str(home), AWS_EC2_METADATA_DISABLED="true", PYTHONUNBUFFERED="1")
    return env


class LocalCommand:
    """``durastate local --port 0`` in a subprocess; stdout and stderr lines arrive on queues."""

    def __init__(self, template: Path, env: dict[str, str], cwd: Path) -> None:
        cmd = [*DURASTATE, "local", "--port", "0", "--template", str(template), "--retry-delay", "0",
               "--poll", "0.05"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     cwd=cwd)
        self.out: queue.Queue[str | None] = queue.Queue()
        self.err: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True).start()
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    @staticmethod
    def _pump(stream: object, lines: queue.Queue[str | None]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def wait_for(self, pattern: str) -> str:
        while True:
            try:
                line = self.out.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} within {TIMEOUT}s") from None
            if line is None:
                self.read_stderr(0.5)
                raise AssertionError(f"`durastate local` exited ({self.proc.wait()}) before {pattern!r}:\n"
                                     + "\n".join(self.stderr))
            self.stdout.append(line)
            if re.search(pattern, line):
                return line

    def read_stderr(self, quiet_for: float = 1.0) -> list[str]:
        """Every stderr line so far (waits until none came for ``quiet_for`` seconds)."""
        while True:
            try:
                line = self.err.get(timeout=quiet_for)
            except queue.Empty:
                return self.stderr
            if line is None:
                return self.stderr
            self.stderr.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture()
def local(cloud_assembly: Path, home: Path, tmp_path: Path) -> Iterator[LocalCommand]:
    cmd = LocalCommand(cloud_assembly / "DurastateStack.template.json", bare_env(home), tmp_path)
    try:
        cmd.wait_for(r"^settled$")  # the first turn ran: the hint is out
        yield cmd
    finally:
        cmd.stop()


def hint_commands(stderr: list[str]) -> list[str]:
    """The command lines of the hint, in order (an optional ``try:`` in front of one is not part of it)."""
    out = []
    for line in stderr:
        text = line.strip()
        text = text[len("try:"):].strip() if text.startswith("try:") else text
        words = text.split()
        if words and (words[0] in ("export", "durastate", "aws") or ASSIGNMENT.match(words[0])):
            out.append(text)
    return out


def run_line(line: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str] | None:
    """Run one hint line as a shell would; ``export`` changes ``env`` for the lines after it."""
    words = shlex.split(line)
    if words[0] == "export":
        env.update(w.split("=", 1) for w in words[1:])
        return None
    own = dict(env)
    while ASSIGNMENT.match(words[0]):  # VAR=value command …: for this command only
        key, value = words.pop(0).split("=", 1)
        own[key] = value
    if words[0] == "durastate":
        argv = [*DURASTATE, *words[1:]]
    else:
        found = shutil.which(words[0], path=own.get("PATH"))
        if found is None:  # the AWS CLI is not installed here; boto3 is covered below
            return None
        argv = [found, *words[1:]]
    return subprocess.run(argv, env=own, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)


def test_the_printed_hint_works_as_printed_without_aws_configuration(local: LocalCommand, home: Path,
                                                                   tmp_path: Path) -> None:
    lines = hint_commands(local.read_stderr())
    assert any(line.split()[:2] == ["durastate", "start"] or " durastate start " in line for line in lines), \
        local.stderr
    env = bare_env(home)
    for line in lines:
        done = run_line(line, env, tmp_path)
        if done is None:
            continue
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        if " start " in f" {line} ":
            local.wait_for(r"^step worker [1-9]")  # the worker applied it before the next line reads it
            local.wait_for(r"^settled$")
        if " show " in f" {line} ":
            assert "order" in done.stdout and "running" in done.stdout, done.stdout

    # boto3 with nothing but what the hint exported (the AWS CLI line may have been skipped above)
    dlq = next(w for line in lines for w in line.split() if w.endswith("-dlq.fifo"))
    probe = ("import boto3, sys; "
             "print(boto3.client('sqs').get_queue_attributes(QueueUrl=sys.argv[1], "
             "AttributeNames=['QueueArn'])['Attributes']['QueueArn'])")
    done = subprocess.run([sys.executable, "-c", probe, dlq], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("-dlq.fifo"), done.stderr


def test_the_cli_needs_no_credentials_for_a_local_endpoint(local: LocalCommand, home: Path,
                                                           tmp_path: Path) -> None:
    """No variable at all: the queue URL names its server, the store URL its endpoint."""
    printed = dict(line.split(None, 1) for line in local.stdout if line.startswith(("endpoint ", "queue ")))
    queue_url, server = printed["queue"].strip(), printed["endpoint"].strip()
    env = bare_env(home)
    started = subprocess.run([*DURASTATE, "start", "order", "--id", "bare", "--queue-url", queue_url], env=env,
                             cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert started.returncode == 0, started.stderr
    local.wait_for(r"^step worker [1-9]")
    local.wait_for(r"^settled$")
    shown = subprocess.run([*DURASTATE, "--store", f"dynamodb://durastate?endpoint_url={server}", "show", "bare"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "order" in shown.stdout


@pytest.fixture()
def no_aws(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("AWS_", "DURASTATE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.parametrize("argv", [
    ["start", "order", "--id", "o1", "--queue-url",
     "https://sqs.us-east-1.amazonaws.com/123456789012/durastate-events.fifo"],
    ["send", "o1", "pay", "--queue-url", "https://sqs.us-east-1.amazonaws.com/123456789012/durastate-events.fifo"],
    ["--store", "dynamodb://durastate?region=us-east-1", "--connect-retries", "1", "list"],
], ids=["start-queue", "send-queue", "dynamodb-store"])
def test_missing_credentials_for_aws_say_what_to_set(no_aws: None, argv: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert run(argv) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: no AWS credentials"), err
    assert "AWS_ACCESS_KEY_ID" in err and "please report" not in err


@pytest.fixture()
def moto_server() -> Iterator[str]:
    from durastate.devstack.moto_server import MotoServer

    server = MotoServer(port=0)
    try:
        endpoint = server.start()
        yield endpoint  # (stopping it resets moto's state: nothing is left to later tests)
    finally:
        server.stop()


@pytest.mark.parametrize("explicit_endpoint", [True, False], ids=["endpoint_url", "local-queue-url"])
def test_the_client_needs_no_credentials_for_a_local_endpoint(no_aws: None, moto_server: str,
                                                              explicit_endpoint: bool) -> None:
    """``DurastateClient.for_aws`` as the CLI: no AWS configuration at all, a local server answers. With no
    ``endpoint_url``, the queue URL on this machine names the server for both services."""
    from durastate.client import DurastateClient
    from durastate.devstack.moto_server import endpoint_client
    from durastate.store.dynamodb.sync import DynamoDBStore

    sqs = endpoint_client("sqs", moto_server, "us-east-1")  # the stack's part: moto's own stand-ins
    queue_url = sqs.create_queue(QueueName="bare-events.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    DynamoDBStore(endpoint_client("dynamodb", moto_server, "us-east-1"), prefix="bare").ensure_tables()
    for name in list(os.environ):  # nothing the setup above may have left for botocore to find
        assert not name.startswith("AWS_") or name == "AWS_EC2_METADATA_DISABLED", name

    client = DurastateClient.for_aws(queue_url, table_prefix="bare",
                                     endpoint_url=moto_server if explicit_endpoint else None)
    exe_id = client.start("order", execution_id="bare-1")
    assert client.get(exe_id) is None  # read from the tables: nothing applied it (no worker here)
    [message] = sqs.receive_message(QueueUrl=queue_url, MessageAttributeNames=["All"]).get("Messages", [])
    assert json.loads(message["Body"])["target_id"] == "bare-1"


def test_the_client_says_what_to_set_without_credentials_for_aws(no_aws: None) -> None:
    from durastate.client import DurastateClient
    from durastate.transport.aws_clients import AwsSetupError

    with pytest.raises(AwsSetupError, match=r"no AWS credentials for SQS queue .*AWS_ACCESS_KEY_ID"):
        DurastateClient.for_aws("https://sqs.us-east-1.amazonaws.com/123456789012/durastate-events.fifo")
