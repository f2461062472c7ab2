"""IAM on the local stack: every request a function makes is decided against that function's role policy.

Why this exists: moto authorises every request, so a handler that calls something its role does not grant
works here and fails on AWS with ``AccessDenied`` (the sweeper's one-item ``Scan`` once did exactly that).
So the local stack plays IAM's part too, the way it plays Lambda's:

* **The policies are the template's**: each ``AWS::Lambda::Function``'s role, and every
  ``AWS::IAM::Policy`` / ``AWS::IAM::ManagedPolicy`` attached to it, with the ``Ref`` / ``Fn::GetAtt`` /
  ``Fn::Join`` in their resources resolved to the local ARNs (:class:`RolePolicies`). A policy this cannot
  read exactly (``NotResource``, a ``Condition`` other than the ones in :data:`CONDITIONS`, an AWS managed
  policy whose text is not in the template) is an error, never a guess.
* **Each request is authorised as AWS authorises it** (:func:`authorizations`): DynamoDB on the table (or
  ``table/…/index/…``) ARN, batches per table, transactions per item (a transactional ``Put`` needs
  ``dynamodb:PutItem``); Streams on the stream ARN; SQS on the queue ARN, a batch as its single-message
  action (``SendMessageBatch`` needs ``sqs:SendMessage``); EventBridge per entry on its bus ARN; Lambda's
  ``Invoke`` as ``lambda:InvokeFunction`` on the function ARN; S3 object calls on the object ARN
  (``DeleteObjects`` per object as ``s3:DeleteObject``), a listing as ``s3:ListBucket`` on the bucket.
* **Conditions are evaluated here, exactly for the keys the construct uses** (:data:`CONDITIONS`: the
  ``s3:prefix`` ``StringLike`` on the context bucket's ``ListBucket``), from the request's own parameters
  (:func:`condition_values`). moto's evaluator knows only ``StringEquals``, ignores other operators and
  answers an unmet condition with an explicit deny, where IAM just leaves the statement out.
* **The decision is moto's policy evaluator** (``moto.iam.access_control.IAMPolicy``: explicit deny wins,
  then any allow), fed with patterns made exact — actions compared case-insensitively as IAM does, and an
  ARN's ``.`` a literal, not a regex wildcard (moto turns ``*`` into ``.*`` and leaves the rest as regex).
* **The caller is known per invocation**: the local stack shares one runtime (and its boto3 clients)
  between its handlers, so it names the function it is running in a context variable
  (:meth:`IamEnforcer.acting_as`) — around each handler call, and around the event source mappings'
  receives and deletes, which Lambda makes with the function's role too. Requests made outside any
  function (the test's own, the stack's set-up) are not checked.

A denied request raises the ``ClientError`` AWS would answer (``AccessDeniedException``; SQS
``AccessDenied``) before it is sent; every decision, allowed or not, is kept in
:attr:`IamEnforcer.decisions`, so a test can show that each grant is needed (:func:`needed_grants`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durastate.devstack.errors import LocalStackError

__all__ = [
    "CONDITIONS",
    "Decision",
    "Grant",
    "IamEnforcer",
    "RolePolicies",
    "authorizations",
    "condition_values",
    "grants_of",
    "is_allowed",
    "needed_grants",
    "resolve",
    "resolve_document",
]

_caller: contextvars.ContextVar[str | None] = contextvars.ContextVar("durastate_iam_caller", default=None)

#: The error code each service answers a denied request with.
_DENIED_CODES = {"sqs": "AccessDenied"}
#: The IAM prefix of a botocore service name, where they differ.
_PREFIXES = {"dynamodbstreams": "dynamodb"}
#: Batch APIs authorised as their single-item action (AWS documents no separate permission for them).
_SQS_SINGLE = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
               "ChangeMessageVisibilityBatch": "ChangeMessageVisibility"}
#: The (operator, condition key) pairs the local stack evaluates; any other ``Condition`` is refused.
CONDITIONS: frozenset[tuple[str, str]] = frozenset({("StringLike", "s3:prefix")})
_TRANSACT_WRITE = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                   "ConditionCheck": "ConditionCheckItem"}


@dataclass(frozen=True)
class Decision:
    """One authorisation: which function asked for which action on which resource, and the answer."""

    function: str
    action: str
    resource: str
    allowed: bool
    operation: str  # the API call it came from, e.g. "TransactWriteItems"
    conditions: tuple[tuple[str, str], ...] = ()  # the request's condition keys, e.g. (("s3:prefix", "contexts/x/"),)


@dataclass(frozen=True)
class Grant:
    """One action on one resource (pattern) of one statement of a function's role policy."""

    function: str
    action: str
    resource: str


