"""The no-Docker local stack: the stack's resources on moto's HTTP server, its handlers run as Lambda would.

Why this exists: LocalStack needs Docker (and, past 4.14.0, an auth token). moto's server needs neither,
but while it stores Lambda functions, event source mappings and EventBridge rules, it never runs handler
code without Docker and never fires a schedule. So :class:`LocalStack` plays Lambda's part itself, and
nothing else differs from production:

* **The resources come from the synthesized CloudFormation template** (read by
  :mod:`durastate.devstack.template`): every table with its keys, indexes, stream and TTL; every queue with
  its FIFO attributes and redrive policy (moto enforces ``maxReceiveCount``); every event bus; every S3
  bucket with its encryption and public access block (its bucket policy is read, not enforced). What
  ``cdk deploy`` would create is what gets created, on a server :mod:`durastate.devstack.moto_server`
  starts (or on one that is already running).
* **The handlers are the packaged ones** (:mod:`durastate.devstack.handlers`): each function's code is
  loaded from its asset folder in ``cdk.out``, with the function's environment from the template
  (references resolved to the local queue URLs and names). The engine comes from this installation
  instead of the layer.
* **The roles are the template's**: every request a function makes (and its event source mappings make
  for it) is decided against that function's role policy, and denied as IAM would deny it
  (:mod:`durastate.devstack.iam`; ``iam=False`` turns it off).
* **The triggers are the template's**: the worker gets SQS batches of at most ``BatchSize`` (≤ 10), FIFO
  groups kept in order by SQS itself, partial batch responses honoured (failed records return to the
  queue; the redrive policy moves them to the DLQ after ``maxReceiveCount`` receives) — see
  :class:`durastate.devstack.lambda_emulator.SqsBatchInvoker`. The relay gets the outbox/spawns stream
  records (:mod:`durastate.devstack.streams`) and its backstop schedule; the sweeper its schedule; the
  timers function the hops of the timers queue, each when it is due on the stack's clock
  (:mod:`durastate.devstack.timer_hops`). Schedules and hops follow an injectable clock, so a test can
  fire timers without waiting.

Use it from the shell (``durastate local``) or in-process (``with LocalStack(template) as stack: ...``).
boto3 and moto are imported lazily: ``import durastate`` never needs them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durastate.devstack.errors import LocalStackError
from durastate.devstack.handlers import load_handler
from durastate.devstack.iam import IamEnforcer, RolePolicies, resolve_document
from durastate.devstack.lambda_emulator import ACCOUNT
from durastate.devstack.moto_server import MotoServer, endpoint_client
from durastate.devstack.streams import StreamCursor, open_cursor, read_new_records, stream_arn
from durastate.devstack.task_functions import LocalTaskFunctions
from durastate.devstack.template import (
    DEFAULT_TEMPLATE,
    TASK_ROOT,
    SqsTrigger,
    parse_template,
    read_template,
    referenced_id,
)

__all__ = ["LocalStack", "StepReport"]

log = logging.getLogger("durastate.devstack.stack")


@dataclass
class StepReport:
    """What one turn of the loop did; all zero means idle."""

    worker_received: int = 0
    worker_failed: int = 0
    stream_records: int = 0
    relay_runs: int = 0
    sweeper_runs: int = 0
    timers_forwarded: int = 0
    """Hops of the timers queue handed to the timers function (they were due)."""

    @property
    def idle(self) -> bool:
        """Nothing happened: no record received, no function invoked (a scheduled run may send events)."""
        return not (self.worker_received or self.stream_records or self.relay_runs or self.sweeper_runs
                    or self.timers_forwarded)


class LocalStack:
    """moto's server with the stack's resources, and Lambda's part played by this object.

    ``endpoint_url`` attaches to a server that is already running (another ``durastate local``, or a test's
    ``ThreadedMotoServer``) instead of starting one; ``create_resources=False`` then assumes they exist.
    ``clock`` drives the schedules (the sweeper and the relay backstop) *and* the runtime the handlers use,
    so a test can move time forward. ``retry_delay`` is how soon a failed SQS record is visible again
    (Lambda: the queue's visibility timeout; ``None`` keeps it); ``visibility_timeout`` overrides the
    queue's for each receive (a restarted loop then sees what a killed one had in flight sooner).
    ``environment`` overrides function environment variables (e.g. ``POWERTOOLS_LOG_LEVEL``; an empty
    ``DURASTATE_TIMERS_QUEUE_URL`` turns the timer hop off: the sweeper alone fires timers).
    ``real_time_delays``: whether ``clock`` runs at real speed, so that moto may hold the timers queue's
    hops for their ``DelaySeconds`` (default: only when ``clock`` is ``time.time``); otherwise the hops
    are sent undelayed and held until due on ``clock`` (:mod:`durastate.devstack.timer_hops`).
    ``task_functions``: ``{function name: handler}``, the Lambda functions definitions invoke as tasks
    (``invoke: {task: {lambda: <name or ARN>}}``), which the relay calls as Lambda would.
    ``iam``: decide every request a function makes (and its event source mappings make for it) against
    that function's role policy in the template, and deny what AWS would deny (default on;
    :mod:`durastate.devstack.iam`). The decisions are in ``stack.iam.decisions``.
    """

    def __init__(
        self,
        template: str | Path | Mapping[str, Any] = DEFAULT_TEMPLATE,
        *,
        endpoint_url: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        region: str = "us-east-1",
        asset_root: str | Path | None = None,
        definitions_dir: str | Path | None = None,
        clock: Callable[[], float] = time.time,
        retry_delay: int | None = 1,
        visibility_timeout: int | None = None,
        create_resources: bool = True,
        set_environment: bool = True,
        environment: Mapping[str, str] | None = None,
        real_time_delays: bool | None = None,
        task_functions: Mapping[str, Callable[[dict[str, Any], Any], Any]] | None = None,
        iam: bool = True,
    ) -> None:
        if isinstance(template, Mapping):
            self.template: dict[str, Any] = dict(template)
            root = Path(asset_root) if asset_root is not None else None
        else:
            self.template = read_template(template)
            root = Path(asset_root) if asset_root is not None else Path(template).parent
        self.resources = parse_template(self.template, root)
        self.region = region
        self.clock = clock
        self.retry_delay = retry_delay
        self.visibility_timeout = visibility_timeout
        self._env_overrides = dict(environment or {})
        self._host, self._port = host, port
        self._endpoint = endpoint_url
        self._create = create_resources
        self._set_env = set_environment
        self._definitions_override = Path(definitions_dir) if definitions_dir is not None else None
        self._server: MotoServer | None = None
        self._clients: dict[str, Any] = {}
        self._saved_env: dict[str, str | None] = {}
        self.queue_urls: dict[str, str] = {}
        self.table_names = {lid: t.name for lid, t in self.resources.tables.items()}
        self.bucket_policies: dict[str, dict[str, Any]] = {}
        """Each bucket's policy from the template, resolved to the local names (not enforced: see
        :meth:`create_resources`)."""
        self.handlers: dict[str, Callable[[dict[str, Any], Any], Any]] = {}
        self._invoker: Any = None
        self._timers_invoker: Any = None
        self.real_time_delays = (clock is time.time) if real_time_delays is None else real_time_delays
        self._cursors: list[StreamCursor] = []
        self._next_run: dict[tuple[str, str], float] = {}
        self._started = False
        self.runtime: Any = None
        """The worker's runtime (:class:`durastate.runtime.aws.AwsRuntime`); ``runtimes`` has each function's."""
        self.runtimes: dict[str, Any] = {}
        self.task_functions = LocalTaskFunctions(task_functions or {}, region, authorize=self._authorize_invoke)
        self._enforce_iam = iam
        self.iam: IamEnforcer | None = None
        """The IAM decisions of this stack's functions (``None`` with ``iam=False`` or before ``start``)."""
        """The Lambda functions definitions run as tasks, by name: moto cannot run them without Docker, so
        the relay calls these handlers the way Lambda would (:mod:`durastate.devstack.task_functions`)."""

    # -- lifecycle ---------------------------------------------------------------------------------------
    @property
    def endpoint_url(self) -> str:
        if self._endpoint is None:
            raise LocalStackError("the local stack is not started")
        return self._endpoint

    def client(self, service: str) -> Any:
        """A boto3 client for this stack's endpoint (dummy credentials; moto accepts any)."""
        if service not in self._clients:
            self._clients[service] = endpoint_client(service, self.endpoint_url, self.region)
            if self.iam is not None:
                self.iam.attach(self._clients[service])
        return self._clients[service]

    def start(self) -> LocalStack:
        if self._started:
            return self
        if self._endpoint is None:
            self._start_server()
        try:
            if self._create:
                self.create_resources()
            else:
                self._lookup_resources()
            if self._enforce_iam:
                self._install_iam()
            self._install_runtime()
            self._load_handlers()
            self._open_streams()
        except BaseException:
            self.stop()
            raise
        now = self.clock()
        for sched in self.resources.schedules:
            self._next_run[(sched.function, sched.rule)] = now + sched.seconds
        self._started = True
        # A new loop has no stream checkpoint: one relay run delivers whatever a previous loop left behind
        # (what the scheduled backstop does in production, without waiting for it).
        self.run_function("relay")
        return self

    def stop(self) -> None:
        """Stop the server this object started (state is lost) and restore the environment."""
        from durastate.runtime import aws

        if self.runtime is not None:
            aws.set_runtime(None)
            self.runtime = None
            self.runtimes = {}
        for key, old in self._saved_env.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        self._saved_env.clear()
        if self._server is not None:
            self._server.stop()
            self._server = None
            self._endpoint = None
        self._clients.clear()
        self.iam = None
        self._started = False

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start_server(self) -> None:
        self._server = MotoServer(self._host, self._port)
        self._endpoint = self._server.start()

    # -- resources ---------------------------------------------------------------------------------------
    def create_resources(self) -> None:
        """Create the template's tables, queues (DLQs first), buses and buckets; existing ones are kept."""
        ddb = self.client("dynamodb")
        for t in self.resources.tables.values():
            params: dict[str, Any] = {"TableName": t.name, "KeySchema": t.key_schema,
                                      "AttributeDefinitions": t.attribute_definitions,
                                      "BillingMode": "PAY_PER_REQUEST"}
            if t.stream_view_type:
                params["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": t.stream_view_type}
            if t.global_secondary_indexes:
                params["GlobalSecondaryIndexes"] = [
                    {k: v for k, v in g.items() if k in ("IndexName", "KeySchema", "Projection")}
                    for g in t.global_secondary_indexes]
            try:
                ddb.create_table(**params)
            except ddb.exceptions.ResourceInUseException:
                continue
            if t.ttl_attribute:
                ddb.update_time_to_live(TableName=t.name, TimeToLiveSpecification={
                    "Enabled": True, "AttributeName": t.ttl_attribute})
        sqs = self.client("sqs")
        pending = dict(self.resources.queues)
        while pending:
            ready = [q for q in pending.values()
                     if q.dead_letter_logical_id is None or q.dead_letter_logical_id in self.queue_urls]
            if not ready:
                raise LocalStackError("the template's queues have a redrive cycle or a DLQ outside the stack")
            for q in ready:
                attrs = dict(q.attributes)
                attrs.pop("SqsManagedSseEnabled", None)  # encryption at rest has no meaning locally
                if q.dead_letter_logical_id is not None:
                    dlq_url = self.queue_urls[q.dead_letter_logical_id]
                    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])
                    attrs["RedrivePolicy"] = json.dumps({
                        "deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"],
                        "maxReceiveCount": q.max_receive_count or 5})
                created = sqs.create_queue(QueueName=q.name, Attributes=attrs)
                self.queue_urls[q.logical_id] = created["QueueUrl"]
                del pending[q.logical_id]
        events = self.client("events")
        for name in self.resources.buses.values():
            with contextlib.suppress(events.exceptions.ResourceAlreadyExistsException):
                events.create_event_bus(Name=name)
        self._create_buckets()

    def _create_buckets(self) -> None:
        """Each bucket with what moto keeps of it: its encryption and public access block.

        The bucket policy is resolved into :attr:`bucket_policies` but not given to moto: moto enforces a
        bucket policy, and the construct's refuses requests without TLS, which every request to the local
        (plain HTTP) endpoint is. The functions' requests are decided against their roles instead."""
        s3 = self.client("s3")
        for b in self.resources.buckets.values():
            with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
                if self.region == "us-east-1":
                    s3.create_bucket(Bucket=b.name)
                else:
                    s3.create_bucket(Bucket=b.name, CreateBucketConfiguration={"LocationConstraint": self.region})
            if b.encryption:  # CloudFormation's ServerSideEncryptionByDefault is the API's Apply... one
                rules = [{("ApplyServerSideEncryptionByDefault" if k == "ServerSideEncryptionByDefault" else k): v
                          for k, v in rule.items()} for rule in b.encryption["ServerSideEncryptionConfiguration"]]
                s3.put_bucket_encryption(Bucket=b.name, ServerSideEncryptionConfiguration={"Rules": rules})
            if b.public_access_block:
                s3.put_public_access_block(Bucket=b.name, PublicAccessBlockConfiguration=b.public_access_block)
            if b.policy:
                account = self._account()
                self.bucket_policies[b.name] = resolve_document(b.policy, self._attribute(account),
                                                                self._ref(account))

    def _lookup_resources(self) -> None:
        sqs = self.client("sqs")
        for q in self.resources.queues.values():
            try:
                self.queue_urls[q.logical_id] = sqs.get_queue_url(QueueName=q.name)["QueueUrl"]
            except sqs.exceptions.QueueDoesNotExist:
                raise LocalStackError(f"queue {q.name} does not exist at {self.endpoint_url}: start the "
                                      "local stack with resource creation first") from None

    def _resolve(self, value: Any) -> str:
        """A function environment value, with references to stack resources made local."""
        if isinstance(value, str):
            return value
        lid = referenced_id(value)
        if lid in self.queue_urls:
            if isinstance(value, dict) and "Fn::GetAtt" in value:
                attr = value["Fn::GetAtt"][1]
                got = self.client("sqs").get_queue_attributes(QueueUrl=self.queue_urls[lid],
                                                              AttributeNames=["QueueArn"])
                if attr == "Arn":
                    return str(got["Attributes"]["QueueArn"])
                return self.resources.queues[lid].name
            return self.queue_urls[lid]
        if lid in self.resources.buses:
            return self.resources.buses[lid]
        if lid in self.table_names:
            return self.table_names[lid]
        if lid in self.resources.buckets:
            name = self.resources.buckets[lid].name
            return f"arn:aws:s3:::{name}" if isinstance(value, dict) and "Fn::GetAtt" in value else name
        raise LocalStackError(f"cannot resolve {json.dumps(value)} in a function's environment locally")

    @property
    def queue_url(self) -> str:
        """The event queue (the one the worker consumes)."""
        return self.queue_urls[self._worker_trigger().queue]

    @property
    def timers_queue_url(self) -> str | None:
        """The standard queue timers due soon wait in (``None``: the template has no timers function)."""
        trigger = self._trigger("timers")
        return None if trigger is None else self.queue_urls[trigger.queue]

    @property
    def dlq_url(self) -> str:
        q = self.resources.queues[self._worker_trigger().queue]
        if q.dead_letter_logical_id is None:
            raise LocalStackError("the event queue has no dead-letter queue in the template")
        return self.queue_urls[q.dead_letter_logical_id]

    def environment(self, role: str = "worker") -> dict[str, str]:
        """A function's environment as Lambda would set it, pointed at the local endpoint."""
        fn = self.resources.function(role)
        env = {k: self._resolve(v) for k, v in fn.environment.items()}
        defs = env.get("DURASTATE_DEFINITIONS_DIR")
        if self._definitions_override is not None:
            env["DURASTATE_DEFINITIONS_DIR"] = str(self._definitions_override)
        elif defs and defs.startswith(TASK_ROOT + "/") and fn.code_dir is not None:
            env["DURASTATE_DEFINITIONS_DIR"] = str(fn.code_dir / defs[len(TASK_ROOT) + 1:])
        env.update({"AWS_REGION": self.region, "AWS_DEFAULT_REGION": self.region,
                    "AWS_ENDPOINT_URL": self.endpoint_url, "POWERTOOLS_TRACE_DISABLED": "true",
                    "AWS_LAMBDA_FUNCTION_NAME": f"durastate-local-{role}"})
        env.update(self._env_overrides)
        return env

    @contextlib.contextmanager
    def _function_env(self, role: str) -> Iterator[None]:
        """While a handler is imported or invoked, the variables that differ per function are its own."""
        if not self._set_env:
            yield
            return
        env = self.environment(role)
        own = {k: v for k, v in env.items() if os.environ.get(k) != v}
        saved = {k: os.environ.get(k) for k in own}
        os.environ.update(own)
        try:
            yield
        finally:
            for k, old in saved.items():
                if old is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = old

    def _install_runtime(self) -> None:
        """Each function's runtime, on this stack's clients and clock (what Lambda builds from its env).

        One per function, as each function runs in containers of its own on AWS: their stores' caches
        (the versions and dedupe filters last seen, the trace ring's next index) are not shared, so each
        function makes the reads a container of its own makes — and the IAM check sees them. They share
        the definitions registry (every function packages the same folder); ``runtime`` is the worker's."""
        from durastate.runtime import aws

        env = self.environment("worker")
        if self._set_env:
            shared = {k: v for k, v in env.items() if k != "AWS_LAMBDA_FUNCTION_NAME"}
            shared.setdefault("AWS_ACCESS_KEY_ID", os.environ.get("AWS_ACCESS_KEY_ID") or "testing")
            shared.setdefault("AWS_SECRET_ACCESS_KEY", os.environ.get("AWS_SECRET_ACCESS_KEY") or "testing")
            for key, value in shared.items():
                self._saved_env.setdefault(key, os.environ.get(key))
                os.environ[key] = value
        settings = aws.AwsSettings.from_env(env)
        if settings.timers_queue_url and not self.real_time_delays:
            from durastate.devstack.timer_hops import zero_hop_delays

            zero_hop_delays(self.client("sqs"), settings.timers_queue_url)
        from durastate.runtime.tasks import TaskRunner

        tasks = TaskRunner(lambda_invoker=self.task_functions)
        s3 = self.client("s3") if self.resources.buckets else None
        self.runtime = aws.build_runtime(settings, clock=self.clock, dynamodb=self.client("dynamodb"),
                                         sqs=self.client("sqs"), events=self.client("events"), s3=s3)
        self.runtime.relay.tasks = tasks
        self.runtimes = {}
        for fn in self.resources.functions.values():
            if fn.role == "worker":
                self.runtimes[fn.role] = self.runtime
                continue
            own = aws.build_runtime(aws.AwsSettings.from_env(self.environment(fn.role)), clock=self.clock,
                                    dynamodb=self.client("dynamodb"), sqs=self.client("sqs"),
                                    events=self.client("events"), s3=s3, registry=self.runtime.registry)
            own.relay.tasks = tasks
            self.runtimes[fn.role] = own
        aws.set_runtime(self.runtime)

    def _install_iam(self) -> None:
        """Decide every request of the functions against their role policies (:mod:`durastate.devstack.iam`)."""
        account = self._account()
        functions = {lid: fn.role for lid, fn in self.resources.functions.items()}
        policies = RolePolicies(self.template, functions, self._attribute(account), self._ref(account))
        self.iam = IamEnforcer(policies.documents, region=self.region, account=account, managed=policies.managed,
                               unknown=policies.unknown)
        for client in self._clients.values():
            self.iam.attach(client)

    def _account(self) -> str:
        """The account moto's server answers for (its queue URLs name it)."""
        accounts = [url.rstrip("/").split("/")[-2] for url in self.queue_urls.values()]
        return accounts[0] if accounts else ACCOUNT

    def _acting_as(self, role: str) -> contextlib.AbstractContextManager[None]:
        return self.iam.acting_as(role) if self.iam is not None else contextlib.nullcontext()

    def _authorize_invoke(self, function: str) -> None:
        """A task's ``lambda:InvokeFunction``, decided for the function running it (the relay)."""
        if self.iam is not None:
            self.iam.check("lambda", "Invoke", {"FunctionName": function})

    def _attribute(self, account: str) -> Callable[[str, str], str]:
        """``Fn::GetAtt`` of a role policy's resources, as the local ARNs."""
        resources = self.template.get("Resources") or {}

        def attribute(lid: str, name: str) -> str:
            props = (resources.get(lid) or {}).get("Properties") or {}
            if lid in self.table_names:
                arn = f"arn:aws:dynamodb:{self.region}:{account}:table/{self.table_names[lid]}"
                if name == "StreamArn":
                    desc = self.client("dynamodb").describe_table(TableName=self.table_names[lid])["Table"]
                    return str(desc.get("LatestStreamArn") or f"{arn}/stream/none")
                return arn
            if lid in self.resources.buckets:
                return self._resolve({"Fn::GetAtt": [lid, name]})
            if lid in self.queue_urls or lid in self.resources.buses:
                return self._resolve({"Fn::GetAtt": [lid, name]}) if lid in self.queue_urls else (
                    f"arn:aws:events:{self.region}:{account}:event-bus/{self.resources.buses[lid]}")
            kind = (resources.get(lid) or {}).get("Type")
            if kind == "AWS::Logs::LogGroup":
                return f"arn:aws:logs:{self.region}:{account}:log-group:{props.get('LogGroupName', lid)}:*"
            if kind == "AWS::Lambda::Function":
                return f"arn:aws:lambda:{self.region}:{account}:function:{props.get('FunctionName', lid)}"
            return f"arn:local:unresolved:{lid}.{name}"  # matches no request

        return attribute

    def _ref(self, account: str) -> Callable[[str], str]:
        """``Ref`` in a role policy: pseudo parameters, and the stack's resources as their local names."""
        pseudo = {"AWS::AccountId": account, "AWS::Region": self.region, "AWS::Partition": "aws",
                  "AWS::URLSuffix": "amazonaws.com"}
        resources = self.template.get("Resources") or {}

        def ref(lid: str) -> str:
            if lid in pseudo:
                return pseudo[lid]
            if (lid in self.queue_urls or lid in self.table_names or lid in self.resources.buses
                    or lid in self.resources.buckets):
                return self._resolve({"Ref": lid})
            props = (resources.get(lid) or {}).get("Properties") or {}
            return str(props.get("FunctionName") or props.get("LogGroupName") or f"unresolved-{lid}")

        return ref

    def _load_handlers(self) -> None:
        from durastate.devstack.lambda_emulator import FakeLambdaContext, SqsBatchInvoker

        for fn in self.resources.functions.values():
            with self._function_env(fn.role):
                self.handlers[fn.role] = load_handler(fn)
        trigger = self._worker_trigger()
        worker_fn = self.resources.functions[trigger.function]

        def worker(event: dict[str, Any], context: Any) -> Any:
            with self._running(worker_fn.role):
                return self.handlers[worker_fn.role](event, context)

        self._invoker = SqsBatchInvoker(
            self.client("sqs"), self.queue_urls[trigger.queue], worker,
            visibility_timeout=self.visibility_timeout,
            batch_size=min(trigger.batch_size, 10), retry_delay=self.retry_delay, region=self.region,
            context_factory=lambda: FakeLambdaContext(function_name="durastate-local-worker",
                                                      timeout_seconds=float(worker_fn.timeout),
                                                      region=self.region))
        timers = self._trigger("timers")
        if timers is not None:
            from durastate.devstack.timer_hops import HeldHopsInvoker

            self._timers_invoker = HeldHopsInvoker(
                self.client("sqs"), self.queue_urls[timers.queue],
                lambda event, context: self.invoke("timers", event), self.clock, region=self.region)

    def _trigger(self, role: str) -> SqsTrigger | None:
        """The SQS event source of the function with this role (``worker``, ``timers``), if any."""
        for trig in self.resources.sqs_triggers:
            fn = self.resources.functions.get(trig.function)
            if fn is not None and fn.role == role:
                return trig
        return None

    def _worker_trigger(self) -> SqsTrigger:
        trigger = self._trigger("worker") or (self.resources.sqs_triggers[0] if self.resources.sqs_triggers
                                              else None)
        if trigger is None:
            raise LocalStackError("the template has no SQS event source mapping (the worker's trigger)")
        return trigger

    def _open_streams(self) -> None:
        ddb, streams = self.client("dynamodb"), self.client("dynamodbstreams")
        for trig in self.resources.stream_triggers:
            # Attach where the mapping starts; on an attached server, LATEST skips records a previous loop
            # already saw (the scheduled backstop covers anything in between, as in production).
            position = trig.starting_position if self._create else "LATEST"
            arn = stream_arn(ddb, self.table_names[trig.table])
            with self._acting_as(self.resources.functions[trig.function].role):
                self._cursors.append(open_cursor(streams, trig, arn, position))

    # -- running -----------------------------------------------------------------------------------------
    def _context(self, role: str) -> Any:
        from durastate.devstack.lambda_emulator import FakeLambdaContext

        fn = self.resources.function(role)
        return FakeLambdaContext(function_name=f"durastate-local-{role}", timeout_seconds=float(fn.timeout),
                                 region=self.region)

    def invoke(self, role: str, event: dict[str, Any]) -> Any:
        """Call a function's handler with an event, as Lambda would."""
        with self._running(role):
            return self.handlers[role](event, self._context(role))

    @contextlib.contextmanager
    def _running(self, role: str) -> Iterator[None]:
        """While a function's handler runs: its environment, its runtime, its role (for the IAM check)."""
        from durastate.runtime import aws

        if self.runtimes:
            aws.set_runtime(self.runtimes.get(role, self.runtime))
        with self._acting_as(role), self._function_env(role):
            yield

    def poll_worker(self) -> Any:
        """One SQS batch through the worker (a :class:`~durastate.devstack.lambda_emulator.BatchResult`)."""
        with self._acting_as(self.resources.functions[self._worker_trigger().function].role):
            return self._invoker.poll_once()  # the event source mapping receives with the worker's role

    def poll_timers(self) -> int:
        """Hand the hops that are due to the timers function; returns how many were handed over."""
        if self._timers_invoker is None:
            return 0
        with self._acting_as("timers"):
            return int(self._timers_invoker.poll_once().received)

    def poll_streams(self) -> int:
        """Deliver new stream records to their functions; returns how many records were delivered."""
        streams = self.client("dynamodbstreams")
        delivered = 0
        for cursor in self._cursors:
            fn = self.resources.functions[cursor.trigger.function]
            with self._acting_as(fn.role):  # the stream's event source mapping reads with the relay's role
                records, advanced = read_new_records(streams, cursor, self.region)
            if records:
                try:
                    self.invoke(fn.role, {"Records": records})
                except Exception:
                    cursor.retries += 1
                    if cursor.retries <= cursor.trigger.retry_attempts:
                        log.warning("%s failed on a stream batch; retrying it", fn.role, exc_info=True)
                        continue  # keep the old iterators: Lambda retries the same batch
                    log.error("%s dropped a stream batch after %d retries (the backstop schedule will "
                              "deliver it)", fn.role, cursor.trigger.retry_attempts, exc_info=True)
                cursor.retries = 0
                delivered += len(records)
            cursor.iterators.update(advanced)
        return delivered

    def run_schedules(self, now: float | None = None) -> dict[str, int]:
        """Invoke every function whose schedule is due at ``now`` (default: the clock)."""
        from durastate.devstack.lambda_emulator import scheduled_event

        now = self.clock() if now is None else now
        ran: dict[str, int] = {}
        for s in self.resources.schedules:
            key = (s.function, s.rule)
            if now < self._next_run.get(key, now):
                continue
            fn = self.resources.functions[s.function]
            try:
                self.invoke(fn.role, scheduled_event(rule=s.rule, region=self.region))
            except Exception:
                log.exception("scheduled %s run failed (EventBridge retries on the next tick)", fn.role)
            ran[fn.role] = ran.get(fn.role, 0) + 1
            self._next_run[key] = max(self._next_run.get(key, now) + s.seconds, now)
        return ran

    def run_function(self, role: str) -> Any:
        """Run a scheduled function now, whatever its schedule says (e.g. the sweeper after a clock jump)."""
        from durastate.devstack.lambda_emulator import scheduled_event

        return self.invoke(role, scheduled_event(rule=f"manual-{role}", region=self.region))

    def step(self) -> StepReport:
        """One turn: stream triggers, one worker batch, then any schedule that is due."""
        report = StepReport()
        report.stream_records = self.poll_streams()
        if report.stream_records:
            report.relay_runs += 1
        report.timers_forwarded = self.poll_timers()
        batch = self.poll_worker()
        report.worker_received, report.worker_failed = batch.received, batch.failed
        ran = self.run_schedules()
        report.relay_runs += ran.get("relay", 0)
        report.sweeper_runs += ran.get("sweeper", 0)
        return report

    def run_until_idle(self, max_steps: int = 10_000, on_step: Callable[[StepReport], None] | None = None
                       ) -> int:
        """Step until a turn finds nothing to do; returns the number of turns that did work."""
        for busy in range(max_steps):
            report = self.step()
            if on_step is not None:
                on_step(report)
            if report.idle:
                return busy
        raise LocalStackError(f"still busy after {max_steps} steps (an event loop between executions?)")

    def serve(self, stop: threading.Event, idle_wait: float = 0.2,
              on_step: Callable[[StepReport], None] | None = None) -> None:
        """Run the handlers until ``stop`` is set; wait ``idle_wait`` seconds when there is nothing to do."""
        while not stop.is_set():
            report = self.step()
            if on_step is not None:
                on_step(report)
            if report.idle:
                stop.wait(idle_wait)

    def settled(self) -> bool:
        """Nothing left to do now: the event queue is empty (none in flight) and the outbox/spawns drained.

        Armed timers that are not due yet don't count: they are the future, not unfinished work.
        """
        attrs = self.client("sqs").get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        if any(int(v) for v in attrs.values()):
            return False
        ddb = self.client("dynamodb")
        for trig in self.resources.stream_triggers:
            got = ddb.scan(TableName=self.table_names[trig.table], Select="COUNT", Limit=1,
                           ConsistentRead=True)
            if got.get("Count", 0):
                return False
        return True

    # -- inspection --------------------------------------------------------------------------------------
    def dead_letters(self, max_messages: int = 10) -> list[dict[str, Any]]:
        """Peek at the DLQ (messages become visible again after a short timeout)."""
        got = self.client("sqs").receive_message(
            QueueUrl=self.dlq_url, MaxNumberOfMessages=max_messages, MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"], VisibilityTimeout=0)
        return list(got.get("Messages") or [])

