"""A reproducer of a kvfuzz finding in sglang's attention metadata, written by `kvfuzz repro`.

The release's own attention backend (the class BUNDLE's planner names: TritonAttnBackend,
FlashInferAttnBackend or FlashAttentionBackend) is handed the batch below as sglang's scheduler
hands it ("engine_request": req_to_token, seq_lens, prefix and extend lengths, positions,
out_cache_loc, the verify tree mask; one array a line), builds its metadata with its own code and
runs each layer's forward() on values from the seed. Each query is compared with a float64
attention over the keys it should read (each query's "visible": per layer, column ranges of its row,
whose slots and positions are the row's "columns" runs [first slot, first position, count]); a probe
(Q = K = 0, V one-hot per slot) shows the keys it did read.

    python3 THIS.py --site DIR [--fix N]     # DIR: an unpacked sglang wheel (its sglang/ folder)

Needs torch, numpy, triton (flashinfer for FlashInfer's backend) and kvfuzz_repro_sglang_metadata.py
beside this file: kvfuzz's harness, written with it (the stand-in model runner, pools and
ForwardBatch; the values, the expectation, the probe; for FA, the FA3 kernel's plain-torch stand-in,
or with KVFUZZ_FA3=DIR on a CUDA device sgl-kernel's real FA3 from DIR/sgl_kernel/; --fix N's
patches); not kvfuzz. Exit 1: a query read other keys than it should or its output is off (or the
call raised); 0: none; 2: it cannot run here; 3: the script failed. Last line: RESULT {json}.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvfuzz_repro_harness as kv  # kvfuzz repro: harness

BUNDLE = None  # kvfuzz repro


def main():
    import torch
    args = kv.arguments()  # --site DIR, --fix N, --deterministic
    sg, setup, batch = kv.engine_setup(args)  # the release's modules; the runner, pools and ForwardBatch
    backend, name = kv.build_backend(sg, setup)  # sglang's backend class: __init__, init_forward_metadata
    forward_batch = setup.layer_batch()  # the ForwardBatch every layer's forward() is handed
    loc = torch.tensor(BUNDLE["out_cache_loc"], dtype=torch.int64, device=setup.device)
    print(kv.banner(sg, args, name, setup, batch))

    def run(li, q, k, v):  # layer li: the pools hold k, v; sglang's forward() on the tokens' q, k, v
        kt, vt = kv.fill_pools(setup, li, k, v)
        qt = torch.from_numpy(q).to(setup.device, setup.dtype).reshape(batch.T, batch.H * setup.q_width)
        out = kv.kernel_call(backend.forward, qt, kt[loc], vt[loc], setup.layers[li], forward_batch,
                             save_kv_cache=False)
        if setup.cuda:
            kv.kernel_call(torch.cuda.synchronize)
        return out.float().reshape(batch.T, batch.H, setup.v_width).cpu().numpy()

    # every query of every layer against its expectation, and the keys it read against those it should
    wrong, total = kv.check(run, batch, setup.q_width, setup.v_width)
    return kv.verdict(wrong, f"sglang {sg.version}{''.join(f' with fix {n}' for n in args.fix)} {name}: "
                             f"{wrong} of {total} queries wrong")


if __name__ == "__main__":
    kv.BUNDLE = BUNDLE
    kv.run_main(main)
