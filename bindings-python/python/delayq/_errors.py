"""The exceptions of delayq: one class per kind of core error (SPEC section 6)."""

from __future__ import annotations

import builtins


class DelayqError(Exception):
    """Base class of every delayq error."""


class InvalidArgument(DelayqError, ValueError, TypeError):
    """A bad argument (negative/NaN/inf/overflowing delay, empty name, value of the wrong
    type or over 512 MiB). Raised before anything reaches Redis."""


InvalidArgumentError = InvalidArgument
"""The same class as ``InvalidArgument``, named like the other error classes."""


class ConnectionError(DelayqError, builtins.ConnectionError):
    """Redis could not be reached, or the connection broke or went silent.

    When the request may have been sent (its reply was lost), its outcome is unknown and
    the message says so; delayq does not send it again (in a Redis Cluster too). What the
    caller may assume: an offer that failed may have been stored (to be safe, offer a
    reliable message again with the same id: it is not created twice; a delayed queue's
    offer has no id, and offering the value again may store it twice); an ack that failed
    may have happened (at-least-once: the message may come back, and be processed again).
    See docs/faults.md, "What a caller may assume when a call fails"."""


class TimeoutError(DelayqError, builtins.TimeoutError):
    """An operation took longer than its time limit.

    With the durability option, an offer or ack
    whose replicas (or append-only file) did not confirm it in time fails with this kind:
    the write was applied on the master, but may not survive a failover."""


class WrongTypeError(DelayqError):
    """A key of the queue holds another Redis type (WRONGTYPE). Nothing was written."""


class ClosedError(DelayqError):
    """The queue handle or the client was closed."""


class ServerError(DelayqError):
    """Any other error reported by the Redis server."""


# Shown (in tracebacks, `repr`) and pickled as `delayq.<name>`, where users find them.
for _cls in (
    DelayqError,
    InvalidArgument,
    ConnectionError,
    TimeoutError,
    WrongTypeError,
    ClosedError,
    ServerError,
):
    _cls.__module__ = "delayq"
del _cls
