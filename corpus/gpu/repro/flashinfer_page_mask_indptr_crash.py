"""A standalone reproducer written by `kvfuzz repro` (kvfuzz's docs/repro.md).

It needs numpy, torch and the package under test (see the part after the data), not kvfuzz.
The batch is data (BUNDLE below: each request's cached and new tokens with the slot and
position of each, each query's token, position and structural keys, the layers' windows or
chunks, the seed); the values come from numpy's generator on that seed. The expected output
is computed here in float64 from logical positions alone: a query at position P sees the keys
of its own request at positions max(0, P - W) .. P (sliding window of radius W), the keys of
its chunk (chunked attention) or every earlier key (full), spec-decode drafts only their tree
ancestors. A probe run (Q = K = 0, so every key the kernel reads weighs the same, and V one-hot
per slot) shows which keys each query did read.

Exit status: 1 the bug is there (a query reads other keys, its output is off, or the kernel
raises), 0 it is not, 2 it cannot run here (a package or device is missing), 3 this script
failed (a traceback outside the kernel call). The last line, `RESULT {json}`, says the same for
machines (kvfuzz's ci/gpu_pair_table.py): exit, device, queries, wrong, max_error, the worst
query's keys (should read / read), what raised or why it cannot run.
"""
# This first part is adapters/repro/common.py of kvfuzz: the data, the values, the expected
# output and the verdict. The part after it (the target's template) calls the kernel.
import argparse
import json
import os
import sys

import numpy as np

