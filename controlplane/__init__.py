"""p4reduce controlplane."""

from importlib import metadata

DISTRIBUTION = "p4reduce"


def version() -> str:
    """p4reduce's version, as installed: pyproject.toml is the one place it is written, and
    `p4reduce-ctl --version` and `p4reduce-softswitch --version` print it from here."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return f"unknown ({DISTRIBUTION} is not installed: make install, or pip install it)"