# -- resolving the template's references -----------------------------------------------------------------
def resolve(value: Any, attribute: Callable[[str, str], str], ref: Callable[[str], str]) -> str:
    """A template value (a string, ``Ref``, ``Fn::GetAtt``, ``Fn::Join``) as the string it deploys as.

    ``attribute(logical_id, name)`` answers ``Fn::GetAtt``; ``ref(logical_id)`` answers ``Ref`` (pseudo
    parameters included)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        (fn, arg), = value.items()
        if fn == "Ref":
            return ref(str(arg))
        if fn == "Fn::GetAtt":
            lid, name = (arg.split(".", 1) if isinstance(arg, str) else arg)
            return attribute(str(lid), str(name))
        if fn == "Fn::Join":
            sep, parts = arg
            return str(sep).join(resolve(p, attribute, ref) for p in parts)
    raise LocalStackError(f"cannot resolve {json.dumps(value)} in a role policy locally")


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def resolve_document(document: Mapping[str, Any], attribute: Callable[[str, str], str],
                     ref: Callable[[str], str]) -> dict[str, Any]:
    """A policy document (a bucket policy, say) with each statement's ``Resource`` resolved; the rest as is."""
    statements = []
    for st in _as_list(document.get("Statement", [])):
        out = dict(st)
        if "Resource" in st:
            out["Resource"] = [resolve(r, attribute, ref) for r in _as_list(st["Resource"])]
        statements.append(out)
    return {**document, "Statement": statements}


class RolePolicies:
    """Each function's role policy, read from the template and resolved to local ARNs.

    ``functions``: ``{logical id of the function: name to call it by}`` (the local stack names them by
    role: ``worker``, ``relay``, ...)."""

    def __init__(self, template: Mapping[str, Any], functions: Mapping[str, str],
                 attribute: Callable[[str, str], str], ref: Callable[[str], str]) -> None:
        resources: Mapping[str, Any] = template.get("Resources") or {}
        self.documents: dict[str, dict[str, Any]] = {}
        self.unknown: dict[str, str] = {}
        """Functions whose policy cannot be known from the template, with why (their requests are refused:
        :meth:`IamEnforcer.check` raises, rather than guess)."""
        for fn_id, name in functions.items():
            props = (resources.get(fn_id) or {}).get("Properties") or {}
            role = props.get("Role")
            role_id = role["Fn::GetAtt"][0] if isinstance(role, Mapping) and "Fn::GetAtt" in role else None
            if role_id is None or role_id not in resources:
                self.unknown[name] = f"function {fn_id}: its role is not a role of the template"
                continue
            statements: list[dict[str, Any]] = []
            role_props = resources[role_id].get("Properties") or {}
            if role_props.get("ManagedPolicyArns"):
                self.unknown[name] = (f"role {role_id} has managed policies {role_props['ManagedPolicyArns']} "
                                      "whose text is not in the template")
                continue
            for inline in role_props.get("Policies") or []:
                statements += _as_list(inline["PolicyDocument"]["Statement"])
            for res in resources.values():
                if res.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                    p = res.get("Properties") or {}
                    if {"Ref": role_id} in (p.get("Roles") or []):
                        statements += _as_list(p["PolicyDocument"]["Statement"])
            self.documents[name] = {"Version": "2012-10-17",
                                    "Statement": [self._resolved(s, attribute, ref) for s in statements]}
        self.managed: dict[str, dict[str, Any]] = {
            lid: {"Version": "2012-10-17", "Statement": [
                self._resolved(s, attribute, ref) for s in _as_list(res["Properties"]["PolicyDocument"]["Statement"])]}
            for lid, res in resources.items() if res.get("Type") == "AWS::IAM::ManagedPolicy"}
        """Every managed policy of the template by logical id (attached to a role or not), resolved."""

    @staticmethod
    def _resolved(statement: Mapping[str, Any], attribute: Callable[[str, str], str],
                  ref: Callable[[str], str]) -> dict[str, Any]:
        unsupported = sorted(set(statement) & {"NotResource", "Principal", "NotPrincipal"})
        unsupported += [f"Condition {op} {key}" for op, body in (statement.get("Condition") or {}).items()
                        for key in body if (op, key) not in CONDITIONS]
        if unsupported:
            raise LocalStackError(f"a role policy statement uses {unsupported}, which the local stack's IAM "
                                  "check does not evaluate (pass iam=False to run unchecked)")
        out = dict(statement)
        out["Resource"] = [resolve(r, attribute, ref) for r in _as_list(statement.get("Resource", []))]
        return out