BUNDLE = json.loads(r'''{"backend":"flashinfer_paged:flashinfer_paged_csr","bs":2,"case":{"batch":{"device_sms":0,"entries":[{"extend_len":13,"request":2},{"extend_len":51,"request":0}],"graph_bs":0,"kv_splits":1,"mode":"extend"},"cache":{"full_pages":10,"max_context_len":100,"max_requests":7,"page_size":16,"sort_free":false,"swa_pages":10},"history":[{"op":"admit","request":3},{"op":"free","request":3},{"op":"admit","request":0},{"op":"admit","request":1},{"op":"admit","request":2},{"len":49,"op":"extend","request":0},{"len":18,"op":"extend","request":1}],"model":{"head_dim":4,"kv_heads":2,"layers":[{"chunk":32,"kind":"chunked"},{"kind":"sliding_window","window":75},{"kind":"sliding_window","window":1}],"mla":false,"q_heads":8,"sm_scale":0.5,"softcap":0.0,"v_head_dim":16},"values":{"dtype":"bf16","fill":"random","poison":true,"seed":4419201641269174433},"version":2},"dtype":"bf16","engine_request":null,"executor":"flashinfer_paged_csr","finding":{"case":"corpus/gpu/flashinfer_mask_indptr_crash.json","replay":"kvfuzz check corpus/gpu/flashinfer_mask_indptr_crash.json --backend flashinfer_paged:flashinfer_paged_csr"},"full_to_swa":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89,90,91,92,93,94,95,96,97,0,0,0,0,0,0,0,0,0,0,0,0,0,0,112,113,114,115,116,117,118,119,120,121,122,123,124,0,0,0,128,129,130,131,132,133,134,135,136,137,138,139,140,141,142,143,144,145,146,147,148,149,150,151,152,153,154,155,156,157,158,159,160,161,162,163,0,0,0,0,0,0,0,0,0,0,0,0,-1],"hybrid":true,"kvfuzz_repro":1,"mode":"extend","model":{"head_dim":4,"kv_heads":2,"layers":[{"chunk":32,"kind":"chunked","window":0},{"chunk":0,"kind":"sliding_window","window":75},{"chunk":0,"kind":"sliding_window","window":1}],"mla":false,"q_heads":8,"sm_scale":0.5,"softcap":0.0,"v_head_dim":16},"num_tokens":64,"out_cache_loc":[112,113,114,115,116,117,118,119,120,121,122,123,124,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,128,129,130,131,132,133,134,135,136,137,138,139,140,141,142,143,144,145,146,147,148,149,150,151,152,153,154,155,156,157,158,159,160,161,162,163],"page_size":16,"plan":{"arrays":{"groups.0.calls.0.custom_mask":[1,0,0,0,0,0,0,0,0,0,0,0,0,1,1,0,0,0,0,0,0,0,0,0,0,0,1,1,1,0,0,0,0,0,0,0,0,0,0,1,1,1,1,0,0,0,0,0,0,0,0,0,1,1,1,1,1,0,0,0,0,0,0,0,0,1,1,1,1,1,1,0,0,0,0,0,0,0,1,1,1,1,1,1,1,0,0,0,0,0,0,1,1,1,1,1,1,1,1,0,0,0,0,0,1,1,1,1,1,1,1,1,1,0,0,0,0,1,1,1,1,1,1,1,1,1,1,0,0,0,1,1,1,1,1,1,1,1,1,1,1,0,0,1,1,1,1,1,1,1,1,1,1,1,1,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1],"groups.0.calls.0.kv_indices":[],"groups.0.calls.0.kv_indptr":[0,13,64],"groups.0.calls.0.kv_last_page_len":[],"groups.0.calls.0.mask_indptr":[0,169,2770],"groups.0.calls.0.qo_indptr":[0,13,64],"groups.0.calls.1.custom_mask":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"groups.0.calls.1.kv_indices":[3,4],"groups.0.calls.1.kv_indptr":[0,0,2],"groups.0.calls.1.kv_last_page_len":[1,1],"groups.0.calls.1.mask_indptr":[0,0,867],"groups.0.calls.1.qo_indptr":[0,13,64],"groups.1.calls.0.custom_mask":[],"groups.1.calls.0.kv_indices":[],"groups.1.calls.0.kv_indptr":[0,13,64],"groups.1.calls.0.kv_last_page_len":[],"groups.1.calls.0.mask_indptr":[],"groups.1.calls.0.qo_indptr":[0,13,64],"groups.1.calls.1.custom_mask":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"groups.1.calls.1.kv_indices":[1,2,3,4],"groups.1.calls.1.kv_indptr":[0,0,4],"groups.1.calls.1.kv_last_page_len":[1,1],"groups.1.calls.1.mask_indptr":[0,0,2499],"groups.1.calls.1.qo_indptr":[0,13,64],"groups.2.calls.0.custom_mask":[],"groups.2.calls.0.kv_indices":[],"groups.2.calls.0.kv_indptr":[0,13,64],"groups.2.calls.0.kv_last_page_len":[],"groups.2.calls.0.mask_indptr":[],"groups.2.calls.0.qo_indptr":[0,13,64],"groups.2.calls.1.custom_mask":[1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"groups.2.calls.1.kv_indices":[4],"groups.2.calls.1.kv_indptr":[0,0,1],"groups.2.calls.1.kv_last_page_len":[1,1],"groups.2.calls.1.mask_indptr":[0,0,51],"groups.2.calls.1.qo_indptr":[0,13,64]},"family":"paged_csr","meta":{"group_of_layer":[0,1,2],"groups":[{"calls":[{"causal":false,"empty_padded_rows":false,"has_mask":true,"page_size":16,"role":"ragged","rows":2,"rows_per_batch_row":1,"window_left":-1},{"causal":false,"empty_padded_rows":false,"has_mask":true,"page_size":16,"role":"prefix","rows":2,"rows_per_batch_row":1,"window_left":-1}],"layer":{"chunk":32,"kind":"chunked","window":0}},{"calls":[{"causal":true,"empty_padded_rows":false,"has_mask":false,"page_size":16,"role":"ragged","rows":2,"rows_per_batch_row":1,"window_left":75},{"causal":false,"empty_padded_rows":false,"has_mask":true,"page_size":16,"role":"prefix","rows":2,"rows_per_batch_row":1,"window_left":-1}],"layer":{"chunk":0,"kind":"sliding_window","window":75}},{"calls":[{"causal":true,"empty_padded_rows":false,"has_mask":false,"page_size":16,"role":"ragged","rows":2,"rows_per_batch_row":1,"window_left":1},{"causal":false,"empty_padded_rows":false,"has_mask":true,"page_size":16,"role":"prefix","rows":2,"rows_per_batch_row":1,"window_left":-1}],"layer":{"chunk":0,"kind":"sliding_window","window":1}}],"merge":"flashinfer_base2","page_size":16}},"planner":"flashinfer_paged","pool_slots":176,"positions":[0,1,2,3,4,5,6,7,8,9,10,11,12,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89,90,91,92,93,94,95,96,97,98,99],"release":"","rows":[{"columns":[[112,0,13]],"prefix_len":0,"queries":[{"column":0,"own":[[0,1]],"position":0,"token":0},{"column":1,"own":[[0,2]],"position":1,"token":1},{"column":2,"own":[[0,3]],"position":2,"token":2},{"column":3,"own":[[0,4]],"position":3,"token":3},{"column":4,"own":[[0,5]],"position":4,"token":4},{"column":5,"own":[[0,6]],"position":5,"token":5},{"column":6,"own":[[0,7]],"position":6,"token":6},{"column":7,"own":[[0,8]],"position":7,"token":7},{"column":8,"own":[[0,9]],"position":8,"token":8},{"column":9,"own":[[0,10]],"position":9,"token":9},{"column":10,"own":[[0,11]],"position":10,"token":10},{"column":11,"own":[[0,12]],"position":11,"token":11},{"column":12,"own":[[0,13]],"position":12,"token":12}],"req_pool_index":4,"request":2},{"columns":[[16,0,64],[128,64,36]],"prefix_len":49,"queries":[{"column":49,"own":[[49,50]],"position":49,"token":13},{"column":50,"own":[[49,51]],"position":50,"token":14},{"column":51,"own":[[49,52]],"position":51,"token":15},{"column":52,"own":[[49,53]],"position":52,"token":16},{"column":53,"own":[[49,54]],"position":53,"token":17},{"column":54,"own":[[49,55]],"position":54,"token":18},{"column":55,"own":[[49,56]],"position":55,"token":19},{"column":56,"own":[[49,57]],"position":56,"token":20},{"column":57,"own":[[49,58]],"position":57,"token":21},{"column":58,"own":[[49,59]],"position":58,"token":22},{"column":59,"own":[[49,60]],"position":59,"token":23},{"column":60,"own":[[49,61]],"position":60,"token":24},{"column":61,"own":[[49,62]],"position":61,"token":25},{"column":62,"own":[[49,63]],"position":62,"token":26},{"column":63,"own":[[49,64]],"position":63,"token":27},{"column":64,"own":[[49,65]],"position":64,"token":28},{"column":65,"own":[[49,66]],"position":65,"token":29},{"column":66,"own":[[49,67]],"position":66,"token":30},{"column":67,"own":[[49,68]],"position":67,"token":31},{"column":68,"own":[[49,69]],"position":68,"token":32},{"column":69,"own":[[49,70]],"position":69,"token":33},{"column":70,"own":[[49,71]],"position":70,"token":34},{"column":71,"own":[[49,72]],"position":71,"token":35},{"column":72,"own":[[49,73]],"position":72,"token":36},{"column":73,"own":[[49,74]],"position":73,"token":37},{"column":74,"own":[[49,75]],"position":74,"token":38},{"column":75,"own":[[49,76]],"position":75,"token":39},{"column":76,"own":[[49,77]],"position":76,"token":40},{"column":77,"own":[[49,78]],"position":77,"token":41},{"column":78,"own":[[49,79]],"position":78,"token":42},{"column":79,"own":[[49,80]],"position":79,"token":43},{"column":80,"own":[[49,81]],"position":80,"token":44},{"column":81,"own":[[49,82]],"position":81,"token":45},{"column":82,"own":[[49,83]],"position":82,"token":46},{"column":83,"own":[[49,84]],"position":83,"token":47},{"column":84,"own":[[49,85]],"position":84,"token":48},{"column":85,"own":[[49,86]],"position":85,"token":49},{"column":86,"own":[[49,87]],"position":86,"token":50},{"column":87,"own":[[49,88]],"position":87,"token":51},{"column":88,"own":[[49,89]],"position":88,"token":52},{"column":89,"own":[[49,90]],"position":89,"token":53},{"column":90,"own":[[49,91]],"position":90,"token":54},{"column":91,"own":[[49,92]],"position":91,"token":55},{"column":92,"own":[[49,93]],"position":92,"token":56},{"column":93,"own":[[49,94]],"position":93,"token":57},{"column":94,"own":[[49,95]],"position":94,"token":58},{"column":95,"own":[[49,96]],"position":95,"token":59},{"column":96,"own":[[49,97]],"position":96,"token":60},{"column":97,"own":[[49,98]],"position":97,"token":61},{"column":98,"own":[[49,99]],"position":98,"token":62},{"column":99,"own":[[49,100]],"position":99,"token":63}],"req_pool_index":2,"request":0}],"seed":4419201641269174433,"swa_slots":176,"target":"flashinfer_paged_mask","topk":1}''')

