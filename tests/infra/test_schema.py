"""The construct's copy of the table layout agrees with the DynamoDB store's own.

(``durastate.cdk`` imports nothing of durastate outside itself, so the layout is kept twice; this keeps them equal.)
"""

from __future__ import annotations

import ast
from pathlib import Path

from durastate.cdk.schema import TABLES
from durastate.store.dynamodb import layout as _dynamo

ROOT = Path(__file__).resolve().parents[2]


def test_same_tables_keys_and_indexes_as_the_store() -> None:
    store = {spec.name: spec for spec in _dynamo.TABLES}
    assert list(store) == list(TABLES)
    for name, spec in TABLES.items():
        keys = (spec.partition,) + ((spec.sort,) if spec.sort else ())
        assert store[name].keys == keys, name
        got = {i.name: i for i in store[name].indexes}
        assert set(got) == {i.name for i in spec.indexes}, name
        for index in spec.indexes:
            ikeys = (index.partition,) + ((index.sort,) if index.sort else ())
            assert got[index.name].keys == ikeys, (name, index.name)
            projection = "INCLUDE" if got[index.name].include else "KEYS_ONLY"
            assert index.projection == projection, (name, index.name)
            assert tuple(index.non_key_attributes) == tuple(got[index.name].include), (name, index.name)


def test_create_table_requests_match_the_template_shape() -> None:
    """What the store would create for itself is what the stack provisions (keys and attribute types)."""
    for spec in _dynamo.TABLES:
        req = _dynamo.create_table_request("durastate", spec)
        mine = TABLES[spec.name]
        assert req["TableName"] == f"durastate_{spec.name}"
        assert req["KeySchema"][0] == {"AttributeName": mine.partition[0], "KeyType": "HASH"}
        types = {a["AttributeName"]: a["AttributeType"] for a in req["AttributeDefinitions"]}
        assert types[mine.partition[0]] == mine.partition[1]
        if mine.sort:
            assert types[mine.sort[0]] == mine.sort[1]


def test_the_cdk_code_imports_nothing_of_durastate_but_durastate_cdk() -> None:
    files = [ROOT / "app.py", *sorted((ROOT / "durastate" / "cdk").glob("*.py"))]
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            outside = [n for n in names if (n == "durastate" or n.startswith("durastate."))
                       and not (n == "durastate.cdk" or n.startswith("durastate.cdk."))]
            assert not outside, f"{path} imports {outside}"
