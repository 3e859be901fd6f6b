"""A test adapter for adapter_lanes_test.sh: the numpy page_table executor (its lanes included),
logging to the file LANES_TEST_LOG names: "<time> <pid> start" as a process starts (before its
imports), "<start> <end> <pid> call" after each call. LANES_TEST_HANG_ONCE=1: the campaign's first
call (the first to create LANES_TEST_LOG.hang) logs "<time> <pid> hang" and sleeps an hour, so on
a server with lanes one lane hangs while the others answer, and the hung case, re-run alone in a
fresh process, passes. LANES_TEST_CONTEXT_FAILS=1: each lane's context raises on entry.

    LANES_TEST_LOG=/tmp/calls KVFUZZ_EXAMPLE_DELAY=0.1 python3 fuzz/tests/lanes_test_adapter.py
"""
import os
import sys
import time

LOG = os.environ["LANES_TEST_LOG"]
with open(LOG, "a") as log:
    log.write(f"{time.time():.4f} {os.getpid()} start\n")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "adapters", "examples"))

import numpy_page_table  # noqa: E402
import kvfuzz_adapter as kv  # noqa: E402


def _first_call():
    if os.environ.get("LANES_TEST_HANG_ONCE") != "1":
        return False
    try:
        os.close(os.open(LOG + ".hang", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def run(case):
    if _first_call():
        with open(LOG, "a") as f:
            f.write(f"{time.time():.4f} {os.getpid()} hang\n")
        time.sleep(3600)
    start = time.time()
    result = numpy_page_table.run(case)
    with open(LOG, "a") as f:
        f.write(f"{start:.4f} {time.time():.4f} {os.getpid()} call\n")
    return result


class _Refused:
    def __enter__(self):
        raise RuntimeError("LANES_TEST_CONTEXT_FAILS: this lane's stream could not be made")

    def __exit__(self, *_):
        return False


run.kvfuzz_declaration = numpy_page_table.run.kvfuzz_declaration
run.kvfuzz_lanes = _Refused if os.environ.get("LANES_TEST_CONTEXT_FAILS") == "1" else numpy_page_table.run.kvfuzz_lanes

if __name__ == "__main__":
    kv.serve(run)