# -- deciding -------------------------------------------------------------------------------------------
def _exact(pattern: str) -> str:
    """An IAM wildcard pattern (``*``, ``?``) in the form moto's matcher reads as exactly that pattern."""
    return re.escape(pattern).replace(r"\*", "*").replace(r"\?", ".")


def _condition_met(condition: Mapping[str, Mapping[str, Any]], values: Mapping[str, str]) -> bool:
    """Whether a statement's ``Condition`` holds for a request (every operator, every key; a key the request
    lacks fails, as IAM's operators without ``IfExists`` do)."""
    for op, body in condition.items():
        for key, expected in body.items():
            if (op, key) not in CONDITIONS:
                raise LocalStackError(f"the local stack's IAM check does not evaluate Condition {op} {key}")
            actual = values.get(key)
            if actual is None or not any(re.fullmatch(_exact(str(p)).replace("*", ".*"), actual, re.DOTALL)
                                         for p in _as_list(expected)):
                return False
    return True


def is_allowed(document: Mapping[str, Any], action: str, resource: str,
               conditions: Mapping[str, str] | None = None) -> bool:
    """Whether an identity policy allows ``action`` on ``resource`` (explicit deny wins; default deny).

    ``conditions``: the request's condition keys (:func:`condition_values`); a statement whose
    ``Condition`` they do not meet does not apply."""
    from moto.iam.access_control import IAMPolicy, PermissionResult

    statements = []
    for st in document.get("Statement") or []:
        st = dict(st)
        if "Condition" in st and not _condition_met(st.pop("Condition"), conditions or {}):
            continue
        for key in ("Action", "NotAction"):
            if key in st:
                st[key] = [_exact(a.lower()) for a in _as_list(st[key])]
        st["Resource"] = [_exact(r) for r in _as_list(st.get("Resource", []))]
        statements.append(st)
    policy = IAMPolicy(json.dumps({"Version": "2012-10-17", "Statement": statements}))
    return bool(policy.is_action_permitted(action.lower(), resource) == PermissionResult.PERMITTED)


def authorizations(service: str, operation: str, params: Mapping[str, Any], *, region: str, account: str,
                   stream_of: Callable[[str], str] | None = None) -> list[tuple[str, str]]:
    """The (IAM action, resource ARN) pairs AWS checks for one API call."""
    prefix = _PREFIXES.get(service, service)

    def table(name: str, index: str | None = None) -> str:
        arn = name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"
        return arn if index is None else f"{arn}/index/{index}"

    if service == "dynamodb":
        if operation == "BatchGetItem" or operation == "BatchWriteItem":
            return [(f"dynamodb:{operation}", table(t)) for t in params.get("RequestItems") or {}]
        if operation == "TransactWriteItems":
            out = []
            for item in params.get("TransactItems") or []:
                (kind, body), = item.items()
                out.append((f"dynamodb:{_TRANSACT_WRITE[kind]}", table(body["TableName"])))
            return out
        if operation == "TransactGetItems":
            return [("dynamodb:GetItem", table(i["Get"]["TableName"])) for i in params.get("TransactItems") or []]
        if "TableName" in params:
            return [(f"dynamodb:{operation}", table(params["TableName"], params.get("IndexName")))]
        return [(f"dynamodb:{operation}", "*")]
    if service == "dynamodbstreams":
        if "StreamArn" in params:
            return [(f"dynamodb:{operation}", str(params["StreamArn"]))]
        if "ShardIterator" in params and stream_of is not None:
            return [(f"dynamodb:{operation}", stream_of(str(params["ShardIterator"])))]
        return [(f"dynamodb:{operation}", "*")]
    if service == "sqs":
        action = f"sqs:{_SQS_SINGLE.get(operation, operation)}"
        if "QueueUrl" in params:
            parts = str(params["QueueUrl"]).rstrip("/").split("/")
            return [(action, f"arn:aws:sqs:{region}:{parts[-2]}:{parts[-1]}")]
        if "QueueName" in params:
            return [(action, f"arn:aws:sqs:{region}:{account}:{params['QueueName']}")]
        return [(action, "*")]
    if service == "events" and operation == "PutEvents":
        out = []
        for entry in params.get("Entries") or []:
            bus = str(entry.get("EventBusName") or "default")
            out.append(("events:PutEvents",
                        bus if bus.startswith("arn:") else f"arn:aws:events:{region}:{account}:event-bus/{bus}"))
        return out
    if service == "s3" and "Bucket" in params:
        # Object calls on the object ARN; DeleteObjects per object as DeleteObject; a listing (ListObjectsV2)
        # as ListBucket on the bucket ARN.
        bucket = f"arn:aws:s3:::{params['Bucket']}"
        if operation == "DeleteObjects":
            objects = (params.get("Delete") or {}).get("Objects", [])
            return [("s3:DeleteObject", f"{bucket}/{o['Key']}") for o in objects]
        if operation in ("ListObjectsV2", "ListObjects"):
            return [("s3:ListBucket", bucket)]
        if "Key" in params:
            return [(f"s3:{operation}", f"{bucket}/{params['Key']}")]
        return [(f"s3:{operation}", bucket)]
    if service == "lambda" and operation in ("Invoke", "InvokeAsync"):
        fn = str(params.get("FunctionName"))
        return [("lambda:InvokeFunction",
                 fn if fn.startswith("arn:") else f"arn:aws:lambda:{region}:{account}:function:{fn}")]
    return [(f"{prefix}:{operation}", "*")]


