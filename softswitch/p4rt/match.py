"""Match keys in their three forms, and the conversions between them.

* P4Runtime: ``TableEntry.match`` (P4Info field ids, byte strings, don't-care omitted);
* normalised (``state.MatchKey``): one item per P4Info field in P4Info order, what PI's
  entry store is keyed by;
* the target's: one item per JSON key field in JSON order (``interface.Match``).

``match_key`` applies PI's checks (construct_match_key) with its messages; ``fill_match``
is PI's parse_match_key for reads.
"""

from __future__ import annotations

from typing import Any

from p4.v1 import p4runtime_pb2

from p4reduce.p4rt import CodecError, MatchType, TableInfo, decode, encode, nbytes

from ..interface import Entry, Match
from .state import DEFAULT_KEY, MatchKey, Pipeline
from .status import Code, P4RTError


def _invalid(message: str) -> P4RTError:
    return P4RTError(Code.INVALID_ARGUMENT, message)


def match_key(pl: Pipeline, te: p4runtime_pb2.TableEntry) -> MatchKey:
    """PI construct_match_key: validate and normalise the match of a TableEntry."""
    if te.is_default_action:
        if len(te.match) > 0:
            raise _invalid("Non-empty key for default entry")
        if te.priority != 0:
            raise _invalid("Non-zero priority for default entry")
        return DEFAULT_KEY
    t = pl.info.tables[te.table_id]
    if len(te.match) > len(t.match_fields):
        raise _invalid("Too many fields in match key")
    fields: list[Any] = []
    matched = 0
    try:
        for mf_info in t.match_fields:
            mf = next((m for m in te.match if m.field_id == mf_info.id), None)
            if mf is None:
                fields.append(_dont_care(mf_info.match_type, mf_info.bitwidth))
                continue
            matched += 1
            fields.append(_field(mf, mf_info.match_type, mf_info.bitwidth))
    except CodecError as exc:
        raise _invalid(str(exc)) from None
    if matched != len(te.match):
        raise _invalid("Unknown field in match key")
    need = t.needs_priority
    if not need and te.priority > 0:
        raise _invalid("Non-zero priority for non-ternary match")
    if need and te.priority == 0:
        raise _invalid("Zero priority for ternary match")
    return tuple(fields), (te.priority if need else 0)


def _dont_care(mt: int, w: int) -> Any:
    """The normalised value of an omitted field (only non-exact fields may be omitted)."""
    if mt in (MatchType.LPM, MatchType.TERNARY):
        return (0, 0)
    if mt == MatchType.OPTIONAL:
        return (0, True)
    if mt == MatchType.RANGE:
        return (0, (1 << w) - 1)
    raise _invalid("Missing non-ternary field in match key")


def _field(mf: p4runtime_pb2.FieldMatch, mt: int, w: int) -> Any:
    kind = mf.WhichOneof("field_match_type")
    if mt == MatchType.EXACT:
        if kind != "exact":
            raise _invalid("Invalid match type")
        return decode(mf.exact.value, w)
    if mt == MatchType.LPM:
        if kind != "lpm":
            raise _invalid("Invalid match type")
        value = decode(mf.lpm.value, w)
        plen = mf.lpm.prefix_len
        if plen < 0:
            raise _invalid("Prefix length cannot be < 0")
        if plen > w:
            raise _invalid("Prefix length cannot be > bitwidth")
        if plen == 0:
            raise _invalid(
                "Invalid reprsentation of 'don't care' LPM match, omit match "
                "field instead of using a prefix length of 0"
            )
        # PI counts the prefix from the top of the byte-padded value, as bmv2 does
        # (common.cpp check_prefix_trailing_zeros).
        trailing = nbytes(w) * 8 - plen
        if trailing > 0 and value & ((1 << trailing) - 1):
            raise _invalid("Invalid LPM value, incorrect number of trailing zeros")
        return (value, plen)
    if mt == MatchType.TERNARY:
        if kind != "ternary":
            raise _invalid("Invalid match type")
        value = decode(mf.ternary.value, w)
        mask = decode(mf.ternary.mask, w)
        if not any(mf.ternary.mask):
            raise _invalid(
                "Invalid representation of 'don't care' ternary match, omit "
                "match field instead of using 0 mask"
            )
        if value & mask != value:
            raise _invalid("Invalid ternary value, make sure value & mask == value")
        return (value, mask)
    if mt == MatchType.RANGE:
        if kind != "range":
            raise _invalid("Invalid match type")
        lo = decode(mf.range.low, w)
        hi = decode(mf.range.high, w)
        raw_lo, raw_hi = bytes(mf.range.low), bytes(mf.range.high)
        # PI judges "don't care" on the raw strings: low all zero and high all 0xff of the
        # same length (match_key_helpers.cpp).
        if not any(raw_lo) and raw_hi == b"\xff" * len(raw_lo):
            raise _invalid(
                "Invalid representation of 'don't care' range match, omit match "
                "field instead of using low=0 and high=2**bitwidth-1"
            )
        if lo > hi:
            raise _invalid("Invalid range value, make sure low <= high")
        return (lo, hi)
    # OPTIONAL
    if kind != "optional":
        raise _invalid("Invalid match type")
    return (decode(mf.optional.value, w), False)


