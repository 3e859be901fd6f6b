"""What sglang's MLA kernels read, as adapters/sglang/mla_kernels.py records it and mla_backends.py
turns it into the `mla` plan: checked on hand-made calls, without sglang (torch and numpy only).

    .sglang/venv/bin/python adapters/tests/sglang_mla_kernels_test.py

- FlashInfer MLA under a CUDA graph: run() reads the schedule of the LAST module plan (what sglang's
  fast_mla_decode_plan hands it at replay) and the captured kv_indices buffer as the replay left it,
  not what the capture's plan() was given;
- a row whose kv_indptr + kv_len_arr reaches past kv_indices is an error, not a silent read;
- the ragged prefill's keys are the batch's new tokens, token t at out_cache_loc[t];
- FlashMLA: a kernel call handed other cache_seqlens than its get_mla_metadata schedule is a plan-run
  disagreement, the same ones are none.
Prints "SKIPPED: ..." and exits 0 where torch is missing; exits 1 naming a failed check.
"""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "sglang"), os.path.join(HERE, "..")]
try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(0)

import mla_backends  # noqa: E402
from mla_kernels import MlaRecorder  # noqa: E402

FAILURES = []


def check(what, ok):
    if not ok:
        FAILURES.append(what)


class Case:
    """The parts of a planner request the recorders and engine/mla_plan.py read."""

    def __init__(self, mode, bs, out_cache_loc, extend_lens=None):
        self.page_size, self.layers = 1, [{"pool": "full"}]
        self.batch = {"mode": mode, "bs": bs}
        tokens = len(out_cache_loc)
        self.arrays = {"positions": np.arange(tokens), "out_cache_loc": np.asarray(out_cache_loc),
                       "extend_seq_lens": np.asarray(extend_lens if extend_lens is not None else [1] * bs)}
        self.disagreements = []

    def array(self, name):
        return self.arrays[name]

    def disagree(self, argument, planned, ran, layer=-1, where=""):
        self.disagreements.append(argument)


def setup_of(case, mode):
    return types.SimpleNamespace(case=case, mode=mode, layers=[types.SimpleNamespace(layer_id=0)])


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


def graph_decode_reads_the_replay():
    setup = setup_of(Case("decode", 2, [0, 0]), "decode")
    rec = MlaRecorder(setup)
    qo, kv_indptr, kv_indices, kv_len = i32([0, 1, 2]), i32([0, 0, 0]), torch.zeros(16, dtype=torch.int32), i32([1, 1])
    w = rec.paged_wrapper(torch.empty(8), use_cuda_graph=True, qo_indptr=qo, kv_indptr=kv_indptr,
                          kv_indices=kv_indices, kv_len_arr=kv_len)
    # capture: plan() over the capture batch (fill lengths 1, the dummy slot 0)
    w.plan(i32([0, 1, 2]), i32([0, 1, 2]), i32([0, 0]), i32([1, 1]), 1, 512, 64, 1, False, 1.0, None, None)
    # replay, as fast_mla_decode_plan: the indices written in place, the module planned from host arrays
    kv_indices[:5] = i32([7, 8, 9, 3, 4])
    w._cached_module.plan(None, None, None, i32([0, 1, 2]), i32([0, 3, 5]), i32([3, 2]), 1, 512, False)
    rec.layer = 0
    w.run(torch.zeros(2, 1, 512), torch.zeros(2, 1, 64), None, None)
    meta, arrays = mla_backends.to_plan(setup, rec)
    check("graph decode: cache_seqlens are the replay's kv_len_arr [3, 2]",
          arrays["decode.cache_seqlens"].tolist() == [3, 2])
    table = arrays["decode.block_table"].reshape(2, -1)
    check("graph decode: row 0 reads slots 7, 8, 9 and row 1 slots 3, 4 of the captured buffer",
          table[0, :3].tolist() == [7, 8, 9] and table[1, :2].tolist() == [3, 4])
    check("graph decode: FlashInfer MLA's token-granular table is page size 1", meta["page_size"] == 1)


def row_past_indices_is_an_error():
    setup = setup_of(Case("decode", 1, [0]), "decode")
    rec = MlaRecorder(setup)
    w = rec.paged_wrapper(torch.empty(8))
    w.plan(i32([0, 1]), i32([0, 4]), i32([5, 6, 7]), i32([4]), 1, 512, 64, 1, False, 1.0, None, None)
    rec.layer = 0
    w.run(torch.zeros(1, 1, 512), torch.zeros(1, 1, 64), None, None)
    try:
        mla_backends.to_plan(setup, rec)
        check("a row of 4 keys over 3 kv_indices raises", False)
    except RuntimeError as e:
        check("the error names the row's read past kv_indices", "reads kv_indices[0:4] of 3" in str(e))


def ragged_reads_the_new_tokens():
    setup = setup_of(Case("extend", 2, [40, 41, 42, 17, 18], extend_lens=[3, 2]), "extend")
    rec = MlaRecorder(setup)
    w = rec.ragged_wrapper(torch.empty(8), "NHD")
    w.begin_forward(qo_indptr=i32([0, 3, 5]), kv_indptr=i32([0, 3, 5]), num_qo_heads=1, num_kv_heads=1,
                    head_dim_qk=192, head_dim_vo=128, causal=True)
    rec.layer = 0
    w.forward(torch.zeros(5, 1, 192), torch.zeros(5, 1, 192), torch.zeros(5, 1, 128), causal=True)
    meta, arrays = mla_backends.to_plan(setup, rec)
    check("ragged: the prefill path", meta["path"] == "prefill")
    check("ragged: row 0 reads slots 40..42, row 1 slots 17, 18",
          arrays["prefill.kv_indices"].tolist() == [40, 41, 42, 17, 18]
          and arrays["prefill.kv_indptr"].tolist() == [0, 3, 5])


def flashmla_schedule_against_the_call():
    for scheduled, ran, expected in (([5, 9], [5, 9], []), ([5, 9], [6, 10], ["cache_seqlens"])):
        case = Case("decode", 2, [0, 0])
        setup = setup_of(case, "decode")
        rec = MlaRecorder(setup)
        schedule, splits = rec.get_mla_metadata(i32(scheduled), 4, 1)
        rec.layer = 0
        rec.flash_mla_with_kvcache(torch.zeros(2, 1, 4, 576), torch.zeros(4, 64, 1, 576), i32([[1], [2]]), i32(ran),
                                   512, tile_scheduler_metadata=schedule, num_splits=splits, causal=True)
        mla_backends.to_plan(setup, rec)
        check(f"FlashMLA scheduled {scheduled}, ran {ran}: plan-run {expected}", case.disagreements == expected)


for test in (graph_decode_reads_the_replay, row_past_indices_is_an_error, ragged_reads_the_new_tokens,
             flashmla_schedule_against_the_call):
    test()
for failure in FAILURES:
    print("FAILED:", failure)
print(f"sglang MLA kernels test: {len(FAILURES)} failure(s)")
sys.exit(1 if FAILURES else 0)
