"""Packet-level tests of the P4 program, one suite for every target."""
