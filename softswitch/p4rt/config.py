"""Forwarding pipeline configs: importing, building, reading back, and the state a
RECONCILE_AND_COMMIT carries over.  The state machine of Set (VERIFY, VERIFY_AND_SAVE,
COMMIT, ...) is ``Device.set_pipeline``; this module is what it calls.
"""

from __future__ import annotations

import logging
from typing import Callable

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import P4InfoError, P4InfoIndex

from ..errors import PipelineError, UnsupportedConstruct
from ..interface import SwitchTarget
from .binding import bind_to_json, parse_device_config
from .pre import BmPre
from .state import DEFAULT_KEY, EntryMeta, Pipeline
from .status import Code, P4RTError

log = logging.getLogger("softswitch.p4runtime")

GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest


def import_p4info(p4info: p4info_pb2.P4Info) -> P4InfoIndex:
    """PI's P4Info import, with its error."""
    try:
        return P4InfoIndex.from_proto(p4info)
    except P4InfoError as exc:
        raise P4RTError(Code.UNKNOWN, f"Error when importing p4info: {exc}") from None


def build_pipeline(
    info: P4InfoIndex,
    config: p4runtime_pb2.ForwardingPipelineConfig,
    new_target: Callable[[], SwitchTarget],
    pre: BmPre,
) -> Pipeline:
    """Parse, cross-check and load a new program into a fresh target.

    bmv2 1.15.5 gives no usable answer for a bad JSON (a syntax error throws out of
    jsoncpp through PI and kills the process; a structural error is ignored by
    Context::load_new_config and a half-built config is swapped in), so the codes here
    follow the P4Runtime spec: INVALID_ARGUMENT for a config that is wrong,
    UNIMPLEMENTED for one softswitch cannot run.
    """
    raw = bytes(config.p4_device_config)
    try:
        doc = parse_device_config(raw)
    except ValueError as exc:
        raise P4RTError(Code.INVALID_ARGUMENT, str(exc)) from None
    # The interpreter validates the JSON's structure (with the better messages) before
    # the P4Info is bound to it.
    switch = new_target()
    try:
        switch.load_pipeline(raw)
    except UnsupportedConstruct as exc:
        raise P4RTError(Code.UNIMPLEMENTED, f"softswitch cannot run this program: {exc}") from None
    except PipelineError as exc:
        raise P4RTError(Code.INVALID_ARGUMENT, f"invalid bmv2 JSON: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a bug in the target: say so, keep serving
        log.exception("Switch.load_pipeline failed unexpectedly")
        raise P4RTError(
            Code.INTERNAL, f"softswitch failed to load the program: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        binding = bind_to_json(info, doc)
    except ValueError as exc:
        raise P4RTError(Code.INVALID_ARGUMENT, str(exc)) from None
    pre.restore(switch)
    stored = p4runtime_pb2.ForwardingPipelineConfig()
    stored.CopyFrom(config)
    pl = Pipeline(info=info, config=stored, switch=switch, binding=binding)
    for t_id in info.tables:
        # PI adds every table's default entry to its store at p4_change.
        pl.entries[t_id] = {DEFAULT_KEY: EntryMeta()}
    return pl


def get_config(pl: Pipeline | None, response_type: int) -> p4runtime_pb2.ForwardingPipelineConfig:
    """PI DeviceMgr::pipeline_config_get: the config as it was sent, cut to the parts
    asked for."""
    out = p4runtime_pb2.ForwardingPipelineConfig()
    if pl is None:
        return out  # PI: no config set yet -> an empty config, OK
    cfg = pl.config
    if response_type == GetType.ALL:
        out.p4info.CopyFrom(cfg.p4info)
        out.p4_device_config = cfg.p4_device_config
    elif response_type == GetType.COOKIE_ONLY:
        pass
    elif response_type == GetType.P4INFO_AND_COOKIE:
        out.p4info.CopyFrom(cfg.p4info)
    elif response_type == GetType.DEVICE_CONFIG_AND_COOKIE:
        out.p4_device_config = cfg.p4_device_config
    else:
        raise P4RTError(
            Code.INVALID_ARGUMENT, "Invalid response_type in GetForwardingPipelineConfigRequest"
        )
    if cfg.HasField("cookie"):
        out.cookie.CopyFrom(cfg.cookie)
    return out


def forwarding_state_reads() -> list[p4runtime_pb2.Entity]:
    """PI save_forwarding_state reads action profiles, tables, meters, counters (in that
    order), so RECONCILE_AND_COMMIT can replay them as INSERTs into the new pipeline."""
    out = []
    for kind in (
        "action_profile_member",
        "action_profile_group",
        "table_entry",
        "meter_entry",
        "counter_entry",
    ):
        ent = p4runtime_pb2.Entity()
        getattr(ent, kind).SetInParent()
        out.append(ent)
    return out
