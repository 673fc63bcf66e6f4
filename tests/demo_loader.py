"""Imports mininet/demo.py: the mininet/ folder is not a package (a package named `mininet`
would hide Debian's Mininet), so its directory goes on sys.path and the module is `demo`.
Used by the system tests and by bench/ (suite.py, sparse_ratio.py through suite)."""

from __future__ import annotations

import sys
from pathlib import Path

MININET_DIR = Path(__file__).resolve().parent.parent / "mininet"


def load_demo():
    if str(MININET_DIR) not in sys.path:
        sys.path.insert(0, str(MININET_DIR))
    import demo

    return demo


def load_torch_ranks():
    """mininet/torch_ranks.py (torchrun for the Mininet topology), imported the same way."""
    load_demo()
    import torch_ranks

    return torch_ranks