def condition_values(service: str, operation: str, params: Mapping[str, Any]) -> dict[str, str]:
    """The condition keys of :data:`CONDITIONS` a request carries (a listing's ``Prefix`` is ``s3:prefix``)."""
    if service == "s3" and operation in ("ListObjectsV2", "ListObjects") and "Prefix" in params:
        return {"s3:prefix": str(params["Prefix"])}
    return {}


def grants_of(documents: Mapping[str, Mapping[str, Any]]) -> list[Grant]:
    """Every (function, action, resource) an Allow statement of the role policies names."""
    out: list[Grant] = []
    for fn, doc in documents.items():
        for st in doc.get("Statement") or []:
            if st.get("Effect") != "Allow" or "Action" not in st:
                continue
            for action in _as_list(st["Action"]):
                for resource in _as_list(st.get("Resource", [])):
                    out.append(Grant(fn, str(action), str(resource)))
    return out


def _without(document: Mapping[str, Any], grant: Grant) -> dict[str, Any]:
    """The policy with exactly one action x resource of its Allow statements taken out."""
    statements = []
    for st in document.get("Statement") or []:
        st = dict(st)
        actions, resources = _as_list(st.get("Action", [])), _as_list(st.get("Resource", []))
        if st.get("Effect") == "Allow" and grant.action in actions and grant.resource in resources:
            # split the statement: the grant's action on the other resources, the other actions on all
            others = [a for a in actions if a != grant.action]
            if others:
                statements.append({**st, "Action": others})
            rest = [r for r in resources if r != grant.resource]
            if rest:
                statements.append({**st, "Action": [grant.action], "Resource": rest})
            continue
        statements.append(st)
    return {**document, "Statement": statements}


def needed_grants(documents: Mapping[str, Mapping[str, Any]], decisions: Iterable[Decision]
                  ) -> dict[Grant, list[Decision]]:
    """For each grant of the policies: the recorded allowed requests its removal would deny.

    A grant with an empty list is one no recorded request needs (unused, or covered by another)."""
    allowed = sorted({d for d in decisions if d.allowed}, key=lambda d: (d.function, d.action, d.resource))
    out: dict[Grant, list[Decision]] = {}
    for grant in grants_of(documents):
        reduced = _without(documents[grant.function], grant)
        out[grant] = [d for d in allowed if d.function == grant.function
                      and not is_allowed(reduced, d.action, d.resource, dict(d.conditions))]
    return out


