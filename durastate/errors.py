"""Typed errors a user can act on.

Every error durastate raises on purpose derives from :class:`DurastateError`, and its message says what went
wrong *and* what to do about it, so the CLI and the Lambda handlers can report it in one line.
"""

from __future__ import annotations


class DurastateError(Exception):
    """Base of every error durastate raises deliberately."""


class StoreConflict(DurastateError):
    """A commit lost the optimistic-concurrency race (compare-and-swap on ``Execution.version``).

    Nothing of the losing commit was written. Reload the execution and apply the event again.
    """

    def __init__(self, execution_id: str, expected: int | None, found: int | None) -> None:
        self.execution_id = execution_id
        self.expected = expected
        self.found = found
        super().__init__(
            f"execution {execution_id!r} was changed concurrently: expected stored version {expected}, "
            f"found {found}; reload it and retry"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.execution_id, self.expected, self.found))


class EventAlreadyProcessed(StoreConflict):
    """A commit that was asked to check its event (``check_event=True``) found it already applied.

    Raised instead of writing anything: the caller committed on top of a copy it kept rather than one it
    just loaded with the dedupe check, and the event turned out to be a redelivery. It is a
    :class:`StoreConflict`, so a caller that reloads on conflicts (the worker) then sees the event as a
    duplicate through ``load_for_event`` and skips it.
    """

    def __init__(self, execution_id: str, event_id: str, version: int | None = None) -> None:
        self.event_id = event_id
        DurastateError.__init__(
            self,
            f"event {event_id!r} was already applied to execution {execution_id!r}; nothing was written "
            "(reload the execution: the event is a duplicate)",
        )
        self.execution_id = execution_id
        self.expected = version
        self.found = version

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.execution_id, self.event_id, self.expected))


class StoreUnavailable(DurastateError):
    """The store could not be reached (after its own retries)."""


class ExecutionTooLarge(DurastateError):
    """An execution or a commit exceeds a hard limit of the backend; nothing was written."""

    def __init__(self, what: str, size: int, limit: int, hint: str = "") -> None:
        self.what = what
        self.size = size
        self.limit = limit
        msg = f"{what} is {size} bytes/items, over the backend limit of {limit}; nothing was written"
        super().__init__(msg + (f" ({hint})" if hint else ""))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.what, self.size, self.limit))


class DefinitionError(DurastateError):
    """A statechart definition does not validate. ``issues`` lists every problem, each with its path."""

    def __init__(self, issues: list[str], source: str | None = None) -> None:
        self.issues = list(issues)
        self.source = source
        head = f"{source}: " if source else ""
        body = "; ".join(self.issues) if len(self.issues) == 1 else "\n  " + "\n  ".join(self.issues)
        super().__init__(f"{head}invalid definition: {body}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.issues, self.source))


class UnknownDefinition(DurastateError):
    """No definition is registered under the requested id."""

    def __init__(self, definition_id: str, known: list[str] | None = None) -> None:
        self.definition_id = definition_id
        self.known = sorted(known or [])
        hint = f" (known: {', '.join(self.known)})" if self.known else ""
        super().__init__(
            f"unknown definition {definition_id!r}{hint}; add its YAML/JSON file to the definitions folder"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.definition_id, self.known))


class UnknownExecution(DurastateError):
    """An event or a command (show, reset, migrate --id …) named an execution that does not exist.

    The message serves both: a command's id is more often mistyped than not yet started, so it points to
    the listing first, and to the start for an event sent ahead of its execution."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        super().__init__(
            f"no execution {execution_id!r}; `durastate list` shows the executions there are; a new one starts "
            "with `durastate start` (a 'durastate.start' event)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.execution_id,))


class ControlRefused(DurastateError):
    """A control operation (terminate, redrive, resume…) that does not apply to the execution as it is:
    the message says why (it has already ended, it is not failed…). Nothing was changed."""


class MalformedEvent(DurastateError):
    """A message or event does not match the wire format."""


class ReservedId(MalformedEvent):
    """An event a producer may not send: an id in the namespace of the ids durastate derives itself (one
    starting with ``~``), a reserved name only durastate sends (``durastate.timeout``, ``durastate.finished``),
    or any event to a system record (a schedule, an archived definition version). Nothing was enqueued or
    applied; the message says what to send instead. On the queue it is dead-lettered with that reason."""


class TimerNotDue(MalformedEvent):
    """A ``durastate.timeout`` that arrived before its timer is due by the worker's clock (more than
    :data:`durastate.engine.ids.TIMER_SKEW` early): not applied, dead-lettered with the reason; the timer
    stays armed and fires on time."""


class InvalidCursor(DurastateError, ValueError):
    """A listing cursor that no listing of this store returned (mistyped, truncated, or another store's)."""

    def __init__(self, cursor: str) -> None:
        self.cursor = cursor
        super().__init__(f"invalid cursor {cursor!r}: pass back a next_cursor this store returned, or leave "
                         "it out to start from the first page")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.cursor,))


