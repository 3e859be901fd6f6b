"""Knobs the numpy examples share, for the tests of executor servers and batching.

KVFUZZ_EXAMPLE_DELAY=S: each call sleeps S seconds, as a GPU kernel's launch and synchronization
would take, so that jobs queue for a server (and cases of one shape meet in a batch).
KVFUZZ_EXAMPLE_FIRST_CALL_DELAY=S: the first request of each shape (dtype, page size, model: what
a real kernel compiles a variant for) in a process sleeps S seconds more, as a JIT compile of the
variant would (compile ahead: docs/gpu.md "Executor servers").
KVFUZZ_EXAMPLE_MODES=a,b: the modes the executor declares (default all): one mode makes a
campaign's cases of one shape batch often.
KVFUZZ_EXAMPLE_BREAK=name: a planted bug (each example lists its own; drop_last_key, a row reading
one key fewer than it should, is in every one).
"""
import json
import os
import time

BREAK = os.environ.get("KVFUZZ_EXAMPLE_BREAK", "")


def declared_modes():
    modes = os.environ.get("KVFUZZ_EXAMPLE_MODES", "all")
    return modes if modes == "all" else modes.split(",")


_BUILT = set()  # the shapes this process has "compiled" (KVFUZZ_EXAMPLE_FIRST_CALL_DELAY)


def kernel_delay(case):
    delay = float(os.environ.get("KVFUZZ_EXAMPLE_DELAY", "0"))
    first = float(os.environ.get("KVFUZZ_EXAMPLE_FIRST_CALL_DELAY", "0"))
    if first > 0:
        shape = json.dumps([case.dtype, case.page_size, case.model], sort_keys=True)
        if shape not in _BUILT:
            _BUILT.add(shape)
            delay += first
    if delay > 0:
        time.sleep(delay)


def cut_last_key(k_len):
    """The row's key count, one fewer under KVFUZZ_EXAMPLE_BREAK=drop_last_key (rows of 2 keys or more)."""
    return k_len - 1 if BREAK == "drop_last_key" and k_len > 1 else k_len
