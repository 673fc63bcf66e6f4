"""Loads mininet/demo.py by path: the mininet/ folder is not a package (a package named
`mininet` would hide Debian's Mininet)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_demo():
    name = "p4reduce_demo"
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(REPO / "mininet"))
    spec = importlib.util.spec_from_file_location(name, REPO / "mininet" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module