CANNOT_RUN = 2
SCRIPT_ERROR = 3


# What check() measured, for the RESULT line: queries checked and wrong, the largest error, the worst
# query (the wrong one with the largest error, else the largest error), the device it ran on; a
# template adds the release it ran (and fixes it applied).
STATS = {"device": "", "queries": 0, "wrong": 0, "max_error": 0.0, "worst": None}


def result_line(code, **extra):
    """Prints `RESULT {json}` (the last line of the run): the exit status and STATS. Usage:
    result_line(1, raised="IndexError: ...")"""
    def finite(x):
        return x if not isinstance(x, float) or np.isfinite(x) else str(x)
    worst = STATS["worst"] and {k: finite(v) for k, v in STATS["worst"].items()}
    torch = sys.modules.get("torch")
    device = STATS["device"] or (torch.cuda.get_device_name() if torch is not None and torch.cuda.is_available()
                                 else "CPU")
    print("RESULT " + json.dumps({**STATS, "exit": code, "device": device, "max_error": finite(STATS["max_error"]),
                                  "worst": worst, **extra}, sort_keys=True))


class KernelError(Exception):
    """The call under test raised (or faulted): the bug may be that."""


# A kernel that could not be built on this machine (a JIT compile missing its headers or
# compiler) says nothing about the bug: exit 2, never 1.
NOT_BUILT = ("Ninja build failed", "No such file or directory: 'nvcc'")


