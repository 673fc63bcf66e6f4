"""Pure-Python interpreter for the bmv2 JSON that p4c-bm2-ss emits for v1model.

The JSON is compiled once (at load time) into generated Python functions; nothing walks the
JSON tree per packet.  See docs/softswitch.md for what is supported and what is refused.
"""
