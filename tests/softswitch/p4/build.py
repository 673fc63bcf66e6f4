"""Recompile the interpreter's P4 test programs with p4c-bm2-ss and rewrite MANIFEST.json.

    python tests/softswitch/p4/build.py [--p4c p4c-bm2-ss]

The outputs are committed so that the tests run without p4c; test_p4_manifest.py fails with
'recompile tests/softswitch/p4' when a source no longer matches its recorded sha256.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--p4c", default="p4c-bm2-ss")
    args = ap.parse_args()
    ver = subprocess.run([args.p4c, "--version"], capture_output=True, text=True, check=True)
    version = (ver.stdout + ver.stderr).strip()   # p4c prints its version on stderr
    programs = {}
    for src in sorted(HERE.glob("*.p4")):
        out_json = src.with_suffix(".json")
        out_info = src.with_suffix(".p4info.txtpb")
        cmd = [args.p4c, "--arch", "v1model", "--p4runtime-files", str(out_info),
               "-o", str(out_json), str(src)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout, r.stderr, file=sys.stderr)
            print(f"p4c failed on {src.name}", file=sys.stderr)
            return 1
        programs[src.name] = {"sha256": sha256(src), "json": out_json.name,
                              "json_sha256": sha256(out_json), "p4info": out_info.name}
        print(f"compiled {src.name}")
    manifest = {"p4c": args.p4c, "p4c_version": version,
                "command": "p4c-bm2-ss --arch v1model --p4runtime-files X.p4info.txtpb -o X.json X.p4",
                "programs": programs}
    (HERE / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
