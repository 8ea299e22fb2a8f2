"""A thread's last failure and the retry policy that decides when it is tried again
(docs/format.md, "Thread state", "Retries"): records of the thread table, re-exported by
``uwf.backend.base``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from uwf.util.base32 import NodeHash
from uwf.util.optional import present
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.util.outputs import FailureShown

# NamedTuples, not frozen dataclasses: every command imports this module, and `uwf thread
# show` loads no ``dataclasses`` (tests/test_startup.py).


LONGEST_DELAY = 366 * 86_400  # seconds: a back-off longer than a year waits a year


class RetryPolicy(NamedTuple):
    """How a failing thread is tried again (docs/format.md, "Retries"): after ``attempts``
    failed attempts at one head it is ``failed`` (None: never); after the n-th, no fleet
    stepper tries it for ``backoff * 2**(n-1)`` seconds, at most ``max_backoff``."""

    attempts: int | None = None
    backoff: float = 1.0
    max_backoff: float = 60.0

    def delay_ms(self, attempts: int) -> int:
        """The wait after the ``attempts``-th failed attempt, in ms: at most ``LONGEST_DELAY``
        seconds whatever the policy says (a back-off of 1e300 s would overflow a time)."""
        seconds = min(self.max_backoff, self.backoff * 2.0 ** min(attempts - 1, 40))
        return int(min(seconds, LONGEST_DELAY) * 1000)


class Failure(NamedTuple):
    """The last failure of a thread (docs/format.md, "Thread state"): attempts to step it at
    ``head`` that failed since its last step landed. A landed step (any head move) ends it,
    so a mark for another head than the thread's is stale and never shown.

    ``attempts`` counts the failed attempts at this head, by any process on any machine
    sharing the backend; ``since`` is the first of them and ``at`` the last, whose error
    line, exit code (the loop contract's: 1, 5), role, agent and host the record keeps.
    The retry policy in force (``RetryPolicy``) adds ``limit`` (the attempts it allows),
    ``retry_at`` (unix ms: no fleet stepper tries again before) and ``exhausted`` (the last
    attempt failed: the thread is ``failed`` until ``thread retry``).
    """

    head: NodeHash
    error: str
    code: int
    at: int  # unix ms of the last failed attempt
    attempts: int = 1
    since: int | None = None  # unix ms of the first failed attempt at this head (None: ``at``)
    role: str | None = None
    agent: str | None = None
    host: str | None = None
    limit: int | None = None  # the attempts the retry policy allows (None: no limit)
    retry_at: int | None = None  # unix ms before which no fleet stepper tries again
    exhausted: bool = False  # the last allowed attempt failed: the thread is ``failed``

    def shown(self) -> FailureShown:
        """What ``thread show`` and ``thread list`` say of it: ``{error, code, at, attempts,
        since, role?, agent?, host?, limit?, retryAt?, exhausted?}`` (at the thread's head)."""
        out = {
            "error": self.error,
            "code": self.code,
            "at": self.at,
            "attempts": self.attempts,
            "since": self.at if self.since is None else self.since,
            **present(
                role=self.role,
                agent=self.agent,
                host=self.host,
                limit=self.limit,
                retryAt=self.retry_at,
                exhausted=self.exhausted or None,
            ),
        }
        return cast("FailureShown", out)

    def as_json(self) -> dict[str, Any]:
        """The record as the thread state stores it: ``shown()`` after its ``head``."""
        return {"head": self.head, **self.shown()}

    def after(self, previous: Failure | None, policy: RetryPolicy = RetryPolicy()) -> Failure:
        """This attempt's record, following ``previous`` (the one stored): its attempts plus
        one and its first time when it was at the same head, else a first attempt; with the
        next allowed attempt (or the dead-letter mark) that ``policy`` gives it."""
        attempts, since = 1, self.at
        if previous is not None and previous.head == self.head:
            attempts, since = previous.attempts + 1, previous.since or previous.at
        exhausted = policy.attempts is not None and attempts >= policy.attempts
        retry_at = None if exhausted else self.at + policy.delay_ms(attempts)
        return self._replace(
            attempts=attempts,
            since=since,
            limit=policy.attempts,
            retry_at=retry_at,
            exhausted=exhausted,
        )

    def ready(self, now: int) -> bool:
        """Whether a fleet stepper (``--next``, ``uwf worker``) may try the thread at ``now``
        (unix ms): not exhausted, and its next allowed attempt has come."""
        return not self.exhausted and (self.retry_at is None or self.retry_at <= now)
