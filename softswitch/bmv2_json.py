"""A pipeline config's bmv2 JSON, parsed once per config's bytes.

Two layers read the same document on every SetForwardingPipelineConfig: the P4Runtime
layer binds the P4Info to it (p4rt.binding) and the interpreter generates the program
from it (interp.codegen). A switch receives the same bytes again for every fresh
pipeline, and p4reduce's JSON is 11 MB: one parse, shared, is most of a push saved."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=4)
def document(raw: bytes) -> Any:
    """`raw` (UTF-8 JSON) parsed, remembered by its bytes. Its readers share it and never
    change it. Raises UnicodeDecodeError or json.JSONDecodeError, each caller saying it in
    its own terms; a failure is not remembered and fails again."""
    return json.loads(raw.decode("utf-8"))
