"""The committed p4c outputs belong to the committed P4 sources, and agree with the codec."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path


from hostlib import protocol

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "p4src" / "v1model" / "p4reduce.p4"
BUILD = REPO / "p4src" / "build"


def _compile_module():
    spec = importlib.util.spec_from_file_location("p4src_compile", REPO / "p4src" / "compile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_outputs_match_sources():
    problems = _compile_module().check_manifest(PROGRAM, BUILD)
    assert not problems, "p4src/build is stale -- recompile p4src:\n" + "\n".join(problems)


def test_manifest_detects_an_edited_source(tmp_path):
    compile_mod = _compile_module()
    import shutil
    src = tmp_path / "p4src"
    shutil.copytree(REPO / "p4src", src, ignore=shutil.ignore_patterns("__pycache__"))
    program = src / "v1model" / PROGRAM.name
    assert compile_mod.check_manifest(program, src / "build") == []
    body = src / "common" / "bodies" / "value_aggregation.p4"
    body.write_text(body.read_text() + "\n/* edit */\n")
    problems = compile_mod.check_manifest(program, src / "build")
    assert any("common/bodies/value_aggregation.p4 changed" in p for p in problems)
    assert any("recompile" in p for p in problems)


def test_p4_header_is_the_codec_field_table():
    program = json.loads((BUILD / "p4reduce.json").read_text())
    types = {t["name"]: t for t in program["header_types"]}
    p4_fields = [(name, bits) for name, bits, *_ in types["p4reduce_t"]["fields"]]
    assert p4_fields == [(f.name, f.bits) for f in protocol.FIELDS]
    lanes = types["values_t"]["fields"]
    assert len(lanes) == protocol.LANES and all(bits == 32 for _, bits, *_ in lanes)
    for p4_type, fields in (("fingerprint_t", protocol.FINGERPRINT_FIELDS),
                            ("round_status_t", protocol.STATUS_FIELDS)):
        assert [(n, b) for n, b, *_ in types[p4_type]["fields"]] == \
            [(f.name, f.bits) for f in fields], p4_type


def test_p4_constants_match_the_codec():
    text = (REPO / "p4src" / "common" / "constants.p4").read_text()
    consts = {m[0]: int(m[1], 0) for m in
              re.findall(r"const bit<\d+>\s+(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+);", text)}
    assert consts["P4REDUCE_UDP_BASE"] == protocol.UDP_PORT_BASE
    assert consts["P4REDUCE_UDP_MASK"] == protocol.UDP_PORT_MASK
    assert consts["END_OF_STREAM"] == protocol.END_OF_STREAM
    assert consts["PROTOCOL_VERSION"] == protocol.PROTOCOL_VERSION
    for msg in protocol.MsgType:
        assert consts[f"MSG_{msg.name}"] == msg.value, msg
    for flag in protocol.Flag:
        assert consts[f"FLAG_{flag.name}"] == flag.value, flag
    assert f"#define LANES {protocol.LANES}" in text
    assert f"#define P4R_HEADER_BYTES {protocol.HEADER_BYTES}" in text
    assert consts["EPOCH_LOST"] == protocol.MAX_EPOCH + 1
