"""One Lambda execution environment as a host process: what LocalStack's runtime-init does in a container.

Started by the host-process executor with the environment LocalStack gives every execution environment
(``_HANDLER``, the role's credentials, ``AWS_ENDPOINT_URL``, ``LOCALSTACK_RUNTIME_ENDPOINT`` and
``LOCALSTACK_RUNTIME_ID``, the function's own variables) plus ``HOST_RUNTIME_TASK_ROOT`` (the function's
unzipped code) and ``HOST_RUNTIME_INVOKE_PORT``. It imports the handler from the task root — the only import
path besides the runtime's own Python and boto3: no ``/opt/python``, so nothing of a layer — then reports
``status/<id>/ready`` (or ``status/<id>/error`` with the import error), serves ``POST /invoke`` and, for each
invocation, posts its logs and then its result to ``invocations/<request-id>/response`` or ``/error``.

A container has the code at ``/var/task``; here every environment value that names a path under
``/var/task`` is rewritten to the task root, so a function that reads its own files finds them.
"""

import importlib
import io
import json
import os
import sys
import threading
import time
import traceback
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from queue import Queue

TASK_ROOT = os.environ.pop("HOST_RUNTIME_TASK_ROOT")
PORT = int(os.environ.pop("HOST_RUNTIME_INVOKE_PORT"))
ENDPOINT = os.environ["LOCALSTACK_RUNTIME_ENDPOINT"]
RUNTIME_ID = os.environ["LOCALSTACK_RUNTIME_ID"]

for _key, _value in list(os.environ.items()):
    if _value == "/var/task" or _value.startswith("/var/task/"):
        os.environ[_key] = TASK_ROOT + _value[len("/var/task"):]
os.environ["LAMBDA_TASK_ROOT"] = TASK_ROOT
sys.path[0] = TASK_ROOT  # instead of this file's folder


class _Tee(io.TextIOBase):
    """stdout/stderr: to the process's output (LocalStack's log) and to the current invocation's logs."""

    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()
        self.buffer_ = None

    def write(self, text):
        with self.lock:
            if self.buffer_ is not None:
                self.buffer_.append(text)
        self.stream.write(text)
        self.stream.flush()
        return len(text)

    def flush(self):
        self.stream.flush()


_OUT = _Tee(sys.stdout)
sys.stdout = sys.stderr = _OUT


def _post(path, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(f"{ENDPOINT}{path}", data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    opener.open(req, timeout=30).close()


def _error(exc):
    return {"errorMessage": str(exc), "errorType": type(exc).__name__,
            "stackTrace": traceback.format_exception(exc)}


class Context:
    """The handler's ``context``, with the attributes of the Python runtime's."""

    def __init__(self, request_id, invoked_arn, deadline):
        self.aws_request_id = request_id
        self.invoked_function_arn = invoked_arn
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline = deadline

    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _load_handler():
    module_name, _, function_name = os.environ["_HANDLER"].rpartition(".")
    return getattr(importlib.import_module(module_name), function_name)


_invocations = Queue()


class _Invoke(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/invoke":
            self.send_response(404)
            self.end_headers()
            return
        _invocations.put(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format, *args):
        pass


def _run(handler, invocation):
    request_id = invocation["invoke-id"]
    timeout = float(os.environ.get("AWS_LAMBDA_FUNCTION_TIMEOUT", "3"))
    os.environ["_X_AMZN_TRACE_ID"] = invocation.get("trace-id") or ""
    logs = []
    _OUT.buffer_ = logs
    started = time.monotonic()
    print(f"START RequestId: {request_id} Version: {os.environ.get('AWS_LAMBDA_FUNCTION_VERSION', '$LATEST')}")
    try:
        result, failed = handler(json.loads(invocation["payload"]),
                                 Context(request_id, invocation["invoked-function-arn"], started + timeout)), False
    except Exception as exc:  # the function's error is the invocation's result, as in Lambda
        traceback.print_exc()
        result, failed = _error(exc), True
    print(f"END RequestId: {request_id}")
    print(f"REPORT RequestId: {request_id}\tDuration: {(time.monotonic() - started) * 1000:.2f} ms")
    _OUT.buffer_ = None
    _post(f"/invocations/{request_id}/logs", {"logs": "".join(logs)})
    try:
        body = json.dumps(result).encode()
    except (TypeError, ValueError) as exc:
        body, failed = json.dumps(_error(exc)).encode(), True
    _post(f"/invocations/{request_id}/{'error' if failed else 'response'}", body)


def _exit_with_parent(parent):
    """A container dies with LocalStack; this process exits when its parent (LocalStack) is gone."""
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)


def main():
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    server = HTTPServer(("127.0.0.1", PORT), _Invoke)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        handler = _load_handler()
    except Exception as exc:  # an import error fails the environment's start, as in Lambda
        traceback.print_exc()
        _post(f"/status/{RUNTIME_ID}/error", _error(exc))
        return 1
    _post(f"/status/{RUNTIME_ID}/ready", {})
    while True:
        _run(handler, _invocations.get())


if __name__ == "__main__":
    raise SystemExit(main())
