"""Statuses the server answers with, and the one place target errors become statuses.

Why one place: PI reports every failure of the target (bmv2) as UNKNOWN "Error when ...
target"; softswitch's target can also refuse what it does not implement (UNIMPLEMENTED),
and it can have bugs.  ``target_call`` tells these apart by exception *class* (the
contract in softswitch.interface), so a bug -- an AttributeError, a TypeError -- is
INTERNAL and logged, never mistaken for a missing feature.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, TypeVar

from google.rpc import code_pb2, status_pb2

from ..errors import SoftswitchError, UnsupportedConstruct

log = logging.getLogger("softswitch.p4runtime")

Code = code_pb2
T = TypeVar("T")


class P4RTError(Exception):
    """A failure with the canonical google.rpc code and message PI would produce."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_status(self) -> status_pb2.Status:
        return status_pb2.Status(code=self.code, message=self.message)


def invalid_p4_id() -> P4RTError:
    return P4RTError(Code.INVALID_ARGUMENT, "Invalid P4 id")


def no_pipeline() -> P4RTError:
    return P4RTError(Code.FAILED_PRECONDITION, "No forwarding pipeline config set for this device")


def target_call(error: str, fn: Callable[..., T], *args: Any, unsupported: str = "") -> T:
    """``fn(*args)`` on the target, its exceptions mapped by class.

    ``error`` is PI's message for a target failure ("Error when adding match entry to
    target"); the target's reason is appended in parentheses.  ``unsupported`` names the
    operation in the UNIMPLEMENTED message when the target cannot do it at all.
    """
    try:
        return fn(*args)
    except UnsupportedConstruct as exc:
        raise P4RTError(
            Code.UNIMPLEMENTED, f"softswitch does not support {unsupported or 'this'} ({exc})"
        ) from exc
    except SoftswitchError as exc:
        raise P4RTError(Code.UNKNOWN, f"{error} ({type(exc).__name__}: {exc})") from exc
    except Exception as exc:  # noqa: BLE001 - a bug in the target: say so, keep serving
        log.exception("softswitch bug: %s", error)
        raise P4RTError(
            Code.INTERNAL, f"{error} (softswitch bug: {type(exc).__name__}: {exc})"
        ) from exc
