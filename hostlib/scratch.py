"""Reusable buffers for the temporaries of a call's turns.

A wide-block job's turn quantizes, frames, parses and dequantizes a few rows of K values
each; every such temporary freshly allocated is, once it is large, memory the kernel maps
and zeroes again (a page fault per 4 KiB, on the ranks' shared cores). A `Scratch` keeps
one buffer per purpose and hands out views of it, grown when a larger batch needs one, so
after the first turns of a job the data path reuses pages it already has. One Scratch
belongs to one Worker (its engines, one call at a time) and is never shared between
threads or Workers: a view is valid until the next `take` of the same name.
"""

from __future__ import annotations

import math

import numpy as np


class Scratch:
    """Named buffers reused across turns and calls (views valid until the name's next take)."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}
        # the last view of each name by its (shape, dtype): a turn's takes are mostly the
        # previous turn's again, and one dict look-up is cheaper than making a view
        self._views: dict[str, tuple[tuple, np.ndarray]] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An array of `shape` and `dtype` over the buffer `name` (its bytes: what earlier
        takes left, zeros in a new buffer), grown (to at least twice its size, so a slowly
        growing batch reallocates rarely) when it is too small."""
        key = (shape, dtype)
        last = self._views.get(name)
        if last is not None and last[0] == key:
            return last[1]
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        buf = self._buffers.get(name)
        if buf is None or buf.size < nbytes:
            # zeroed (free for fresh pages): a view's bytes are never arbitrary memory,
            # so whatever a user leaves unwritten (a frame's bytes past its end) is
            # zeros or an earlier take's
            buf = np.zeros(max(nbytes, 0 if buf is None else 2 * buf.size), np.uint8)
            self._buffers[name] = buf
        view = buf[:nbytes].view(dtype).reshape(shape)
        self._views[name] = (key, view)
        return view

    def nbytes(self) -> int:
        """Bytes held, all buffers."""
        return sum(b.size for b in self._buffers.values())


def take(scratch: Scratch | None, name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """`scratch`'s buffer `name` as an array of `shape` and `dtype` (Scratch.take), or a
    new uninitialised one without a Scratch: the one choice every temporary of the data
    path makes, written once."""
    return np.empty(shape, dtype) if scratch is None else scratch.take(name, shape, dtype)
