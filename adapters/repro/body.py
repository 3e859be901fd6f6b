"""A reproducer of a kvfuzz finding, written by `kvfuzz repro` (kvfuzz's docs/repro.md).

BUNDLE below is the batch, one field a line: each row (a request) with its columns as runs
[first slot, first position, count] and its queries, each with the keys it should read in each
layer ("visible": column ranges of its row, from logical positions alone); the model's layers;
the kernel metadata the planner built ("plan") or what the engine's scheduler hands it
("engine_request"). The kernel's call and the comparison are the harness's main(), in
kvfuzz_repro_<target>.py beside this file (written with it; numpy, torch and the package under
test, not kvfuzz). Exit 1: a query read other keys than it should or its output is off (or the
call raised); 0: none; 2: it cannot run here; 3: the script failed. Last line: RESULT {json}.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvfuzz_repro_harness as kv  # kvfuzz repro: harness

BUNDLE = None  # kvfuzz repro

if __name__ == "__main__":
    kv.BUNDLE = BUNDLE
    kv.run_main(kv.main)