def to_switch_match(pl: Pipeline, t: TableInfo, key: MatchKey) -> Match:
    """Normalised key (P4Info order) -> the target's match list (JSON key order)."""
    fields, _ = key
    out: Match = []
    binding = pl.binding.tables[t.id]
    for i, json_type in zip(binding.json_key_order, binding.json_match_types):
        f = fields[i]
        mf = t.match_fields[i]
        if mf.match_type == MatchType.OPTIONAL:
            if json_type == "ternary":  # how p4c-bm2-ss writes an optional key
                out.append((0, 0) if f[1] else (f[0], (1 << mf.bitwidth) - 1))
            else:
                out.append(None if f[1] else f[0])
        else:
            out.append(f)
    return out


def switch_priority(t: TableInfo, key: MatchKey) -> int | None:
    """P4Runtime priority (higher wins) for the target, None where the table has none."""
    return key[1] if t.needs_priority else None


def from_switch_entry(pl: Pipeline, t: TableInfo, entry: Entry) -> MatchKey:
    """A target Entry (JSON key order, target priority) -> normalised key."""
    order = pl.binding.tables[t.id].json_key_order
    fields: list[Any] = [None] * len(t.match_fields)
    for j, i in enumerate(order):
        v = entry.match[j]
        mt = t.match_fields[i].match_type
        if mt == MatchType.EXACT:
            fields[i] = int(v)
        elif mt == MatchType.OPTIONAL:
            if isinstance(v, (tuple, list)):  # JSON ternary: mask 0 is the wildcard
                fields[i] = (0, True) if int(v[1]) == 0 else (int(v[0]), False)
            else:
                fields[i] = (0, True) if v is None else (int(v), False)
        else:
            fields[i] = (int(v[0]), int(v[1]))
    prio = entry.priority if t.needs_priority and entry.priority is not None else 0
    return tuple(fields), int(prio)


def fill_match(t: TableInfo, key: MatchKey, te: p4runtime_pb2.TableEntry) -> None:
    """PI parse_match_key: don't-care fields are omitted, values canonical."""
    fields, prio = key
    if prio > 0:
        te.priority = prio
    for mf_info, f in zip(t.match_fields, fields):
        mt = mf_info.match_type
        if mt == MatchType.EXACT:
            te.match.add(field_id=mf_info.id).exact.value = encode(f)
        elif mt == MatchType.LPM:
            if f[1] == 0:
                continue
            m = te.match.add(field_id=mf_info.id)
            m.lpm.value = encode(f[0])
            m.lpm.prefix_len = f[1]
        elif mt == MatchType.TERNARY:
            if f[1] == 0:
                continue
            m = te.match.add(field_id=mf_info.id)
            m.ternary.value = encode(f[0])
            m.ternary.mask = encode(f[1])
        elif mt == MatchType.RANGE:
            # PI omits the field only when it spans the whole byte-padded range.
            if f[0] == 0 and f[1] == (1 << (nbytes(mf_info.bitwidth) * 8)) - 1:
                continue
            m = te.match.add(field_id=mf_info.id)
            m.range.low = encode(f[0])
            m.range.high = encode(f[1])
        else:
            if f[1]:
                continue
            te.match.add(field_id=mf_info.id).optional.value = encode(f[0])
