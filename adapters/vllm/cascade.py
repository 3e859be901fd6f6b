"""vLLM's cascade-attention decision for one attention group, as its model runner takes it.

Where it sits: fake_runner.Setup (the groups' block tables) -> **cascade_prefix_len** -> the
builder's build(common_prefix_len=...) (attention_run.py), whose FlashAttentionImpl then runs
cascade_attention: one kernel call over the common prefix for every query (not causal), one per
request over the rest (causal), merged by merge_attn_states.

- vLLM's scheduler counts the blocks every running request holds
  (KVCacheManager.get_num_common_prefix_blocks: the first request's leading blocks whose ref_cnt
  equals the number of running requests). The running requests here are the batch's, so that is the
  leading blocks every batch row of the group's table holds (kvfuzz's `share` ops make them).
- gpu_model_runner._compute_cascade_attn_prefix_len (re-expressed: importing the runner needs the
  whole engine), on the attention group's spec, caps it at the fewest computed tokens, rounds it down to whole blocks and asks the
  builder's use_cascade_attention (the release's own function).
- mode "heuristic" is vLLM's decision with cascade attention enabled (ModelConfig.disable_cascade_attn
  False: the default of 0.10.2 and 0.11.0; 0.27.1 and 0.28.0 default to True, users opt in), whose
  cost model wants at least 256 shared keys and 8 requests; "always" keeps its support conditions (no ALiBi, sliding window, local attention or
  decode context parallelism) without the cost model, so small cases reach the cascade; "never"
  turns it off. Releases without cascade_attention (it was removed before 0.33) always answer 0.

    cp = cascade_prefix_len(vl.flash_attn, setup, g, builder, "always")
"""
import inspect

MODES = ("heuristic", "always", "never")
NUM_SMS = 132  # an H100 SXM, the sm90 device the adapter plays (vllm_release.py)


def common_prefix_blocks(rows):
    """Leading block ids every row holds: common_prefix_blocks([[3, 4, 9], [3, 4, 2]]) == 2."""
    if not rows:
        return 0
    n = min(len(r) for r in rows)
    k = 0
    while k < n and all(r[k] == rows[0][k] for r in rows):
        k += 1
    return k


def cascade_prefix_len(module, setup, g, builder, mode):
    """The common_prefix_len the runner hands group g's builder (0: no cascade); module is the
    backend's (attention_run.py): only FlashAttention's has cascade_attention, the other builders'
    use_cascade_attention is the base class's False."""
    decide = getattr(module, "use_cascade_attention", None)
    if mode == "never" or decide is None or not hasattr(module, "cascade_attention"):
        return 0
    # the attention group's spec, as the runner passes it: the KV-cache group's (merged: with the hybrid
    # manager off a group of full and sliding layers records the window) or its layers' own
    spec, it = g.spec, setup.vl.kv_cache_interface
    block_size = spec.block_size
    prefix = common_prefix_blocks(g.table_rows) * block_size
    if prefix == 0:
        return 0
    computed = setup.seq_lens - setup.query_lens  # num_computed_tokens of each batch row
    prefix = min(prefix, int(computed.min())) // block_size * block_size
    full = isinstance(spec, it.FullAttentionSpec)
    sliding = isinstance(spec, it.SlidingWindowSpec) or (full and getattr(spec, "sliding_window", None) is not None)
    local_spec = getattr(it, "ChunkedLocalAttentionSpec", ())
    local = isinstance(spec, local_spec) or (full and getattr(spec, "attention_chunk_size", None) is not None)
    if mode == "always":
        return prefix if prefix > 0 and not sliding and not local else 0
    args = dict(common_prefix_len=prefix, query_lens=setup.query_lens, num_query_heads=setup.model["q_heads"],
                num_kv_heads=spec.num_kv_heads, use_alibi=False, use_sliding_window=sliding,
                use_local_attention=local, num_sms=NUM_SMS, dcp_world_size=1)
    known = inspect.signature(decide).parameters
    use = builder.use_cascade_attention(**{k: v for k, v in args.items() if k in known})
    return prefix if use else 0
