"""In-process transport and sink: the embedded runtime's queue and the tests' recorder.

:class:`InMemoryTransport` keeps one FIFO per target and hands out at most one message per target at a
time, exactly the discipline of an SQS FIFO message group, so code tested on it behaves the same on SQS.
Nothing survives the process; the durable inbox of the embedded runtime is the SQLite transport.
"""

from __future__ import annotations

import builtins
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from durastate.engine.model import Event
from durastate.transport.base import (
    Claimed,
    DeadLetter,
    DeadLetterPage,
    Transport,
    UnknownDeadLetter,
    check_replayable,
    seq_cursor,
)

__all__ = ["InMemoryDeadLetters", "InMemorySink", "InMemoryTransport"]


class _Message:
    __slots__ = ("attempts", "deadline", "event", "token")

    def __init__(self, event: Event) -> None:
        self.event = event
        self.attempts = 0
        self.token: str | None = None  # set while claimed
        self.deadline = 0.0


class InMemoryTransport:
    """A thread-safe :class:`~durastate.transport.QueueTransport` held in memory.

    Only the head message of a target can be claimed, and only while no claim on that target is open, so
    a target's events are delivered one at a time and in the order sent. A claim not acked or released
    before its lease ends (by ``clock``) becomes claimable again — a crashed consumer never blocks a target.
    A message released with a delay stays the head and becomes claimable when the delay has passed.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._queues: dict[str, deque[_Message]] = {}
        self._ready: dict[str, None] = {}  # ordered set of targets that may have a claimable head
        self._inflight: dict[str, _Message] = {}  # claimed, or released with a delay: until msg.deadline
        self._tokens = itertools.count(1)
        self.dead_letter_box = InMemoryDeadLetters(self)
        """Its dead letters: in memory like the queue (replayed onto it)."""

    # -- Transport ----------------------------------------------------------------------------------
    def send(self, messages: Sequence[tuple[str, Event]]) -> None:
        with self._lock:
            for target_id, event in messages:
                q = self._queues.get(target_id)
                if q is None:
                    q = self._queues[target_id] = deque()
                q.append(_Message(event))
                if target_id not in self._inflight:
                    self._ready[target_id] = None

    # -- QueueTransport -----------------------------------------------------------------------------
    def claim(self, max_messages: int, lease_seconds: float = 30.0) -> list[Claimed]:
        out: list[Claimed] = []
        with self._lock:
            now = self._clock()
            if self._inflight:
                self._expire(now)
            ready = self._ready
            while ready and len(out) < max_messages:
                target_id = next(iter(ready))
                del ready[target_id]
                q = self._queues.get(target_id)
                if not q or target_id in self._inflight:
                    continue  # a stale hint: emptied by an ack, or claimed again
                msg = q[0]
                msg.attempts += 1
                msg.token = str(next(self._tokens))
                msg.deadline = now + lease_seconds
                self._inflight[target_id] = msg
                out.append(Claimed(msg.token, target_id, msg.event, msg.attempts))
        return out

    def ack(self, c: Claimed) -> None:
        with self._lock:
            q = self._queues.get(c.target_id)
            if not q or q[0].token != c.token:
                return  # stale token: the lease expired and the message was claimed again
            q.popleft()
            if self._inflight.get(c.target_id) is not None and self._inflight[c.target_id].token == c.token:
                del self._inflight[c.target_id]
            if q:
                if c.target_id not in self._inflight:
                    self._ready[c.target_id] = None
            else:
                del self._queues[c.target_id]

    def release(self, c: Claimed, delay: float = 0.0) -> None:
        """Give the message back: claimable again at once, or once ``delay`` seconds have passed (by the
        clock). Either way it stays its target's head, so nothing behind it for the target overtakes it."""
        with self._lock:
            q = self._queues.get(c.target_id)
            if not q or q[0].token != c.token:
                return
            msg = q[0]
            msg.token = None
            if delay > 0:
                # Held like a claim whose lease ends at the retry time (no token: nobody can ack it).
                msg.deadline = self._clock() + delay
                self._inflight[c.target_id] = msg
            else:
                self._inflight.pop(c.target_id, None)
                self._ready[c.target_id] = None

    # -- inspection -----------------------------------------------------------------------------------
    def pending(self) -> int:
        """Messages not yet acked, claimed or not."""
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def __len__(self) -> int:
        return self.pending()

    def messages(self, target_id: str | None = None) -> list[tuple[str, Event]]:
        """A snapshot of every unacked message (of one target, or all), per target in delivery order."""
        with self._lock:
            return [(t, m.event) for t, q in self._queues.items() if target_id in (None, t) for m in q]

    def _expire(self, now: float) -> None:
        for target_id, msg in list(self._inflight.items()):
            if msg.deadline <= now:
                # The token stays on the message: a late ack from the old holder is still honoured until
                # someone claims it again (then the new token wins).
                del self._inflight[target_id]
                self._ready[target_id] = None


class InMemoryDeadLetters:
    """A :class:`~durastate.transport.DeadLetterBox` in memory, replaying onto ``transport``.

    The box of :class:`InMemoryTransport`, and what :class:`~durastate.runtime.LocalRuntime` keeps dead
    letters in when its transport has no box of its own. Nothing survives the process.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._lock = threading.Lock()
        self._letters: dict[str, tuple[int, DeadLetter]] = {}  # id -> (seq, letter), in seq order
        self._seq = itertools.count(1)

    def add(self, letter: DeadLetter) -> None:
        with self._lock:
            kept = self._letters.get(letter.id)
            self._letters[letter.id] = (kept[0] if kept else next(self._seq), letter)

    def list(self, limit: int = 100, cursor: str | None = None) -> DeadLetterPage:
        after = seq_cursor(cursor)
        with self._lock:
            rows = [(seq, d) for seq, d in self._letters.values() if seq > after]
        page = rows[:max(1, limit)]
        more = len(rows) > len(page)
        return DeadLetterPage([d for _, d in page], str(page[-1][0]) if more and page else None)

    def get(self, letter_id: str) -> DeadLetter | None:
        with self._lock:
            kept = self._letters.get(letter_id)
        return kept[1] if kept else None

    def drop(self, letter_id: str) -> DeadLetter:
        with self._lock:
            kept = self._letters.pop(letter_id, None)
        if kept is None:
            raise UnknownDeadLetter(letter_id)
        return kept[1]

    def replay(self, ids: Sequence[str] | None = None) -> builtins.list[DeadLetter]:
        with self._lock:
            chosen = check_replayable({i: d for i, (_, d) in self._letters.items()}, ids)
            if chosen:
                # Sent before it leaves the box: a failed send leaves every letter where it was.
                self._transport.send([(d.target_id, d.event) for d in chosen])
            for d in chosen:
                del self._letters[d.id]
        return chosen

    def __len__(self) -> int:
        with self._lock:
            return len(self._letters)


class InMemorySink:
    """A :class:`~durastate.transport.Sink` that records every published notification, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def publish(self, events: Sequence[Event]) -> None:
        with self._lock:
            self.events.extend(events)

    def names(self) -> list[str]:
        return [e.name for e in self.events]
