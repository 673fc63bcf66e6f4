"""p4reduce's ground floor: what every component shares and none of them owns.

The wire format (`wire`), the P4Runtime codec and P4Info index (`p4rt`), the switch targets
and where their compiled programs are (`target`), the job model and its descriptor (`job`),
addresses (`addresses`), the controller's state file (`state`) and the fabric of several
switches (`fabric`). hostlib, controlplane
and softswitch import this package and not one another; it imports none of them (only the
standard library, and protobuf and the p4runtime protos for `p4rt`), so each of them
loads it without the others' dependencies (numpy, scapy, gRPC sessions).
"""

from importlib import metadata

DISTRIBUTION = "p4reduce"


def version() -> str:
    """p4reduce's version, as installed: pyproject.toml is the one place it is written, and
    `p4reduce-ctl --version` and `p4reduce-softswitch --version` print it from here."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return f"unknown ({DISTRIBUTION} is not installed: make install, or pip install it)"