def kernel_call(fn, *args, **kwargs):
    """fn(*args, **kwargs) with any exception it raises turned into KernelError (or, when it is a
    failed build of the kernel, a 'cannot run here' exit)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        if any(s in str(e) for s in NOT_BUILT):
            cannot_run(f"the kernel could not be built here: {type(e).__name__}: {str(e)[:200]}")
        raise KernelError(f"{type(e).__name__}: {e}") from e


def run_main(main):
    """sys.exit(main()), with a KernelError exit 1 and any other exception exit 3."""
    import traceback
    try:
        code = main()
        extra = {}
    except KernelError as e:
        traceback.print_exc()
        print(f"BUG: the call under test raised {e}")
        code, extra = 1, {"raised": str(e)[:300]}
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        print("error: the reproducer itself failed (exit 3)")
        code, extra = SCRIPT_ERROR, {"error": f"{type(e).__name__}: {e}"[:300]}
    result_line(code, **extra)
    sys.exit(code)


def cannot_run(why):
    print(f"cannot run here: {why}")
    result_line(CANNOT_RUN, cannot_run=why)
    sys.exit(CANNOT_RUN)


def rounded(x, dtype):
    """float32 values exactly representable in dtype (bf16: round to nearest even on the top 16 bits)."""
    x = np.asarray(x, np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        b = x.view(np.uint32).astype(np.uint64)
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return b.astype(np.uint32).view(np.float32)
    return x


class Row:
    """One batch row: its request's columns (cached, then new) with their slot and position."""

    def __init__(self, r):
        self.request, self.prefix_len = r["request"], r["prefix_len"]
        self.req_pool_index = r["req_pool_index"]
        self.slots, self.positions = [], []
        for slot, pos, n in r["columns"]:
            self.slots += [slot + i if slot >= 0 else -1 for i in range(n)]
            self.positions += [pos + i for i in range(n)]
        self.queries = r["queries"]


