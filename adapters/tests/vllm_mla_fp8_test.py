"""vLLM's MLA fp8 KV cache as adapters/vllm/ stands in for its kernels: checked on hand-made calls,
without vLLM (torch only).

    .sglang/venv/bin/python adapters/tests/vllm_mla_fp8_test.py

- the context gather over an fp8 (byte) latent cache reads back each row's slot tag, as over a
  model-dtype cache (mla_recorder.tag_cache, cache_rows, MlaRecorder.gather), and a byte row whose
  words are not one tag is an error, never a silent read;
- the query's scaled_fp8_quant stand-in: e4m3 of x / scale, saturated at +-448, static per-tensor
  scales only;
- FlashMLA's fp8 decode (flash_mla_with_kvcache_fp8) against the get_mla_metadata_dense_fp8 schedule
  it is handed: the seq_lens it was made for are the ones the kernel reads (plan-run:cache_seqlens),
  and its num_splits are that schedule's, batch + 1 of them (plan-run:mla_num_splits); the output is
  in the model's dtype.
Prints "SKIPPED: ..." and exits 0 where torch is missing; exits 1 naming a failed check.
"""
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "vllm"), os.path.join(HERE, "..")]
from checks import Checks, need  # noqa: E402

torch, = need("torch")
from fp8_quant import scaled_fp8_quant  # noqa: E402
from mla_backends import HEAD_SIZE  # noqa: E402
from mla_recorder import MlaRecorder, tag_cache  # noqa: E402

check = Checks("vllm mla fp8 test")


def gathered(cache):
    """Two requests' contexts (3 and 2 tokens) gathered from a cache of 3 blocks of 4 slots, as
    0.3x's gather runs (token_to_seq, seq_starts): the tags of the workspace rows."""
    blocks, ps = cache.shape[0], cache.shape[1]
    tag_cache(cache, torch.arange(1, blocks * ps + 1).view(blocks, ps))
    block_table = torch.tensor([[2, 0], [1, 0]], dtype=torch.int32)
    dst = torch.zeros(5, HEAD_SIZE, dtype=torch.float32)
    rec = MlaRecorder.__new__(MlaRecorder)  # the gather reads its arguments only
    rec.gather(cache, dst, block_table, torch.tensor([0, 3, 5]), token_to_seq=torch.tensor([0, 0, 0, 1, 1]),
               num_tokens=5, seq_starts=torch.tensor([2, 0]))
    if not torch.equal(dst, dst[:, :1].expand_as(dst)):
        return None
    return (dst[:, 0] - 1).to(torch.int64).tolist()


# request 0 reads positions 2, 3, 4 of its row [2, 0]: slots 10, 11, then block 0's slot 0;
# request 1 positions 0, 1 of [1, 0]: slots 4, 5
want = [10, 11, 0, 4, 5]
check(gathered(torch.zeros(3, 4, HEAD_SIZE, dtype=torch.float32)) == want, f"a float32 cache gathers slots {want}")
check(gathered(torch.zeros(3, 4, HEAD_SIZE, dtype=torch.uint8)) == want, f"an fp8 (byte) cache gathers slots {want}")
check(gathered(torch.zeros(3, 4, HEAD_SIZE, dtype=torch.uint8).view(torch.float8_e4m3fn)) == want,
      f"the byte cache viewed as e4m3 (the impls' view) gathers slots {want}")
corrupt = torch.zeros(3, 4, HEAD_SIZE, dtype=torch.uint8)
tag_cache(corrupt, torch.arange(1, 13).view(3, 4))
corrupt[2, 2, 100] ^= 1  # slot 10's row now mixes two words
try:
    rec = MlaRecorder.__new__(MlaRecorder)
    rec.gather(corrupt, torch.zeros(5, HEAD_SIZE), torch.tensor([[2, 0], [1, 0]]), torch.tensor([0, 3, 5]),
               token_to_seq=torch.tensor([0, 0, 0, 1, 1]), num_tokens=5, seq_starts=torch.tensor([2, 0]))
    check(False, "a byte row of mixed words is refused")
except RuntimeError as e:
    check("mixes values" in str(e), f"a byte row of mixed words is refused ({e})")

x = torch.tensor([[1.0, 3.3, -1000.0, 0.02]])
q, scale = scaled_fp8_quant(x, torch.tensor([2.0]))
got = q.to(torch.float32).tolist()[0]
check(q.dtype == torch.float8_e4m3fn and got == [0.5, 1.625, -448.0, 0.009765625] and float(scale) == 2.0,
      f"scaled_fp8_quant(x, 2) is e4m3(x / 2) saturated: {got}")
try:
    scaled_fp8_quant(x)
    check(False, "a dynamic scale is refused")
except NotImplementedError:
    check(True, "a dynamic scale is refused")



def fp8_decode(made_for, reads, splits_of=None, splits_len=None):
    """One FlashMLA fp8 decode of 2 rows: the schedule made for seq_lens `made_for`, the kernel reading
    `reads`; splits_of: a schedule made for the same seq_lens whose num_splits the kernel is handed
    instead; splits_len: num_splits cut to this length. The disagreements' arguments."""
    setup = types.SimpleNamespace(attn=types.SimpleNamespace(module=types.SimpleNamespace()), page_size=64,
                                  dtype=torch.float32)
    rec = MlaRecorder(setup)
    rec.layer = 0
    marker, splits = rec.mla_schedule_fp8(torch.tensor(made_for), 16, 1)
    if splits_of:
        _, splits = rec.mla_schedule_fp8(torch.tensor(made_for), 16, 1)
    if splits_len is not None:
        splits = splits[:splits_len]
    q = torch.zeros(2, 1, 16, HEAD_SIZE).to(torch.float8_e4m3fn)
    cache = torch.zeros(4, 64, 1, HEAD_SIZE, dtype=torch.uint8).view(torch.float8_e4m3fn)
    out, _ = rec.flash_mla_fp8(q, cache, torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), torch.tensor(reads), 512,
                               marker, splits, 0.1, True, torch.ones(1), torch.ones(1))
    check(out.dtype == torch.float32, "flash_mla_with_kvcache_fp8's output is in the model's dtype")
    return sorted({argument for argument, _, _ in rec.agree.disagreements})


check(fp8_decode([5, 70], [5, 70]) == [], "the fp8 kernel on its schedule's seq_lens agrees")
check(fp8_decode([1, 1], [5, 70]) == ["cache_seqlens"], "the fp8 kernel on another batch's schedule is plan-run:cache_seqlens")
check(fp8_decode([5, 70], [5, 70], splits_of=True) == ["mla_num_splits"],
      "num_splits of another schedule than the tile schedule's is plan-run:mla_num_splits")
check(fp8_decode([5, 70], [5, 70], splits_len=2) == ["mla_num_splits"],
      "num_splits shorter than the kernel's batch + 1 is plan-run:mla_num_splits")

check.exit()
