"""Fixtures for hostlib tests."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

# tests/ (not a package) holds helpers shared with other folders: inprocess_switch
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
