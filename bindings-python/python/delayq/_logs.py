"""Core's logs on ``logging``: core's ``tracing`` records go to the logger
``delayq.<module>`` (``_emit``, called by the native module), as far as the logger
``delayq`` lets them through at its effective level (read at import, at each new
``Client`` and by ``set_log_level``)."""

from __future__ import annotations

import logging
from typing import Union

from . import _delayq


def _emit(target: str, level: int, message: str) -> None:
    module = target[len("delayq") :] if target.startswith("delayq") else target
    name = "delayq." + module.lstrip(":").replace("::", ".")
    logging.getLogger(name.rstrip(".")).log(level, message)


def follow() -> None:
    """Has core forward what the logger ``delayq`` lets through."""
    _delayq.set_max_level(logging.getLogger("delayq").getEffectiveLevel())


def set_log_level(level: Union[int, str]) -> None:
    """Sets the level of the logger `delayq` (`logging.DEBUG`, `"WARNING"`, ...) and has core
    forward what it lets through. Core's logs (a transfer task that keeps failing, a value
    given back) go to `logging` under `delayq.<module>`; core follows the effective level
    of `delayq` read at import and at each new `Client`: call this (rather than
    `setLevel`) to change it later."""
    logging.getLogger("delayq").setLevel(level)
    follow()


follow()