class Batch:
    def __init__(self, b):
        self.b = b
        m = b["model"]
        self.H, self.Hk, self.D, self.Dv = m["q_heads"], m["kv_heads"], m["head_dim"], m["v_head_dim"]
        self.sm_scale, self.softcap, self.layers = m["sm_scale"], m["softcap"], m["layers"]
        self.dtype, self.seed, self.page_size = b["dtype"], b["seed"], b["page_size"]
        self.T, self.slots = b["num_tokens"], b["pool_slots"]
        self.rows = [Row(r) for r in b["rows"]]
        self.plan = b.get("plan")
        self.owner = {}  # slot -> (request, position)
        for row in self.rows:
            for s, p in zip(row.slots, row.positions):
                if s >= 0:
                    self.owner[s] = (row.request, p)

    def queries(self):
        for row in self.rows:
            for q in row.queries:
                yield row, q

    def visible(self, layer, row, q):
        """Columns query q of row may read in layer, from logical positions (kvfuzz SEMANTICS.md §3)."""
        P = q["position"]
        kind = layer["kind"]
        lo = max(0, P - layer["window"]) if kind == "sliding_window" else \
            P // layer["chunk"] * layer["chunk"] if kind == "chunked" else 0
        cols = [c for c in range(row.prefix_len) if row.positions[c] >= lo]
        for b, e in q["own"]:
            cols += [c for c in range(b, e) if row.positions[c] >= lo]
        return cols

    def values(self, layer, q_width, v_width, rng):
        """Q [T, H, q_width], K pool [slots, Hk, q_width], V pool [slots, Hk, v_width] in the dtype:
        normal values in the real dims, zeros in the padding."""
        q = np.zeros((self.T, self.H, q_width), np.float32)
        k = np.zeros((self.slots, self.Hk, q_width), np.float32)
        v = np.zeros((self.slots, self.Hk, v_width), np.float32)
        q[..., :self.D] = rng.standard_normal((self.T, self.H, self.D))
        k[..., :self.D] = rng.standard_normal((self.slots, self.Hk, self.D))
        v[..., :self.Dv] = rng.standard_normal((self.slots, self.Hk, self.Dv))
        return rounded(q, self.dtype), rounded(k, self.dtype), rounded(v, self.dtype)

    def expected(self, q, k, v, token, slots):
        """float64 attention of token's query over the K/V at slots: [H, v_width] (zeros for no key)."""
        out = np.zeros((self.H, v.shape[-1]))
        if not slots:
            return out
        group = self.H // self.Hk
        for h in range(self.H):
            kk, vv = k[slots, h // group].astype(np.float64), v[slots, h // group].astype(np.float64)
            s = kk @ q[token, h].astype(np.float64) * self.sm_scale
            if self.softcap > 0:
                s = self.softcap * np.tanh(s / self.softcap)
            w = np.exp(s - s.max())
            out[h] = w @ vv / w.sum()
        return out

    def name(self, slot):
        if slot in self.owner:
            r, p = self.owner[slot]
            return f"r{r}:{p}"
        return f"slot{slot}"


def spans(positions):
    """[0, 1, 2, 5] -> '0..2 5'."""
    out, ps = [], sorted(positions)
    i = 0
    while i < len(ps):
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[j] + 1:
            j += 1
        out.append(f"{ps[i]}" if i == j else f"{ps[i]}..{ps[j]}")
        i = j + 1
    return " ".join(out) or "none"


def keys_text(batch, row, slots):
    """Positions of row's request, other requests' keys as rR:P, unowned slots as slotS."""
    own = [batch.owner[s][1] for s in slots if s in batch.owner and batch.owner[s][0] == row.request]
    other = [batch.name(s) for s in sorted(slots) if not (s in batch.owner and batch.owner[s][0] == row.request)]
    return spans(own) + ("" if not other else " + " + " ".join(other))


def probe(run, batch, layer_index, q_width, v_width):
    """The slots each token's head-0 query read: runs of Q = K = 0 and V one-hot per slot, v_width
    slots a run (a read key weighs 1 / keys read, an unread one 0)."""
    reads = [set() for _ in range(batch.T)]
    q = np.zeros((batch.T, batch.H, q_width), np.float32)
    k = np.zeros((batch.slots, batch.Hk, q_width), np.float32)
    for start in range(0, batch.slots, v_width):
        v = np.zeros((batch.slots, batch.Hk, v_width), np.float32)
        block = np.arange(start, min(batch.slots, start + v_width))
        v[block, :, block - start] = 1.0
        out = run(layer_index, q, k, v)
        for t in range(batch.T):
            hit = np.nonzero(np.nan_to_num(out[t, 0, :len(block)], nan=1.0) > 0.5 / batch.slots)[0]
            reads[t] |= {start + int(j) for j in hit}
    return reads


def note(layer, row, query, slots, read, err, bad, batch):
    """Adds one checked query to STATS (its keys: positions of its request, others as rR:P)."""
    STATS["queries"] += 1
    STATS["wrong"] += bool(bad)
    STATS["max_error"] = max(STATS["max_error"], err) if np.isfinite(err) else float("inf")
    worst = STATS["worst"]
    if worst is None or (bad, err) > (worst["wrong"], worst["error"]):
        STATS["worst"] = {"layer": layer, "request": row.request, "position": query["position"], "wrong": bool(bad),
                          "error": err, "visible": len(slots), "should_read": keys_text(batch, row, slots),
                          "keys_read": None if read is None else len(read),
                          "read": None if read is None else keys_text(batch, row, read)}


def check(run, batch, q_width, v_width, covered=None, layers=None, probe_reads=True):
    """Runs the kernel (run(layer, q, k_pool, v_pool) -> out [T, H, v_width]) on every layer asked,
    compares each query with the float64 expectation and, with probe_reads, its read keys with the
    visible ones. covered(layer, row, query, columns) narrows the visible columns to those the call
    covers (one call of several). Prints a line per query; returns the number of wrong queries."""
    wrong = total = 0
    for li in (range(len(batch.layers)) if layers is None else layers):
        layer = batch.layers[li]
        rng = np.random.default_rng([batch.seed, li])
        q, k, v = batch.values(layer, q_width, v_width, rng)
        out = run(li, q, k, v)
        reads = probe(run, batch, li, q_width, v_width) if probe_reads else None
        print(f"layer {li} ({layer['kind']}{', W = %d' % layer['window'] if layer['kind'] == 'sliding_window' else ''}"
              f"{', chunk %d' % layer['chunk'] if layer['kind'] == 'chunked' else ''}):")
        for row, qd in batch.queries():
            cols = batch.visible(layer, row, qd)
            if covered is not None:
                cols = covered(li, row, qd, cols)
            slots = [row.slots[c] for c in cols]
            t = qd["token"]
            total += 1
            ref = batch.expected(q, k, v, t, slots)
            got = out[t, :, :ref.shape[-1]].astype(np.float64)
            err = float(np.nanmax(np.abs(got - ref))) if np.isfinite(got).all() else float("inf")
            bad_values = not err <= 0.05 + 0.02 * float(np.abs(ref).max(initial=0))
            bad_reads = reads is not None and reads[t] != set(slots)
            note(li, row, qd, slots, reads[t] if reads is not None else None, err, bad_values or bad_reads, batch)
            line = (f"  request {row.request}, query at position {qd['position']} (token {t}): "
                    f"should read {keys_text(batch, row, slots)}")
            if reads is not None:
                line += f"; read {keys_text(batch, row, reads[t])}"
            line += f"; max |actual - expected| {err:.3g}"
            if bad_values or bad_reads:
                wrong += 1
                line += "   <-- WRONG"
            print(line)
            if bad_values:
                n = min(4, ref.shape[-1], batch.Dv)
                print(f"      head 0, first {n} output channels: expected {np.round(ref[0, :n], 4).tolist()}, "
                      f"actual {np.round(got[0, :n], 4).tolist()}")
    return wrong, total


def verdict(bad, summary):
    """The last line and the exit status: 1 when anything was wrong."""
    print(f"{'BUG' if bad else 'ok'}: {summary}")
    return 1 if bad else 0


# ---- target: FlashInfer's masked paged prefill (adapters/repro/flashinfer_paged_mask.py of kvfuzz) ----
# BatchPrefillWithPagedKVCacheWrapper.plan(..., custom_mask=...) derives where each row's mask
# starts from the rows' lengths (flashinfer/prefill.py, _compute_page_mask_indptr). The batch's
# masked paged call(s), as the finding's planner built them (BUNDLE["plan"]: qo_indptr, kv_indptr,
# kv_indices, kv_last_page_len, page size, the flattened custom mask, row-major q_len x k_len per
# row, rows in order), are checked twice:
#  1. on any machine: FlashInfer's own _compute_page_mask_indptr on the call's indptrs against the
#     offsets the mask's layout needs (the running sum of q_len x k_len, k_len = 0 for a row of no
#     pages). Only the function's source is needed: without a CUDA build of FlashInfer it is read
#     from the installed package's prefill.py;
#  2. with a CUDA device: the wrapper's plan and run on values from the seed (backend fa2, as
#     sglang sets it), each query against the float64 expectation over the keys its row's pages
#     hold and its mask allows, and a probe of the keys it read.
#   python3 repro.py [--apply-fix]     # --apply-fix: the fix proposed upstream, kv_len =
#                                      # where(num_pages > 0, (num_pages - 1) * page_size + last, 0)
import ast
import importlib.util


def fixed_compute_page_mask_indptr(qo_indptr, paged_kv_indptr, paged_kv_last_page_len, page_size):
    """_compute_page_mask_indptr with rows of no pages taken as no keys (the proposed fix)."""
    import torch
    if len(qo_indptr) != len(paged_kv_indptr):
        raise ValueError("The length of qo_indptr and paged_kv_indptr should be the same.")
    num_pages = paged_kv_indptr[1:] - paged_kv_indptr[:-1]
    kv_len = torch.where(num_pages > 0, (num_pages - 1) * page_size + paged_kv_last_page_len,
                         torch.zeros_like(num_pages))
    mask_indptr = torch.empty_like(qo_indptr)
    mask_indptr[0] = 0
    mask_indptr[1:] = torch.cumsum((qo_indptr[1:] - qo_indptr[:-1]) * kv_len, 0)
    return mask_indptr


def flashinfer_mask_indptr():
    """FlashInfer's _compute_page_mask_indptr and where it came from: the imported package, or (a
    machine without FlashInfer's CUDA dependencies) the function's source in its prefill.py."""
    try:
        from flashinfer import prefill
        return prefill._compute_page_mask_indptr, "flashinfer.prefill, imported"
    except Exception as e:  # noqa: BLE001 (ImportError, or a missing CUDA library under it)
        reason = f"{type(e).__name__}: {e}"
    spec = importlib.util.find_spec("flashinfer")
    if spec is None or not spec.submodule_search_locations:
        cannot_run("no flashinfer package (pip install flashinfer-python, or put its files on PYTHONPATH)")
    path = os.path.join(list(spec.submodule_search_locations)[0], "prefill.py")
    tree = ast.parse(open(path).read(), path)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_compute_page_mask_indptr"), None)
    if fn is None:
        cannot_run(f"{path} has no _compute_page_mask_indptr")
    import torch
    scope = {"torch": torch}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), scope)
    return scope["_compute_page_mask_indptr"], (f"flashinfer/prefill.py line {fn.lineno}, its source (import flashinfer "
                                                 f"failed here: {reason.split(':')[0]})")


