"""Import a function's packaged handler the way the Lambda runtime does.

Why this exists: the local stack runs the code that ``cdk deploy`` would upload — each function's asset
folder in ``cdk.out`` (the handler plus the definitions, exactly what is zipped for Lambda) — not the
package's ``durastate/functions/`` folder, so a packaging mistake shows up locally. The folder is on ``sys.path``
while the module is imported (Lambda's task root is), and each folder's module gets a name of its own.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from durastate.devstack.errors import LocalStackError
from durastate.devstack.template import FunctionDef

__all__ = ["load_handler"]


def load_handler(fn: FunctionDef) -> Callable[[dict[str, Any], Any], Any]:
    """Import a function's handler module from its packaged code folder, as the Lambda runtime does."""
    code_dir = fn.code_dir
    if code_dir is None or not code_dir.is_dir():
        raise LocalStackError(f"the code of {fn.logical_id} ({fn.handler}) is not at {code_dir}: synthesize "
                              "with asset metadata (the default `cdk synth`) next to the template")
    path = code_dir / (fn.module.replace(".", "/") + ".py")
    name = f"_durastate_local_{fn.role}_{abs(hash(str(code_dir)))}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise LocalStackError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(code_dir))  # the task root is on sys.path in Lambda (shared helpers)
        try:
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        finally:
            sys.path.remove(str(code_dir))
    handler = getattr(module, fn.handler.rsplit(".", 1)[1], None)
    if not callable(handler):
        raise LocalStackError(f"{path} has no callable {fn.handler}")
    return handler  # type: ignore[no-any-return]
