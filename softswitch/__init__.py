"""p4reduce softswitch."""