def flashinfer_version():
    try:
        from importlib.metadata import version
        return version("flashinfer-python")
    except Exception:  # noqa: BLE001
        spec = importlib.util.find_spec("flashinfer")
        folder = os.path.dirname(list(spec.submodule_search_locations)[0]) if spec else ""
        names = [n for n in (os.listdir(folder) if folder else []) if n.startswith("flashinfer_python-")]
        return names[0][len("flashinfer_python-"):-len(".dist-info")] if names else "?"


def masked_calls(batch):
    """(layer, call, array prefix) of every masked paged prefill call, the first one per layer."""
    meta = batch.plan["meta"]
    out = []
    for li in range(len(batch.layers)):
        g = meta["group_of_layer"][li]
        for c, call in enumerate(meta["groups"][g]["calls"]):
            if call["has_mask"] and call["role"] not in ("ragged", "decode", "draft"):
                out.append((li, call, f"groups.{g}.calls.{c}."))
                break
    return out


def row_keys(arrays, pre, ps):
    """Per row of the call: its key slots ((pages - 1) * ps + last_page_len keys; none without pages)."""
    ip, idx, last = arrays[pre + "kv_indptr"], arrays[pre + "kv_indices"], arrays[pre + "kv_last_page_len"]
    out = []
    for r in range(len(ip) - 1):
        n = ip[r + 1] - ip[r]
        k_len = (n - 1) * ps + last[r] if n > 0 else 0
        out.append([idx[ip[r] + k // ps] * ps + k % ps for k in range(k_len)])
    return out


def check_offsets(batch, fn, torch):
    """FlashInfer's mask offsets of each masked call vs the ones its mask's layout needs; the
    number of calls whose rows start at another offset."""
    arrays, bad = batch.plan["arrays"], 0
    for li, call, pre in masked_calls(batch):
        qo = arrays[pre + "qo_indptr"][:call["rows"] + 1]
        kv = arrays[pre + "kv_indptr"][:call["rows"] + 1]
        last = arrays[pre + "kv_last_page_len"][:call["rows"]]
        keys = row_keys(arrays, pre, call["page_size"])
        need = np.concatenate([[0], np.cumsum([(qo[r + 1] - qo[r]) * len(keys[r]) for r in range(call["rows"])])])
        got = kernel_call(fn, torch.tensor(qo, dtype=torch.int32), torch.tensor(kv, dtype=torch.int32),
                 torch.tensor(last, dtype=torch.int32), call["page_size"]).tolist()
        print(f"layer {li}, masked paged call: page size {call['page_size']}, qo_indptr {list(qo)}, "
              f"kv_indptr {list(kv)}, kv_last_page_len {list(last)}")
        print(f"  keys per row {[len(k) for k in keys]}; mask offsets the layout needs {need.tolist()}; "
              f"the function's {got}{'' if got == need.tolist() else '   <-- WRONG'}")
        bad += got != need.tolist()
    return bad


def run_wrapper(batch, torch, fn_label):
    """Each masked call through BatchPrefillWithPagedKVCacheWrapper on the GPU: (wrong, checked) queries."""
    from flashinfer import BatchPrefillWithPagedKVCacheWrapper
    arrays, wrong, total = batch.plan["arrays"], 0, 0
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[batch.dtype]
    width = next(w for w in (64, 128, 256) if w >= max(batch.D, batch.Dv))  # FlashInfer's head dims
    workspace = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    for li, call, pre in masked_calls(batch):
        ps, rows = call["page_size"], call["rows"]
        keys = row_keys(arrays, pre, ps)
        qo = arrays[pre + "qo_indptr"][:rows + 1]
        row_of = {t: r for r in range(rows) for t in range(qo[r], qo[r + 1])}

        def t(a, d=torch.int32):
            return torch.tensor(np.asarray(a), dtype=d, device="cuda")

        def run(layer, q, k, v, call=call, pre=pre, qo=qo):
            w = BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD", backend="fa2")
            n = batch.slots + (-batch.slots % call["page_size"])
            kp = torch.zeros((n,) + k.shape[1:], dtype=dt, device="cuda")
            vp = torch.zeros((n,) + v.shape[1:], dtype=dt, device="cuda")
            kp[:batch.slots], vp[:batch.slots] = t(k, dt), t(v, dt)
            kernel_call(w.plan, t(qo), t(arrays[pre + "kv_indptr"][:rows + 1]), t(arrays[pre + "kv_indices"]),
                   t(arrays[pre + "kv_last_page_len"][:rows]), batch.H, batch.Hk, width, call["page_size"],
                   head_dim_vo=width, custom_mask=t(arrays[pre + "custom_mask"], torch.bool),
                   causal=bool(call["causal"]), window_left=int(call["window_left"]),
                   logits_soft_cap=float(batch.softcap), sm_scale=float(batch.sm_scale), q_data_type=dt,
                   kv_data_type=dt)
            o = kernel_call(w.run, t(q, dt), (kp.view(-1, call["page_size"], *k.shape[1:]),
                                 vp.view(-1, call["page_size"], *v.shape[1:])))
            kernel_call(torch.cuda.synchronize)
            out = np.zeros((batch.T, batch.H, v.shape[-1]), np.float32)
            live = int(qo[-1])
            out[:live] = o[:live].float().cpu().numpy()
            return out

        def covered(layer, row, qd, cols, keys=keys, row_of=row_of):
            r = row_of.get(qd["token"])
            held = set(keys[r]) if r is not None else set()
            return [c for c in cols if row.slots[c] in held]

        print(f"layer {li}: BatchPrefillWithPagedKVCacheWrapper (fa2) on {torch.cuda.get_device_name()}, "
              f"mask offsets from {fn_label}; each query against the keys its row's pages hold and its window allows")
        w, n = check(run, batch, width, width, covered=covered, layers=[li])
        wrong, total = wrong + w, total + n
    return wrong, total


def main():
    ap = argparse.ArgumentParser(description="FlashInfer masked paged prefill reproducer")
    ap.add_argument("--apply-fix", action="store_true", help="patch in the proposed fix of _compute_page_mask_indptr")
    ap.add_argument("--cpu", action="store_true", help="only the mask offsets, even with a CUDA device")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        cannot_run("no torch")
    batch = Batch(BUNDLE)
    if not masked_calls(batch):
        cannot_run("the plan has no masked paged prefill call")
    fn, where = flashinfer_mask_indptr()
    label = f"FlashInfer {flashinfer_version()}'s _compute_page_mask_indptr"
    STATS.update(release=f"flashinfer {flashinfer_version()}", fixes=["proposed"] if args.apply_fix else [])
    if args.apply_fix:
        fn, where = fixed_compute_page_mask_indptr, "the proposed fix (this script)"
        label += " with the proposed fix"
        if "flashinfer.prefill" in sys.modules:
            sys.modules["flashinfer.prefill"]._compute_page_mask_indptr = fn
    print(f"{label}: {where}")
    bad = check_offsets(batch, fn, torch)
    if not torch.cuda.is_available() or args.cpu:
        print("(no CUDA device: the wrapper itself is not run)" if not args.cpu else "(--cpu: the wrapper is not run)")
        return verdict(bad, f"{label}: {bad} of {len(masked_calls(batch))} masked calls with wrong row offsets")
    wrong, total = run_wrapper(batch, torch, label)
    return verdict(bad + wrong, f"{label}: {bad} of {len(masked_calls(batch))} masked calls with wrong row "
                                f"offsets; on the GPU {wrong} of {total} queries wrong")


if __name__ == "__main__":
    run_main(main)
