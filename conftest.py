"""Applies the one skip rule (bmv2_tests/kinds.py `unmet`) to every test of the
repository: a test marked root, bmv2 or mininet -- by hand or through its target's
params -- is skipped with the reason before any of its fixtures start a switch."""

from __future__ import annotations

import pytest

from bmv2_tests.kinds import unmet_needs


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = unmet_needs(mark.name for mark in item.iter_markers())
    if reason:
        pytest.skip(reason)
