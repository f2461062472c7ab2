"""``DurastateEngine``: the whole serverless durastate engine as one reusable CDK construct.

What it provisions (DESIGN §6): the seven store tables ``{prefix}_{name}``; an SQS FIFO queue (one message
group per execution) with a FIFO dead-letter queue; an EventBridge bus for untargeted emits
(notifications); one Lambda layer with the engine; and four functions — the worker (SQS trigger, partial
batch responses), the relay (the outbox/spawns streams, plus a schedule as the backstop), the timer
sweeper (a schedule) and the timers function (the timers queue's delayed hops; ``timer_hops=False``: none).
Each function gets its own role allowing exactly the calls its code makes (the grant tables below;
tests/devstack/test_iam_local.py holds the template to them), and the operator's policy (what the CLI's AWS
commands need) is a managed policy.

Why ``aws_dynamodb.Table`` and not ``TableV2``: ``TableV2`` compiles to ``AWS::DynamoDB::GlobalTable``,
which LocalStack cannot deploy; the plain table deploys everywhere.

This module imports nothing of durastate outside :mod:`durastate.cdk`: the table layout comes from
:mod:`durastate.cdk.schema` and the layer is built by :mod:`durastate.cdk.layer` as files on disk.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from durastate.cdk.layer import build_layer, default_build_root
from durastate.cdk.schema import TABLES, TTL_ATTRIBUTE, TableSpec, table_name

FUNCTIONS_DIR = Path(__file__).resolve().parents[1] / "functions"

#: Lambda handler module and function of each of the four functions (``durastate/functions/<module>.py``).
HANDLERS: dict[str, str] = {
    "worker": "worker.handler",
    "relay": "relay.handler",
    "sweeper": "sweeper.handler",
    "timers": "timers.handler",
}
#: Where the definitions folder lands inside each function's code (the Lambda task root is /var/task).
DEFINITIONS_MOUNT = "definitions"
DEFINITION_SUFFIXES = (".yaml", ".yml", ".json")

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER,
          "B": dynamodb.AttributeType.BINARY}

# Table actions per code path, as the DynamoDB store issues them. Transactions are authorised per item
# (a transactional Put needs PutItem), so there is no separate TransactWriteItems permission. Each action
# here is one a test sees a function make (tests/devstack/test_iam_local.py: with any one removed, a
# request the local stack's functions make is denied).
#: Creating an execution (its first commit: a start, an invoked child, a region child): the item,
#: conditional on its absence (read back after a lost race); what its initial states emit (outbox, with
#: seqs from the counters), spawn (region children) and arm (timers); the trace step (the ring's last
#: index is read first).
_CREATE: dict[str, tuple[str, ...]] = {
    "executions": ("GetItem", "PutItem"),
    "outbox": ("PutItem",),
    "spawns": ("PutItem",),
    "timers": ("PutItem",),
    "counters": ("UpdateItem",),
    "trace": ("Query", "PutItem"),
}
#: Applying an event to an existing execution: the dedupe read and the commit. The execution item holds
#: the recent event ids and a filter of the older ones, spilled to ``processed`` in chunks (a Put; read by
#: Query when the filter cannot rule an id out). An item written before filters keeps single marks there
#: (read with the execution in one BatchGetItem, or by GetItem; written by BatchWriteItem). A commit also
#: disarms timers and drops the trace ring's oldest step.
_APPLY: dict[str, tuple[str, ...]] = {
    "executions": ("BatchGetItem",),
    "processed": ("GetItem", "BatchGetItem", "Query", "PutItem", "BatchWriteItem"),
    "timers": ("DeleteItem",),
    "trace": ("DeleteItem",),
}
_RELAY_DRAIN: dict[str, tuple[str, ...]] = {
    # Pending entries are read oldest first by Query, one per shard. A pass that is not told which shards
    # a stream batch touched (the scheduled backstop) first asks whether the table holds anything at all:
    # one Scan of at most one item (Select=COUNT) — one request where a Query per shard would be four, and
    # no data the Query on every shard does not already read.
    "outbox": ("Query", "DeleteItem", "Scan"),
    "spawns": ("Query", "DeleteItem", "Scan"),
}
#: The sweep: "is any timer armed?" (one Scan of at most one item, Select=COUNT: an idle deployment's sweep
#: is that one request; the items hold only the keys the ``due`` index projects), then the due ones by
#: Query of the ``due`` index (``INDEX_GRANTS``), each deleted once fired.
_SWEEP: dict[str, tuple[str, ...]] = {"timers": ("DeleteItem", "Scan")}
#: Retention (the sweeper, when the construct's ``retention`` is set): read each ended execution found in the
#: ``ended`` index, put its tombstone (conditional on its version), delete its trace steps.
RETENTION_GRANTS: dict[str, tuple[str, ...]] = {
    "executions": ("GetItem", "PutItem"),
    "trace": ("Query", "BatchWriteItem"),
}
RETENTION_INDEX_GRANTS: dict[tuple[str, str], tuple[str, ...]] = {("executions", "ended"): ("Query",)}
#: Schedules (the sweeper, when the definitions folder holds a ``schedules:`` file or the construct's
#: ``schedules`` is set): read and commit each schedule's record — a conditional put, the start of its
#: execution through the outbox (with a seq from the counters), its next timer — and list the records.
SCHEDULE_GRANTS: dict[str, tuple[str, ...]] = {
    "executions": ("GetItem", "BatchGetItem", "PutItem"),
    "outbox": ("PutItem",),
    "counters": ("UpdateItem",),
    "timers": ("PutItem", "DeleteItem"),
}
SCHEDULE_INDEX_GRANTS: dict[tuple[str, str], tuple[str, ...]] = {("executions", "by_status"): ("Query",)}


#: Why each table other than ``executions`` (the state of record, with PITR) does without PITR.
_NO_PITR_REASONS: dict[str, str] = {
    "outbox": "A work queue: items live from their commit until the relay delivers them (seconds); a "
              "restored copy would only redeliver events the receivers already deduplicate.",
    "spawns": "A work queue of fork intents, deleted once the relay created the region child (seconds).",
    "timers": "Every armed timer is mirrored in its execution's `timers` field in the executions table, "
              "which has PITR, so timers can be re-derived after a restore.",
    "processed": "Dedupe marks that only need to outlive SQS's redelivery window; they expire by TTL.",
    "counters": "Only the seq allocator's high-water mark; seqs must be monotonic, not gapless, so a lost "
                "counter is reseeded above the highest pending outbox/spawn seq.",
    "trace": "The opt-in debugging timeline (a ring that expires by TTL), not state of record.",
}


def _merge(*grants: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for grant in grants:
        for table, actions in grant.items():
            out.setdefault(table, [])
            out[table] += [a for a in actions if a not in out[table]]
    return {t: tuple(a) for t, a in out.items()}


#: What each function may do to which table — the single source for the grants (and the tests).
TABLE_GRANTS: dict[str, dict[str, tuple[str, ...]]] = {
    "worker": _merge(_CREATE, _APPLY),
    # The relay creates region children (never applies an event) and drains the outbox and the spawns.
    "relay": _merge(_CREATE, _RELAY_DRAIN),
    "sweeper": _merge(_SWEEP),
    # The timers function applies due timeouts as the worker applies events.
    "timers": _merge(_CREATE, _APPLY),
}
#: Index reads, granted on that one index's ARN (not ``table/index/*``).
INDEX_GRANTS: dict[str, dict[tuple[str, str], tuple[str, ...]]] = {
    "worker": {},
    "relay": {},
    "sweeper": {("timers", "due"): ("Query",)},
    "timers": {},
}
#: SQS actions each function's own code calls, per queue: ``events`` (the FIFO event queue), ``dlq`` (its
#: dead-letter queue) and ``timers`` (the timer hops; only with ``timer_hops``). Batches are authorised as
#: their single-message action (``SendMessageBatch`` needs ``sqs:SendMessage``). The event source mappings'
#: receive/delete grants are added by CDK with the triggers.
QUEUE_GRANTS: dict[str, dict[str, tuple[str, ...]]] = {
    # Poison messages go to the DLQ, with their reason; a commit that arms a timer due soon sends its hop.
    "worker": {"dlq": ("SendMessage",), "timers": ("SendMessage",)},
    # Emits and task answers go to the event queue; a region child's commit may arm a timer due soon.
    "relay": {"events": ("SendMessage",), "timers": ("SendMessage",)},
    # Fired timers (and started schedules) go to the event queue; timers coming within range, as hops.
    "sweeper": {"events": ("SendMessage",), "timers": ("SendMessage",)},
    # A hop that came early goes back to the timers queue; what can never apply, to the DLQ.
    "timers": {"dlq": ("SendMessage",), "timers": ("SendMessage",)},
}
#: EventBridge: the relay publishes the untargeted emits (notifications) on the stack's bus.
BUS_GRANTS: dict[str, tuple[str, ...]] = {"relay": ("PutEvents",)}
#: S3 actions on the context bucket's objects (``large_contexts``), per function, as the DynamoDB store's claim
#: check calls them (:mod:`durastate.store.dynamodb.claim_check`): a load reads the object an item names
#: (GetObject), a commit over the threshold puts its object first (PutObject) and then deletes the one the
#: previous version named (DeleteObject). The relay only creates executions (nothing to delete); the sweeper
#: commits schedule records (with ``schedules``) and, purging (``retention``), reads each execution, lists
#: its prefix and deletes its objects (DeleteObjects is authorised per object as DeleteObject).
CONTEXT_GRANTS: dict[str, tuple[str, ...]] = {
    "worker": ("GetObject", "PutObject", "DeleteObject"),
    "timers": ("GetObject", "PutObject", "DeleteObject"),
    "relay": ("GetObject", "PutObject"),
}
CONTEXT_SCHEDULE_GRANTS: tuple[str, ...] = ("GetObject", "PutObject", "DeleteObject")
CONTEXT_RETENTION_GRANTS: tuple[str, ...] = ("GetObject", "DeleteObject")
#: Purging lists the execution's prefix: ListBucket, on the bucket (limited to that prefix's folder).
CONTEXT_RETENTION_BUCKET_GRANTS: tuple[str, ...] = ("ListBucket",)
CONTEXTS_PREFIX = "contexts/"
OPERATOR_CONTEXT_GRANTS: tuple[str, ...] = ("GetObject", "PutObject", "DeleteObject")
#: The queues' names, from the table prefix.
QUEUE_NAMES: dict[str, str] = {"events": "{prefix}-events.fifo", "dlq": "{prefix}-events-dlq.fifo",
                               "timers": "{prefix}-timers"}

#: The operator's grants: what the CLI's AWS commands call (``--store dynamodb://<prefix>``, ``--queue-url``,
#: ``--dlq-url``), the same way as the functions' grants (each is needed by a command the test drives).
#: ``show``/``list``: the execution, a page of the ``by_status`` index with its summaries, the pending
#: outbox entries; ``terminate``/``redrive``/``migrate``: a commit (redrive queues the failed event through
#: the outbox, migrate renames armed timers); ``purge``: the ``ended`` index, the tombstone, the trace
#: steps; ``cancel``/``suspend``/``resume``: an event on the queue; ``dead-letters``: the DLQ, and the
#: queue whose redrive policy names it for ``replay``. No ``CreateTable``: the store takes a denied
#: ``CreateTable`` to mean the tables are the stack's, and goes on.
OPERATOR_TABLE_GRANTS: dict[str, tuple[str, ...]] = {
    "executions": ("GetItem", "BatchGetItem", "PutItem"),
    "outbox": ("Scan", "Query", "PutItem"),
    "timers": ("PutItem", "DeleteItem"),
    "counters": ("UpdateItem",),
    "trace": ("Query", "PutItem", "DeleteItem", "BatchWriteItem"),
}
OPERATOR_INDEX_GRANTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("executions", "by_status"): ("Query",),
    ("executions", "ended"): ("Query",),
    ("executions", "by_search"): ("Query",),  # ``list --where``
}
OPERATOR_QUEUE_GRANTS: dict[str, tuple[str, ...]] = {
    "events": ("SendMessage",),
    "dlq": ("ReceiveMessage", "ChangeMessageVisibility", "DeleteMessage", "ListDeadLetterSourceQueues"),
}


def operator_statements(table_arn: Callable[[str], str], queue_arn: Callable[[str], str]) -> list[dict[str, Any]]:
    """The operator policy's statements (``Effect``/``Action``/``Resource``), one per resource, with the
    ARNs from ``table_arn(name)`` and ``queue_arn(name)`` (tokens in the construct, strings in the docs)."""
    out: list[dict[str, Any]] = []
    for table, actions in OPERATOR_TABLE_GRANTS.items():
        out.append({"Effect": "Allow", "Action": [f"dynamodb:{a}" for a in actions], "Resource": table_arn(table)})
    for (table, index), actions in OPERATOR_INDEX_GRANTS.items():
        out.append({"Effect": "Allow", "Action": [f"dynamodb:{a}" for a in actions],
                    "Resource": f"{table_arn(table)}/index/{index}"})
    for queue, actions in OPERATOR_QUEUE_GRANTS.items():
        out.append({"Effect": "Allow", "Action": [f"sqs:{a}" for a in actions], "Resource": queue_arn(queue)})
    return out


def operator_policy(prefix: str = "durastate", region: str = "REGION", account: str = "ACCOUNT") -> dict[str, Any]:
    """The operator policy as IAM JSON for a deployment's table prefix, region and account (what
    docs/aws-deploy.md prints; the construct creates the same as its ``operator_policy``)."""
    return {"Version": "2012-10-17", "Statement": operator_statements(
        lambda t: f"arn:aws:dynamodb:{region}:{account}:table/{table_name(prefix, t)}",
        lambda q: f"arn:aws:sqs:{region}:{account}:{QUEUE_NAMES[q].format(prefix=prefix)}")}


#: The worker's SQS event source: at most this many concurrent worker invocations (the event source's
#: maximum concurrency), so a burst of events cannot take the account's whole Lambda concurrency (1000 by
#: default) from its other functions. A message group (an execution) is handled by one invocation at a time
#: anyway, so this bounds parallelism across executions only.
DEFAULT_WORKER_MAX_CONCURRENCY = 10
#: The event queue's redrive policy: SQS's maximum receive count (see ``max_receive_count``).
DEFAULT_MAX_RECEIVE_COUNT = 1000


def _digest(paths: Iterable[tuple[str, Path]]) -> str:
    h = hashlib.sha256()
    for rel, path in paths:
        h.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:20]


def definition_files(folder: Path) -> list[tuple[str, Path]]:
    """Every file of the definitions folder (definitions and any helper modules), in a stable order."""
    files = [
        (f"{DEFINITIONS_MOUNT}/{p.relative_to(folder).as_posix()}", p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    ]
    if not any(p.suffix in DEFINITION_SUFFIXES for _, p in files):
        raise ValueError(f"definitions folder {folder} holds no *.yaml, *.yml or *.json statechart; "
                         "pass definitions_dir= pointing at your definitions")
    return files


def stage_function_code(name: str, functions_dir: Path, definitions_dir: Path, build_root: Path,
                        layer_dir: Path | None = None) -> Path:
    """Lay out one function's code: its handler, the shared ``_*.py`` helpers, and the definitions.

    The engine itself comes from the layer, so this stays a few kilobytes and deploys in seconds. With
    ``layer_dir`` (a built layer: the folder holding ``python/``, named by its content hash, as
    :func:`durastate.cdk.layer.build_layer` returns it) the layer's contents are bundled in as well, at the
    code's root — for LocalStack community, whose Lambda gives a function its own code and no layers.
    The folder name is a content hash, so an unchanged function is an unchanged asset.
    """
    module = HANDLERS[name].split(".", 1)[0]
    handler = functions_dir / f"{module}.py"
    if not handler.is_file():
        raise FileNotFoundError(f"no Lambda handler at {handler}")
    files = [(handler.name, handler)]
    files += [(p.name, p) for p in sorted(functions_dir.glob("_*.py")) if p.name != "__init__.py"]
    files += definition_files(definitions_dir)
    digest = _digest(files)
    if layer_dir is not None:
        digest = hashlib.sha256(f"{digest}+{layer_dir.name}".encode()).hexdigest()[:20]
    out = build_root / "functions" / f"{name}-{digest}"
    if not (out / ".complete").is_file():
        staging = out.with_name(out.name + ".staging")
        shutil.rmtree(staging, ignore_errors=True)
        if layer_dir is not None:
            shutil.copytree(layer_dir / "python", staging)
        for rel, src in files:
            dest = staging / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
        (out / ".complete").write_text("")
    return out


def _suppress(construct: Construct, *rules: tuple[str, str]) -> None:
    """cdk-nag acknowledgments, each with its reason (a wildcard finding is named ``Rule[Finding]``)."""
    acks = [cdk.Acknowledgment(id=rule, reason=reason) for rule, reason in rules]
    cdk.Validations.of(construct).acknowledge(*acks)


def has_schedules_file(folder: Path) -> bool:
    """Whether the definitions folder holds a ``schedules:`` file (a top-level ``schedules`` key), which the
    sweeper stores and fires: then it gets the grants for schedule records."""
    for path in sorted(folder.iterdir()):
        if path.suffix not in DEFINITION_SUFFIXES or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if re.search(r'(?m)^(schedules\s*:|\{\s*"schedules"\s*:)', text):
            return True
    return False


class DurastateEngine(Construct):
    """The durastate engine on AWS: tables, queues, notification bus, layer, four functions, schedules, alarm.

    Props:
      table_prefix: tables are named ``{table_prefix}_{name}``; also names the queues and the bus.
      definitions_dir: the folder of statechart definitions packaged with every function.
      removal_policy: for the tables (default RETAIN: executions are the state of record).
      sweeper_rate: how often due timers are fired (the timers' resolution; EventBridge's minimum is 1 min).
      relay_backstop_rate: how often the relay drains anything its stream trigger missed.
      memory_size / architecture / worker_timeout: the functions' sizing (ARM_64 is cheaper per ms).
      max_receive_count: deliveries of a message before SQS moves it to the dead-letter queue (default 1000,
        SQS's maximum): only the backstop for a record the worker never reports on (the function crashing or
        timing out on it). The worker dead-letters what can never apply itself, with its reason, and backs a
        transient failure off (up to 15 minutes a receive), so such a failure outlasts the queue's
        retention long before it could reach this count.
      alarm_topic: the SNS topic the dead-letter alarm notifies (default: one is created, ``alarm_topic``
        attribute; subscribe to it). ``alarm_actions``: further actions for that alarm.
      timer_hops: timers due within 15 minutes wait in a standard SQS queue (a message delay) and a fourth
        function applies them when due, so they fire within about a second (default on); off, the sweeper
        alone fires them, up to ``sweeper_rate`` late.
      worker_max_concurrency: the most concurrent worker invocations its SQS event source starts (default
        10; 2..1000, ``None``: unbounded) — a burst cannot exhaust the account's Lambda concurrency.
      worker_reserved_concurrency: reserve this much of the account's concurrency for the worker (default
        ``None``: none reserved; reserving also caps it).
      layer_code: a prebuilt layer (skips the local layer build), e.g. ``lambda_.Code.from_asset(dir)`` of a
        folder holding ``python/`` (what ``python -m durastate.cdk.layer`` prints).
      build_root: where the layer and the functions' code are built and cached (default
        :func:`durastate.cdk.layer.default_build_root`: ``DURASTATE_CDK_BUILD_DIR``, a checkout's
        ``layers/build``, else ``~/.cache/durastate/cdk``).
      bundle_layer: no layer: the engine layer's contents go into each function's code instead (default
        off). For LocalStack community, whose Lambda runs a function's own code and ignores its layers.
      trace: record a trace step per commit (off by default: it makes state-only commits transactions).
      history: keep every trace step of an execution (``durastate history``, the replay check), not a ring
        of the newest 200; the steps still expire with ``trace_ttl`` (off by default).
      processed_ttl / trace_ttl: how long dedupe marks (default 14 days, longer than the queue's
        retention) and trace steps (default 7 days) live before DynamoDB's TTL may delete them.
      retention: purge executions that ended longer ago than this (off by default): each sweeper run also
        turns up to ``retention_batches`` batches of 500 of them into tombstones, which keep recognising
        their events for ``tombstone_ttl`` (default 14 days) before the executions table's TTL deletes them.
      schedules: ``{name: {definition, cron | rate, timezone, context, catch_up, overlap, grace, start_at,
        end_at, jitter}}``, as in a ``schedules:`` file of the definitions folder (either or both; a name in
        both is an error). The existing sweeper stores and fires them: no new resource, only its grants on
        the records.
      task_functions: the Lambda functions that definitions invoke as tasks (``invoke: {task: {lambda:
        ...}}``), as functions of the app or by name or ARN: the relay, which runs tasks, may invoke these
        and no others (``lambda:InvokeFunction`` on exactly their ARNs).
      large_contexts: add the context bucket (``context_bucket``; off by default): executions whose JSON is
        over ``claim_check_bytes`` (default 200000) are kept there instead of being refused at DynamoDB's
        400 KB item limit. Encrypted (SSE-S3), all public access blocked, SSL only, owner-enforced, with the
        tables' removal policy and a lifecycle rule aborting incomplete uploads; each function (and the
        operator policy) gets exactly the object actions its code calls (``CONTEXT_GRANTS``).
    """

    def _contexts_wildcard(self) -> tuple[str, str]:
        """The acknowledgment of the grants on ``contexts/*``: object keys are content hashes."""
        assert self.context_bucket is not None
        cfn = self.context_bucket.node.default_child
        assert isinstance(cfn, cdk.CfnElement)
        logical_id = cdk.Stack.of(self).get_logical_id(cfn)
        return (f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/{CONTEXTS_PREFIX}*]",
                "The object keys are SHA-256 hashes of execution contexts (contexts/<execution>/<hash>), known "
                "only when written: the grant is on the contexts/ prefix of this one bucket.")

    def _function_arn(self, fn: lambda_.IFunction | str) -> str:
        """The ARN of a task function given as a function, an ARN, or a name in this stack's account."""
        if not isinstance(fn, str):
            return fn.function_arn
        if fn.startswith("arn:"):
            return fn
        return cdk.Stack.of(self).format_arn(service="lambda", resource="function", resource_name=fn,
                                             arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table_prefix: str = "durastate",
        definitions_dir: str | Path,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        sweeper_rate: cdk.Duration | None = None,
        relay_backstop_rate: cdk.Duration | None = None,
        memory_size: int = 512,
        architecture: lambda_.Architecture = lambda_.Architecture.ARM_64,
        worker_timeout: cdk.Duration | None = None,
        max_receive_count: int = DEFAULT_MAX_RECEIVE_COUNT,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        alarm_actions: Sequence[cloudwatch.IAlarmAction] = (),
        alarm_topic: sns.ITopic | None = None,
        timer_hops: bool = True,
        worker_max_concurrency: int | None = DEFAULT_WORKER_MAX_CONCURRENCY,
        worker_reserved_concurrency: int | None = None,
        layer_code: lambda_.Code | None = None,
        functions_dir: str | Path = FUNCTIONS_DIR,
        trace: bool = False,
        history: bool = False,
        processed_ttl: cdk.Duration | None = None,
        trace_ttl: cdk.Duration | None = None,
        retention: cdk.Duration | None = None,
        tombstone_ttl: cdk.Duration | None = None,
        retention_batches: int = 4,
        schedules: Mapping[str, Mapping[str, Any]] | None = None,
        task_functions: Sequence[lambda_.IFunction | str] = (),
        build_root: str | Path | None = None,
        bundle_layer: bool = False,
        large_contexts: bool = False,
        claim_check_bytes: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table_prefix = table_prefix
        sweeper_rate = sweeper_rate or cdk.Duration.minutes(1)
        relay_backstop_rate = relay_backstop_rate or cdk.Duration.minutes(5)
        worker_timeout = worker_timeout or cdk.Duration.seconds(30)
        build = Path(build_root) if build_root is not None else default_build_root()
        runtime = lambda_.Runtime.PYTHON_3_12

        # ---- tables -------------------------------------------------------------------------------------
        self.tables: dict[str, dynamodb.Table] = {
            name: self._table(name, spec, removal_policy) for name, spec in TABLES.items()
        }

        # ---- queues -------------------------------------------------------------------------------------
        self.dead_letter_queue = sqs.Queue(
            self, "DeadLetterQueue",
            queue_name=QUEUE_NAMES["dlq"].format(prefix=table_prefix),
            fifo=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        _suppress(self.dead_letter_queue,
                  ("AwsSolutions-SQS3", "This is the dead-letter queue of the event queue; a DLQ of a DLQ "
                                        "would only hide poison messages further."))
        self.queue = sqs.Queue(
            self, "EventQueue",
            queue_name=QUEUE_NAMES["events"].format(prefix=table_prefix),
            fifo=True,
            # High-throughput FIFO: dedupe and throughput are per message group (= per execution).
            deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP,
            fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            # AWS's guidance for an SQS event source: at least six times the function's timeout.
            visibility_timeout=cdk.Duration.seconds(worker_timeout.to_seconds() * 6),
            retention_period=cdk.Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue,
                                                  max_receive_count=max_receive_count),
        )

        # Timers due within 15 minutes wait here (a per-message delay: FIFO queues have none) until the
        # timers function forwards them to the event queue; a standard queue, since order does not matter.
        self.timers_queue: sqs.Queue | None = None
        if timer_hops:
            self.timers_queue = sqs.Queue(
                self, "TimersQueue",
                queue_name=QUEUE_NAMES["timers"].format(prefix=table_prefix),
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                visibility_timeout=cdk.Duration.seconds(180),  # six times the timers function's timeout
                retention_period=cdk.Duration.days(1),
            )
            _suppress(self.timers_queue,
                      ("AwsSolutions-SQS3", "A hop that cannot be forwarded needs no DLQ: its timer is still in "
                                            "the timers table and the sweeper fires it once overdue."))

        # ---- notifications ------------------------------------------------------------------------------
        self.event_bus = events.EventBus(self, "NotificationBus",
                                         event_bus_name=f"{table_prefix}-notifications")

        # ---- layer + functions --------------------------------------------------------------------------
        arch_name = architecture.name  # "arm64" | "x86_64"
        layer_dir: Path | None = None
        if layer_code is None:

            layer_dir = build_layer(architecture=arch_name, python_version="3.12", build_root=build)
            layer_code = lambda_.Code.from_asset(
                str(layer_dir), asset_hash=layer_dir.name, asset_hash_type=cdk.AssetHashType.CUSTOM,
                exclude=[".complete"],
            )
        elif bundle_layer:
            raise ValueError("bundle_layer bundles the layer this construct builds, not a given layer_code: "
                             "leave layer_code unset")
        # LocalStack community runs no layers: bundle_layer puts the layer's contents into each function.
        self.layer: lambda_.LayerVersion | None = None
        if not bundle_layer:
            self.layer = lambda_.LayerVersion(
                self, "EngineLayer",
                code=layer_code,
                compatible_runtimes=[runtime],
                compatible_architectures=[architecture],
                description="durastate engine, stores and runtime with pydantic, PyYAML and Powertools",
            )

        environment = {
            "DURASTATE_TABLE_PREFIX": table_prefix,
            "DURASTATE_QUEUE_URL": self.queue.queue_url,
            "DURASTATE_DLQ_URL": self.dead_letter_queue.queue_url,
            "DURASTATE_EVENT_BUS_NAME": self.event_bus.event_bus_name,
            "DURASTATE_DEFINITIONS_DIR": f"/var/task/{DEFINITIONS_MOUNT}",
            # Tracing is opt-in (it makes every state-only commit a transaction); the TTLs let DynamoDB
            # expire dedupe marks (after the queue could still redeliver) and trace steps.
            "DURASTATE_TRACE": "1" if trace else "0",
            "DURASTATE_PROCESSED_TTL_SECONDS": str(int((processed_ttl or cdk.Duration.days(14)).to_seconds())),
            "DURASTATE_TRACE_TTL_SECONDS": str(int((trace_ttl or cdk.Duration.days(7)).to_seconds())),
            "POWERTOOLS_METRICS_NAMESPACE": "durastate",
            "POWERTOOLS_LOG_LEVEL": "INFO",
        }
        if history:  # only when asked: a template without it is the one every earlier deploy had
            environment["DURASTATE_HISTORY"] = "1"
        if self.timers_queue is not None:
            environment["DURASTATE_TIMERS_QUEUE_URL"] = self.timers_queue.queue_url
        # Executions past the item limit: an encrypted, private, SSL-only bucket (the claim check).
        self.context_bucket: s3.Bucket | None = None
        if large_contexts:
            self.context_bucket = s3.Bucket(
                self, "ContextBucket",
                encryption=s3.BucketEncryption.S3_MANAGED,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                enforce_ssl=True,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                removal_policy=removal_policy,
                # Objects no commit names are deleted by the store itself (the superseded one after each
                # commit, an execution's whole prefix on purge); S3 only has to drop abandoned uploads.
                lifecycle_rules=[s3.LifecycleRule(id="incomplete-uploads",
                                                  abort_incomplete_multipart_upload_after=cdk.Duration.days(1))],
            )
            _suppress(self.context_bucket,
                      ("AwsSolutions-S1", "The bucket holds only execution contexts written and read by the "
                                          "engine's own functions; their access is in CloudTrail and the "
                                          "executions table's history, and access logs would double the writes."))
            environment["DURASTATE_CONTEXT_BUCKET"] = self.context_bucket.bucket_name
            if claim_check_bytes is not None:
                environment["DURASTATE_CLAIM_CHECK_BYTES"] = str(claim_check_bytes)
        if retention is not None:
            environment.update({
                "DURASTATE_RETENTION_SECONDS": str(int(retention.to_seconds())),
                "DURASTATE_TOMBSTONE_TTL_SECONDS": str(int((tombstone_ttl or cdk.Duration.days(14)).to_seconds())),
                "DURASTATE_RETENTION_BATCHES": str(retention_batches),
            })
        definitions = Path(definitions_dir).resolve()
        self.functions: dict[str, lambda_.Function] = {}
        roles = [("worker", worker_timeout), ("relay", cdk.Duration.seconds(60)),
                 ("sweeper", cdk.Duration.seconds(60))]
        if self.timers_queue is not None:
            roles.append(("timers", cdk.Duration.seconds(30)))
        for name, timeout in roles:
            code_dir = stage_function_code(name, Path(functions_dir), definitions, build,
                                           layer_dir if bundle_layer else None)
            self.functions[name] = self._function(
                name, code_dir, runtime, architecture, memory_size, timeout, log_retention,
                {**environment, "POWERTOOLS_SERVICE_NAME": f"durastate-{name}"},
            )
        self.worker = self.functions["worker"]
        self.relay = self.functions["relay"]
        self.sweeper = self.functions["sweeper"]
        self.timers: lambda_.Function | None = self.functions.get("timers")
        if worker_reserved_concurrency is not None:
            worker_cfn = self.worker.node.default_child
            assert isinstance(worker_cfn, lambda_.CfnFunction)
            worker_cfn.reserved_concurrent_executions = worker_reserved_concurrency

        # ---- least-privilege grants ----------------------------------------------------------------------
        # Explicit statements: Table.grant() would add `table/index/*` to every grant of an indexed table.
        for fn_name, grants in TABLE_GRANTS.items():
            if fn_name not in self.functions:
                continue
            for table, actions in grants.items():
                self.functions[fn_name].add_to_role_policy(iam.PolicyStatement(
                    actions=[f"dynamodb:{a}" for a in actions], resources=[self.tables[table].table_arn]))
            for (table, index), actions in INDEX_GRANTS[fn_name].items():
                self.functions[fn_name].add_to_role_policy(iam.PolicyStatement(
                    actions=[f"dynamodb:{a}" for a in actions],
                    resources=[f"{self.tables[table].table_arn}/index/{index}"]))
        if retention is not None:
            for table, actions in RETENTION_GRANTS.items():
                self.sweeper.add_to_role_policy(iam.PolicyStatement(
                    actions=[f"dynamodb:{a}" for a in actions], resources=[self.tables[table].table_arn]))
            for (table, index), actions in RETENTION_INDEX_GRANTS.items():
                self.sweeper.add_to_role_policy(iam.PolicyStatement(
                    actions=[f"dynamodb:{a}" for a in actions],
                    resources=[f"{self.tables[table].table_arn}/index/{index}"]))
        if schedules:
            self.sweeper.add_environment("DURASTATE_SCHEDULES",
                                         json.dumps({"schedules": {k: dict(v) for k, v in schedules.items()}},
                                                    sort_keys=True))
        if schedules or has_schedules_file(definitions):
            for table, actions in SCHEDULE_GRANTS.items():
                self.sweeper.add_to_role_policy(iam.PolicyStatement(
                    actions=[f"dynamodb:{a}" for a in actions], resources=[self.tables[table].table_arn]))
            for (table, index), actions in SCHEDULE_INDEX_GRANTS.items():
                self.sweeper.add_to_role_policy(iam.PolicyStatement(
                    actions=[f"dynamodb:{a}" for a in actions],
                    resources=[f"{self.tables[table].table_arn}/index/{index}"]))
        if self.context_bucket is not None:
            objects = self.context_bucket.arn_for_objects(f"{CONTEXTS_PREFIX}*")
            for fn_name, s3_actions in CONTEXT_GRANTS.items():
                if fn_name in self.functions:
                    self.functions[fn_name].add_to_role_policy(iam.PolicyStatement(
                        actions=[f"s3:{a}" for a in s3_actions], resources=[objects]))
            sweeper_actions: list[str] = []
            if schedules or has_schedules_file(definitions):
                sweeper_actions += CONTEXT_SCHEDULE_GRANTS
            if retention is not None:
                sweeper_actions += [a for a in CONTEXT_RETENTION_GRANTS if a not in sweeper_actions]
                self.sweeper.add_to_role_policy(iam.PolicyStatement(
                    actions=[f"s3:{a}" for a in CONTEXT_RETENTION_BUCKET_GRANTS],
                    resources=[self.context_bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{CONTEXTS_PREFIX}*"]}}))
            if sweeper_actions:
                self.sweeper.add_to_role_policy(iam.PolicyStatement(
                    actions=[f"s3:{a}" for a in sweeper_actions], resources=[objects]))
            for fn in self.functions.values():
                if isinstance(fn.role, Construct):
                    _suppress(fn.role, self._contexts_wildcard())
        queues = {"events": self.queue, "dlq": self.dead_letter_queue, "timers": self.timers_queue}
        for fn_name, queue_grants in QUEUE_GRANTS.items():
            for queue_name, actions in queue_grants.items():
                queue = queues[queue_name]
                if fn_name in self.functions and queue is not None:
                    self.functions[fn_name].add_to_role_policy(iam.PolicyStatement(
                        actions=[f"sqs:{a}" for a in actions], resources=[queue.queue_arn]))
        for fn_name, actions in BUS_GRANTS.items():
            self.functions[fn_name].add_to_role_policy(iam.PolicyStatement(
                actions=[f"events:{a}" for a in actions], resources=[self.event_bus.event_bus_arn]))
        if task_functions:
            # Tasks (invoke: {task: {lambda: ...}}) are run by the relay, after their commit.
            self.relay.add_to_role_policy(iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[self._function_arn(fn) for fn in task_functions]))

        # The operator's policy (the CLI's AWS commands), to attach to the people or roles that run them.
        self.operator_policy = iam.ManagedPolicy(
            self, "OperatorPolicy",
            description=f"durastate {table_prefix}: what the durastate CLI's AWS commands need",
            document=iam.PolicyDocument.from_json({"Version": "2012-10-17", "Statement": operator_statements(
                lambda t: self.tables[t].table_arn,
                lambda q: {"events": self.queue, "dlq": self.dead_letter_queue}[q].queue_arn)}))
        if self.context_bucket is not None:  # show/terminate/redrive/migrate read and commit; purge lists
            self.operator_policy.add_statements(
                iam.PolicyStatement(actions=[f"s3:{a}" for a in OPERATOR_CONTEXT_GRANTS],
                                    resources=[self.context_bucket.arn_for_objects(f"{CONTEXTS_PREFIX}*")]),
                iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.context_bucket.bucket_arn],
                                    conditions={"StringLike": {"s3:prefix": [f"{CONTEXTS_PREFIX}*"]}}))
            _suppress(self.operator_policy, self._contexts_wildcard())

        # ---- triggers -----------------------------------------------------------------------------------
        self.worker.add_event_source(sources.SqsEventSource(
            self.queue, batch_size=10, report_batch_item_failures=True,
            max_concurrency=worker_max_concurrency,
        ))
        if self.timers_queue is not None and self.timers is not None:
            # No batching window: a timeout is applied as soon as its delay ends.
            self.timers.add_event_source(sources.SqsEventSource(self.timers_queue, batch_size=10,
                                                                report_batch_item_failures=True))
        for table in ("outbox", "spawns"):
            self.relay.add_event_source(sources.DynamoEventSource(
                self.tables[table],
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=100,
                retry_attempts=2,  # the scheduled backstop drains whatever a failed batch left behind
                filters=[lambda_.FilterCriteria.filter({"eventName": lambda_.FilterRule.is_equal("INSERT")})],
            ))
        self.relay_schedule = events.Rule(
            self, "RelayBackstop", schedule=events.Schedule.rate(relay_backstop_rate),
            description="Drains the outbox and spawn intents the stream trigger did not deliver",
            targets=[targets.LambdaFunction(self.relay, retry_attempts=2)],
        )
        self.sweeper_schedule = events.Rule(
            self, "SweeperSchedule", schedule=events.Schedule.rate(sweeper_rate),
            description="Fires due durastate timers",
            targets=[targets.LambdaFunction(self.sweeper, retry_attempts=2)],
        )

        # ---- alarm --------------------------------------------------------------------------------------
        self.dead_letter_alarm = cloudwatch.Alarm(
            self, "DeadLetterAlarm",
            alarm_description="durastate: messages in the dead-letter queue (malformed, unknown execution or "
                              "definition, or retried past maxReceiveCount)",
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(1), statistic="Maximum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if alarm_topic is None:
            topic = sns.Topic(self, "AlarmTopic", topic_name=f"{table_prefix}-alarms",
                              display_name="durastate alarms", enforce_ssl=True)
            _suppress(topic, ("AwsSolutions-SNS2", "CloudWatch alarms cannot publish to a topic encrypted with "
                                                   "the AWS managed SNS key; alarm messages hold no data."))
            alarm_topic = topic
        self.alarm_topic: sns.ITopic = alarm_topic
        self.dead_letter_alarm.add_alarm_action(cloudwatch_actions.SnsAction(alarm_topic))
        for action in alarm_actions:
            self.dead_letter_alarm.add_alarm_action(action)

    # ------------------------------------------------------------------------------------------------------
    def _table(self, name: str, spec: TableSpec, removal_policy: cdk.RemovalPolicy) -> dynamodb.Table:
        table = dynamodb.Table(
            self, f"{name.capitalize()}Table",
            table_name=table_name(self.table_prefix, name),
            partition_key=dynamodb.Attribute(name=spec.partition[0], type=_TYPES[spec.partition[1]]),
            sort_key=(dynamodb.Attribute(name=spec.sort[0], type=_TYPES[spec.sort[1]])
                      if spec.sort else None),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True) if spec.point_in_time_recovery else None,
            time_to_live_attribute=TTL_ATTRIBUTE if spec.ttl else None,
            stream=dynamodb.StreamViewType.NEW_IMAGE if spec.stream else None,
            removal_policy=removal_policy,
        )
        for index in spec.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=dynamodb.Attribute(name=index.partition[0], type=_TYPES[index.partition[1]]),
                sort_key=(dynamodb.Attribute(name=index.sort[0], type=_TYPES[index.sort[1]])
                          if index.sort else None),
                projection_type=dynamodb.ProjectionType[index.projection],
                non_key_attributes=list(index.non_key_attributes) or None,
            )
        if not spec.point_in_time_recovery:
            _suppress(table, ("AwsSolutions-DDB3", _NO_PITR_REASONS[name]))
        return table

    def _function(self, name: str, code_dir: Path, runtime: lambda_.Runtime,
                  architecture: lambda_.Architecture, memory_size: int, timeout: cdk.Duration,
                  retention: logs.RetentionDays, environment: dict[str, str]) -> lambda_.Function:
        title = name.capitalize()
        log_group = logs.LogGroup(self, f"{title}Logs", retention=retention,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        # An explicit role: only this function's log group, no AWS managed policy with account-wide logs.
        role = iam.Role(self, f"{title}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description=f"durastate {name} function")
        log_group.grant_write(role)
        fn = lambda_.Function(
            self, title,
            runtime=runtime,
            architecture=architecture,
            handler=HANDLERS[name],
            code=lambda_.Code.from_asset(str(code_dir), asset_hash=code_dir.name,
                                         asset_hash_type=cdk.AssetHashType.CUSTOM, exclude=[".complete"]),
            layers=[self.layer] if self.layer is not None else None,
            memory_size=memory_size,
            timeout=timeout,
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE,
            environment=environment,
            description=f"durastate {name}",
        )
        wildcard = "X-Ray's PutTraceSegments/PutTelemetryRecords support no resource-level permissions"
        if name == "relay":
            wildcard += ", nor does dynamodb:ListStreams (added by the stream event source)"
        _suppress(role, ("AwsSolutions-IAM5[Resource::*]", wildcard + ", so AWS requires Resource '*'."))
        _suppress(fn, ("AwsSolutions-L1", "Python 3.12 is pinned on purpose: the layer's compiled wheels "
                                          "(pydantic-core, PyYAML, wrapt) are built for cp312."))
        return fn
