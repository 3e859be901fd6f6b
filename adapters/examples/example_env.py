"""Knobs the numpy examples share, for the tests of executor servers and batching.

KVFUZZ_EXAMPLE_DELAY=S: each call sleeps S seconds, as a GPU kernel's launch and synchronization
would take, so that jobs queue for a server (and cases of one shape meet in a batch).
KVFUZZ_EXAMPLE_MODES=a,b: the modes the executor declares (default all): one mode makes a
campaign's cases of one shape batch often.
"""
import os
import time


def declared_modes():
    modes = os.environ.get("KVFUZZ_EXAMPLE_MODES", "all")
    return modes if modes == "all" else modes.split(",")


def kernel_delay():
    delay = float(os.environ.get("KVFUZZ_EXAMPLE_DELAY", "0"))
    if delay > 0:
        time.sleep(delay)
