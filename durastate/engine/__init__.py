"""The pure core of durastate: definitions, the interpreter, and the durable models. No I/O here.

```python
from durastate.engine import load_definition, step, Execution, Event
defn = load_definition("examples/order.yaml")
exe = Execution(id="o-1", definition_id=defn.id, context=defn.initial_context())
res = step(defn, exe, Event(name="durastate.start"), now=0.0)
```
"""

from durastate.engine.definition import After, Definition, Invoke, Map, State, Transition, load_definition
from durastate.engine.ids import child_execution_id, derived_id, timeout_event_id
from durastate.engine.interpreter import MAX_MICROSTEPS, StepResult, step
from durastate.engine.model import (
    CANCEL,
    FINISHED,
    RESERVED_PREFIX,
    START,
    STATUSES,
    TIMEOUT,
    ChildRef,
    Event,
    Execution,
    MapProgress,
    Status,
    new_id,
)
from durastate.engine.registry import DefinitionRegistry, import_definition

__all__ = [
    "CANCEL",
    "FINISHED",
    "MAX_MICROSTEPS",
    "RESERVED_PREFIX",
    "START",
    "STATUSES",
    "TIMEOUT",
    "After",
    "ChildRef",
    "Definition",
    "DefinitionRegistry",
    "Event",
    "Execution",
    "Invoke",
    "Map",
    "MapProgress",
    "State",
    "Status",
    "StepResult",
    "Transition",
    "child_execution_id",
    "derived_id",
    "import_definition",
    "load_definition",
    "new_id",
    "step",
    "timeout_event_id",
]
