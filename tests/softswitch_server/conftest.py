"""Fixtures for the softswitch server tests: a fresh in-process switch + gRPC server per test
(real softswitch.switch.Switch, real p4c outputs in ./p4), and p4runtime-shell sessions."""

from __future__ import annotations

import pytest

from p4reduce.p4rt import P4InfoIndex

from .helpers import Harness, RawClient, load_p4info


@pytest.fixture
def harness():
    h = Harness.start()
    yield h
    h.stop()


@pytest.fixture(scope="session")
def p4info():
    return load_p4info()


@pytest.fixture(scope="session")
def ids(p4info):
    return P4InfoIndex.from_proto(p4info)


@pytest.fixture
def raw(harness):
    """A raw client that is primary (election id (0, 1)); closed after the test."""
    c = RawClient(harness.addr)
    c.arbitrate((0, 1))
    yield c
    c.close()


@pytest.fixture
def loaded(harness, raw, p4info):
    """The test program pushed by the raw primary client."""
    from .helpers import device_config

    raw.set_pipeline(p4info, device_config())
    return harness
