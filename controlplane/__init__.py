"""p4reduce controlplane."""
