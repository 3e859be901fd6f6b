"""Arrays handed to user code inside guard zones, checked after the call.

Every input array lives in a larger buffer whose extra bytes before and after hold a sentinel; a
kernel that writes past an array (through a raw pointer, ctypes or a device copy) overwrites them.
After the call every guard must be intact and every input byte unchanged: only the outputs may be
written.
"""
import numpy as np

from kvfuzz_adapter import npy

GUARD_BYTES = 256
SENTINEL = 0xA5


class Guarded:
    def __init__(self):
        self._arrays = {}  # name -> (buffer, view, copy of the view's bytes)

    def load(self, name, path):
        return self.hold(name, npy.load(path))

    def hold(self, name, src):
        """An array built here (a pool materialized from its sparse parts), guarded like a loaded one."""
        buf = np.empty(src.nbytes + 2 * GUARD_BYTES, dtype=np.uint8)
        buf[:GUARD_BYTES] = SENTINEL
        buf[GUARD_BYTES + src.nbytes:] = SENTINEL
        view = buf[GUARD_BYTES:GUARD_BYTES + src.nbytes].view(src.dtype).reshape(src.shape)
        view[...] = src
        self._arrays[name] = (buf, view, src)
        return view

    def violations(self):
        """What user code wrote that it must not have: guard zones and inputs."""
        found = []
        for name, (buf, view, original) in self._arrays.items():
            if np.any(buf[:GUARD_BYTES] != SENTINEL):
                found.append(f"{name}: the guard zone before the array was overwritten")
            if np.any(buf[GUARD_BYTES + original.nbytes:] != SENTINEL):
                found.append(f"{name}: the guard zone after the array was overwritten")
            if view.tobytes() != original.tobytes():
                changed = int(np.count_nonzero(view.view(np.uint8) != original.view(np.uint8)))
                found.append(f"{name}: an input was written ({changed} bytes changed)")
        return found
