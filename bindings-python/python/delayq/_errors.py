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
    """Redis could not be reached, or the connection broke."""


class TimeoutError(DelayqError, builtins.TimeoutError):
    """An operation took longer than its time limit."""


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
