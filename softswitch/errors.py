"""Exceptions shared by the interpreter and the P4Runtime server.

The server maps them to gRPC status codes, so each control-plane failure mode has its own
class instead of a generic ValueError.
"""

from __future__ import annotations


class SoftswitchError(Exception):
    """Base class of every error the softswitch raises on purpose."""


class PipelineError(SoftswitchError):
    """The bmv2 JSON is malformed or inconsistent (the old pipeline stays loaded)."""


class UnsupportedConstruct(PipelineError):
    """The JSON uses something the interpreter does not implement exactly.

    Raised at load time, never per packet: we refuse instead of approximating.  The message
    names the construct and where it appears (e.g. 'primitive "execute_meter" in action X').
    """

    def __init__(self, construct: str, where: str) -> None:
        super().__init__(f"unsupported {construct} in {where}")
        self.construct = construct
        self.where = where


class NotFound(SoftswitchError):
    """Unknown table / action / entry / register / counter / group."""


class AlreadyExists(SoftswitchError):
    """An entry with the same match key (and priority) is already installed."""


class InvalidArgument(SoftswitchError):
    """Bad widths, wrong parameter count, action not allowed for the table, const table..."""