# -- enforcing ------------------------------------------------------------------------------------------
class IamEnforcer:
    """Decides every request of the function named by :meth:`acting_as` against that function's policy."""

    def __init__(self, policies: Mapping[str, Mapping[str, Any]], *, region: str, account: str,
                 enforce: bool = True, managed: Mapping[str, Mapping[str, Any]] | None = None,
                 unknown: Mapping[str, str] | None = None) -> None:
        self.policies = {k: dict(v) for k, v in policies.items()}
        """The policy each caller is decided against, by name (add one to check another principal)."""
        self.managed = {k: dict(v) for k, v in (managed or {}).items()}
        """The template's managed policies by logical id (e.g. the operator's, to act as with it)."""
        self.unknown = dict(unknown or {})
        self.enforce = enforce
        """Deny what the policy does not allow (``False``: only record the decisions)."""
        self.region = region
        self.account = account
        self.decisions: list[Decision] = []
        self._streams: dict[str, str] = {}  # shard iterator -> stream ARN (GetRecords names only the iterator)

    @contextlib.contextmanager
    def acting_as(self, function: str | None) -> Iterator[None]:
        """Requests made inside are ``function``'s (``None``: nobody's, unchecked)."""
        token = _caller.set(function)
        try:
            yield
        finally:
            _caller.reset(token)

    @staticmethod
    def caller() -> str | None:
        return _caller.get()

    def attach(self, client: Any) -> None:
        """Check every call of this boto3 client (hooks on its event system)."""
        events = client.meta.events
        service_id = client.meta.service_model.service_id.hyphenize()  # what botocore's event names use
        events.register(f"before-parameter-build.{service_id}", self._before)
        if client.meta.service_model.service_name == "dynamodbstreams":
            events.register(f"after-call.{service_id}", self._learn_iterators)

    @contextlib.contextmanager
    def new_clients(self) -> Iterator[None]:
        """Check every boto3 client created inside too (the CLI builds its own, from sessions of its own).

        A hook on botocore's ``Session.create_client`` for the duration: each new client is attached."""
        import botocore.session  # type: ignore[import-untyped]

        original = botocore.session.Session.create_client

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            self.attach(client)
            return client

        botocore.session.Session.create_client = create_client
        try:
            yield
        finally:
            botocore.session.Session.create_client = original

    def check(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        """Decide one call for the current caller; raise AWS's ``ClientError`` if any part is denied."""
        function = _caller.get()
        if function is None:
            return
        policy = self.policies.get(function)
        if policy is None:
            why = self.unknown.get(function, "it has no role policy in the template")
            raise LocalStackError(f"the local stack cannot decide the requests of function {function!r}: {why} "
                                  "(LocalStack(..., iam=False) runs it unchecked)")
        conditions = condition_values(service, operation, params)
        for action, resource in authorizations(service, operation, params, region=self.region,
                                               account=self.account, stream_of=self._stream_of):
            allowed = is_allowed(policy, action, resource, conditions)
            self.decisions.append(Decision(function, action, resource, allowed, operation,
                                           tuple(sorted(conditions.items()))))
            if not allowed and self.enforce:
                from botocore.exceptions import ClientError  # type: ignore[import-untyped]

                code = _DENIED_CODES.get(service, "AccessDeniedException")
                message = (f"User: arn:aws:sts::{self.account}:assumed-role/{function}/durastate-local-"
                           f"{function} is not authorized to perform: {action} on resource: {resource} "
                           f"because no identity-based policy allows the {action} action")
                raise ClientError({"Error": {"Code": code, "Message": message},
                                   "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        self.check(model.service_model.service_name, model.name, params)
        if model.name == "GetShardIterator":
            context["durastate_stream_arn"] = params.get("StreamArn")
        elif model.name == "GetRecords":
            context["durastate_stream_arn"] = self._streams.get(str(params.get("ShardIterator")))

    def _learn_iterators(self, parsed: Mapping[str, Any], context: Mapping[str, Any], **_: Any) -> None:
        arn = context.get("durastate_stream_arn")
        if arn:
            for key in ("ShardIterator", "NextShardIterator"):
                if parsed.get(key):
                    self._streams[str(parsed[key])] = str(arn)

    def _stream_of(self, iterator: str) -> str:
        return self._streams.get(iterator, "unknown-stream")

    def denied(self) -> list[Decision]:
        return [d for d in self.decisions if not d.allowed]

    def summary(self) -> Sequence[tuple[str, str, str]]:
        """The distinct (function, action, resource) decided, sorted."""
        return sorted({(d.function, d.action, d.resource) for d in self.decisions})
