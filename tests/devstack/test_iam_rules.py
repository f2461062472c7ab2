"""The local stack's IAM decisions, rule by rule (no server): how a request maps to the actions and resources
AWS authorises, how a policy decides them, and how "each grant is needed" is computed."""

from __future__ import annotations

from typing import Any

import pytest

from durastate.devstack.errors import LocalStackError
from durastate.devstack.iam import (
    Decision,
    Grant,
    IamEnforcer,
    RolePolicies,
    authorizations,
    condition_values,
    is_allowed,
    needed_grants,
    resolve,
)

REGION, ACCOUNT = "us-east-1", "123456789012"
QUEUE = f"arn:aws:sqs:{REGION}:{ACCOUNT}:d-events.fifo"


def authz(service: str, operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    return authorizations(service, operation, params, region=REGION, account=ACCOUNT)


def table(name: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def test_requests_are_authorised_as_aws_authorises_them() -> None:
    assert authz("dynamodb", "Query", {"TableName": "t", "IndexName": "due"}) == [
        ("dynamodb:Query", table("t") + "/index/due")]
    assert authz("dynamodb", "TransactWriteItems", {"TransactItems": [
        {"Put": {"TableName": "a"}}, {"Delete": {"TableName": "b"}}, {"ConditionCheck": {"TableName": "a"}},
        {"Update": {"TableName": "c"}}]}) == [
        ("dynamodb:PutItem", table("a")), ("dynamodb:DeleteItem", table("b")),
        ("dynamodb:ConditionCheckItem", table("a")), ("dynamodb:UpdateItem", table("c"))]
    assert authz("dynamodb", "BatchGetItem", {"RequestItems": {"a": {}, "b": {}}}) == [
        ("dynamodb:BatchGetItem", table("a")), ("dynamodb:BatchGetItem", table("b"))]
    assert authz("sqs", "SendMessageBatch", {"QueueUrl": f"http://h:1/{ACCOUNT}/d-events.fifo"}) == [
        ("sqs:SendMessage", QUEUE)]
    assert authz("sqs", "ChangeMessageVisibilityBatch", {"QueueUrl": f"http://h:1/{ACCOUNT}/d-events.fifo"}) == [
        ("sqs:ChangeMessageVisibility", QUEUE)]
    assert authz("events", "PutEvents", {"Entries": [{"EventBusName": "bus"}, {}]}) == [
        ("events:PutEvents", f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/bus"),
        ("events:PutEvents", f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default")]
    assert authz("lambda", "Invoke", {"FunctionName": "charge"}) == [
        ("lambda:InvokeFunction", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:charge")]
    assert authz("dynamodbstreams", "GetRecords", {"ShardIterator": "it"}) == [("dynamodb:GetRecords", "*")]
    assert authz("s3", "GetObject", {"Bucket": "b", "Key": "contexts/e1/ab"}) == [
        ("s3:GetObject", "arn:aws:s3:::b/contexts/e1/ab")]
    assert authz("s3", "DeleteObjects", {"Bucket": "b", "Delete": {"Objects": [{"Key": "k1"}, {"Key": "k2"}]}}) == [
        ("s3:DeleteObject", "arn:aws:s3:::b/k1"), ("s3:DeleteObject", "arn:aws:s3:::b/k2")]
    assert authz("s3", "ListObjectsV2", {"Bucket": "b", "Prefix": "contexts/e1/"}) == [
        ("s3:ListBucket", "arn:aws:s3:::b")]


def test_patterns_match_exactly_what_iam_matches() -> None:
    doc = {"Statement": [{"Effect": "Allow", "Action": "SQS:SendMessage", "Resource": QUEUE},
                         {"Effect": "Allow", "Action": "dynamodb:Get*", "Resource": table("t?")}]}
    assert is_allowed(doc, "sqs:sendmessage", QUEUE)  # actions are case-insensitive
    assert not is_allowed(doc, "sqs:SendMessage", QUEUE.replace(".fifo", "Xfifo"))  # a dot is a dot
    assert not is_allowed(doc, "sqs:SendMessageBatch", QUEUE)
    assert is_allowed(doc, "dynamodb:GetItem", table("t1")) and not is_allowed(doc, "dynamodb:GetItem", table("t12"))
    deny = {"Statement": [*doc["Statement"], {"Effect": "Deny", "Action": "sqs:*", "Resource": "*"}]}
    assert not is_allowed(deny, "sqs:SendMessage", QUEUE)  # an explicit deny wins
    assert not is_allowed({"Statement": []}, "sqs:SendMessage", QUEUE)  # nothing allowed: denied


def test_each_grant_is_needed_is_computed_per_action_and_resource() -> None:
    """Taking one action on one resource out of a statement keeps the rest of the statement."""
    other = f"arn:aws:sqs:{REGION}:{ACCOUNT}:b"
    doc = {"Statement": [{"Effect": "Allow", "Action": ["sqs:SendMessage", "sqs:DeleteMessage"],
                          "Resource": [QUEUE, other]}]}
    made = [Decision("w", "sqs:SendMessage", QUEUE, True, "SendMessageBatch"),
            Decision("w", "sqs:DeleteMessage", other, True, "DeleteMessage")]
    needed = needed_grants({"w": doc}, made)
    assert {(g.action, g.resource) for g, why in needed.items() if why} == {
        ("sqs:SendMessage", QUEUE), ("sqs:DeleteMessage", other)}
    assert needed[Grant("w", "sqs:SendMessage", other)] == []
    assert needed[Grant("w", "sqs:DeleteMessage", QUEUE)] == []


def test_template_references_resolve_and_a_policy_that_cannot_be_read_is_refused() -> None:
    def attribute(lid: str, name: str) -> str:
        return f"<{lid}.{name}>"

    def ref(lid: str) -> str:
        return {"AWS::Region": REGION}.get(lid, f"<{lid}>")

    join = {"Fn::Join": ["", [{"Fn::GetAtt": ["T", "Arn"]}, "/index/", {"Ref": "AWS::Region"}]]}
    assert resolve(join, attribute, ref) == f"<T.Arn>/index/{REGION}"
    template = {"Resources": {
        "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}},
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"ManagedPolicyArns": ["arn:aws:iam::aws:policy/x"]}},
        "Odd": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["Role2", "Arn"]}}},
        "Role2": {"Type": "AWS::IAM::Role", "Properties": {}},
        "P": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "Role2"}], "PolicyDocument": {
            "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "NotResource": "x"}]}}},
    }}
    with pytest.raises(LocalStackError, match="NotResource"):
        RolePolicies(template, {"Fn": "fn", "Odd": "odd"}, attribute, ref)
    del template["Resources"]["P"]
    policies = RolePolicies(template, {"Fn": "fn", "Odd": "odd"}, attribute, ref)
    assert "managed policies" in policies.unknown["fn"] and policies.documents["odd"]["Statement"] == []
    enforcer = IamEnforcer(policies.documents, region=REGION, account=ACCOUNT, unknown=policies.unknown)
    with enforcer.acting_as("fn"), pytest.raises(LocalStackError, match="managed policies"):
        enforcer.check("sqs", "SendMessage", {"QueueUrl": f"http://h:1/{ACCOUNT}/d-events.fifo"})
    enforcer.check("sqs", "SendMessage", {"QueueUrl": f"http://h:1/{ACCOUNT}/d-events.fifo"})  # nobody's: unchecked
    assert enforcer.decisions == []


LIST_CONTEXTS = {"Statement": [
    {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
     "Condition": {"StringLike": {"s3:prefix": ["contexts/*"]}}}]}


def test_the_s3_prefix_condition_of_a_listing_is_evaluated_as_iam_does() -> None:
    def allowed(params: dict[str, Any]) -> bool:
        values = condition_values("s3", "ListObjectsV2", params)
        return all(is_allowed(LIST_CONTEXTS, action, resource, values)
                   for action, resource in authz("s3", "ListObjectsV2", params))

    assert condition_values("s3", "ListObjectsV2", {"Bucket": "b", "Prefix": "contexts/e1/"}) == {
        "s3:prefix": "contexts/e1/"}
    assert allowed({"Bucket": "b", "Prefix": "contexts/e1/"})
    assert not allowed({"Bucket": "b", "Prefix": "other/e1/"})  # outside the prefix
    assert not allowed({"Bucket": "b"})  # no prefix: the key is absent, the condition fails
    assert not allowed({"Bucket": "b", "Prefix": "Contexts/e1/"})  # StringLike is case-sensitive
    # An unmet condition leaves the statement out (no explicit deny): another statement still allows it.
    both = {"Statement": [*LIST_CONTEXTS["Statement"],
                          {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b"}]}
    assert is_allowed(both, "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "other/"})
    # "Each grant needed" re-decides with the request's condition keys.
    made = [Decision("s", "s3:ListBucket", "arn:aws:s3:::b", True, "ListObjectsV2",
                     (("s3:prefix", "contexts/e1/"),))]
    assert needed_grants({"s": LIST_CONTEXTS}, made) == {Grant("s", "s3:ListBucket", "arn:aws:s3:::b"): made}


def test_a_condition_the_local_stack_does_not_evaluate_is_refused() -> None:
    def statement(condition: dict[str, Any]) -> dict[str, Any]:
        return {"Resources": {
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}},
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"Policies": [{"PolicyDocument": {"Statement": [
                {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
                 "Condition": condition}]}}]}}}}

    def name(lid: str, attr: str = "") -> str:
        return lid

    assert RolePolicies(statement({"StringLike": {"s3:prefix": "contexts/*"}}), {"Fn": "fn"}, name, name
                        ).documents["fn"]["Statement"][0]["Condition"]
    with pytest.raises(LocalStackError, match="StringEquals aws:SourceVpc"):
        RolePolicies(statement({"StringEquals": {"aws:SourceVpc": "vpc-1"}}), {"Fn": "fn"}, name, name)
