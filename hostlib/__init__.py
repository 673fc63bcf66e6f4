"""p4reduce hostlib."""