class InvalidValue(MalformedEvent, ValueError):
    """A value durastate refuses to store: a non-finite number, data nested too deep, an id with control
    characters or the reserved child-id separator. Nothing was written; fix the value and send it again.

    It is also a :class:`ValueError`, so pydantic validators that raise it report it as a validation error.
    """


class InvalidSearch(DurastateError, ValueError):
    """A listing filter (``list --where``) that cannot be answered: malformed, naming a field no definition
    declares under ``search:``, or comparing it with a value of another type. Nothing is read; fix the
    filter (the definition's ``search:`` key names its fields and their types)."""


class DeliveryFailed(DurastateError):
    """A transport or sink could not deliver some messages after its bounded retries.

    ``failures`` lists ``(key, code, message)`` per undelivered entry (key: the event id). Nothing was
    acknowledged for them, so a retry of the same call (the relay's next pass) sends them again; the
    receiver deduplicates what did arrive.
    """

    def __init__(
        self, what: str, failures: list[tuple[str, str, str]], permanent: frozenset[str] = frozenset()
    ) -> None:
        self.what = what
        self.failures = list(failures)
        self.permanent = frozenset(permanent)
        """Keys of the failures no retry can fix (the receiver rejected them as the sender's fault)."""
        shown = "; ".join(f"{k}: {c} {m}".strip() for k, c, m in self.failures[:5])
        more = f" (+{len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        super().__init__(
            f"{what}: {len(self.failures)} message(s) not delivered after retries: {shown}{more}; "
            "check the queue/bus permissions and quotas, then retry (delivery is idempotent)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.what, self.failures, self.permanent))


class GroupAborted(StoreUnavailable):
    """A group of writes committed together (``durastate serve``'s round on SQLite) was rolled back whole.

    SQLite rolls a transaction back by itself on some failures (an I/O error, a full disk); then none
    of the group's earlier writes landed either, so whoever runs the group must stop it rather than
    carry on. Nothing is lost: the group's messages are claimed and applied again.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason} (the whole group of writes it was part of was rolled back; its "
                         "messages will be retried)")


class StoreThrottled(StoreUnavailable):
    """The store kept refusing a request for lack of capacity (throttling) or because concurrent
    transactions held the same items, past its bounded retries with backoff.

    The refused request was not applied (a refused commit wrote nothing). It is transient: retry the
    event later (a queue redelivery does), or give the table more capacity.
    """


class UnknownDefinitionVersion(UnknownDefinition):
    """An execution is pinned to a version of its definition that neither the definitions folder nor the
    store's archive of versions holds. Nothing was changed: the event can be applied once that version is
    back (restore the definition file), or after ``durastate migrate`` moved the execution to a version
    that is there."""

    def __init__(self, definition_id: str, version: str, execution_id: str | None = None) -> None:
        self.version = version
        self.execution_id = execution_id
        DurastateError.__init__(
            self,
            f"execution {execution_id!r} runs version {version} of definition {definition_id!r}, which is "
            "neither in the definitions folder nor archived in the store; restore that definition file, or "
            f"move the execution with `durastate migrate --definition {definition_id} --from {version} --to "
            "<version>`")
        self.definition_id = definition_id
        self.known = []

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.definition_id, self.version, self.execution_id))


class MigrationRefused(DurastateError):
    """A migration that would strand executions: states they sit in are missing from the target version and
    no ``--map old.path=new.path`` says where they go. Nothing was changed."""

    def __init__(self, message: str, stranded: dict[str, list[str]] | None = None) -> None:
        self.stranded = dict(stranded or {})
        """Execution id -> the state paths of the source version it sits in that need a mapping."""
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.stranded))


class ScheduleError(DefinitionError):
    """A ``schedules:`` file (or the schedules given to the AWS construct) does not validate. ``issues`` lists
    every problem, each with its path (``schedules.<name>.<field>``); nothing was scheduled from it."""

    def __init__(self, issues: list[str], source: str | None = None) -> None:
        DefinitionError.__init__(self, issues, source)
        head = f"{source}: " if source else ""
        body = "; ".join(self.issues) if len(self.issues) == 1 else "\n  " + "\n  ".join(self.issues)
        Exception.__init__(self, f"{head}invalid schedules: {body}")


class BackfillRefused(DurastateError, ValueError):
    """A ``schedules backfill`` that cannot run as asked (``--from`` after ``--to``, ``--to`` in the future,
    too many ticks); nothing was started."""


class UnknownSchedule(DurastateError):
    """No schedule of that name is stored (or it was removed from the definitions folder)."""

    def __init__(self, name: str, known: list[str] | None = None) -> None:
        self.name = name
        self.known = sorted(known or [])
        hint = f" (known: {', '.join(self.known)})" if self.known else " (none is stored)"
        super().__init__(f"unknown schedule {name!r}{hint}; schedules come from a `schedules:` file in the "
                         "definitions folder, stored when `durastate serve` starts (`durastate schedules list` "
                         "shows them)")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.name, self.known))


class TelemetryUnavailable(DurastateError):
    """``DURASTATE_OTEL=1`` asks for OpenTelemetry spans, and the ``otel`` extra is not installed."""
