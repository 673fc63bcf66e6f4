"""p4reduce controlplane: the P4Runtime controller (p4reduce-ctl)."""
