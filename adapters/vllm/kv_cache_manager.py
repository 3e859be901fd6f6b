"""vLLM's own KVCacheManager allocating a kvfuzz case (`vllm_planner.py --allocator vllm`).

Where it sits: fake_runner.Setup (kvfuzz's batch, KV-cache groups) -> **kv_cache_manager.py**
(vLLM's block ids in the groups' block tables, and the map back onto kvfuzz's pages) -> the
builders and kernels (attention_run.py) -> vllm_page_table.py maps the recorded block tables back
(Allocation.to_kvfuzz_pages), fake_runner._check_slots the slot mapping (Allocation.kvfuzz_slots).

The case's history (case.info["history"]) is replayed through the release's KVCacheManager, as the
scheduler drives it, with the KV-cache groups fake_runner derived (get_kv_cache_groups), prefix
caching on, and a BlockPool of 1 + the case's pool pages per group (full_pages for a full-pool
group, swa_pages for an SWA-pool group; the 1 is vLLM's null block):
- admit: a vLLM Request whose token ids are the request's whole lifetime (known from the history
  and the batch), unique to it except where a `share` op copies its source's first `len` ids;
- share: get_computed_blocks must hit exactly the shared tokens (else unsupported: vLLM would
  recompute what kvfuzz shares); the hit is handed to the request's next allocate_slots;
- extend len / decode / draft parents: allocate_slots(len / 1 / len(parents)), then
  num_computed_tokens advances (a verify step's drafts, as the scheduler schedules them);
- accept path: num_computed_tokens rolls back by the rejected drafts (vLLM keeps their blocks);
- swa_evict: nothing (vLLM's SlidingWindowManager frees blocks outside the window by itself at
  allocate_slots: remove_skipped_blocks);
- free: KVCacheManager.free;
- the batch: allocate_slots(query_len) per batch row (batch.request_ids), then the block ids.

vLLM's tables are then checked against kvfuzz's as an isomorphism over every live (batch row,
logical block) of every KV-cache group (Allocation): each vLLM block is one kvfuzz page of its
group's pool. Breaks are resolved deterministically so that the kernel reads what it would read
on a GPU: a block's page is the one of its first live (row, block) in batch order; a vLLM null
block stays the null page. So one vLLM block for two kvfuzz pages hands the second row the first
row's page, and a block freed inside a window hands the kernel page 0: both are keys kvfuzz's
stride/divide check and oracle see as wrong; a step token vLLM writes elsewhere than kvfuzz's
cache holds it is a plan-run disagreement (plan-run:slot_mapping, Allocation.kvfuzz_slots).

    alloc = replay(vl, setup)      # before the builders run; setup.groups' table_rows are vLLM's
    setup.allocation = alloc
"""
import importlib
import inspect

import numpy as np

from fake_runner import UnsupportedCase, construct

TOKEN_STRIDE = 1 << 20  # token id = lifetime * TOKEN_STRIDE + position: unique per request lifetime


def _call(fn, **kwargs):
    """fn with the keyword arguments this release's signature takes (releases add and drop them)."""
    params = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in kwargs.items() if k in params})


def scheduled(op):
    """The tokens a history op schedules (extend, decode, draft; 0 for the others)."""
    return {"extend": op.get("len", 0), "decode": 1, "draft": len(op.get("parents", []))}.get(op["op"], 0)


class Lifetimes:
    """Each admission's token ids, from a pass over the history and the batch: a request's
    lifetime holds as many tokens as it ever reaches; a `share` copies the source's first ids."""

    def __init__(self, history, batch_rows):
        self.tokens = []  # per admission: token ids
        live, length, drafts = {}, {}, {}
        for op in history:
            r, kind = op["request"], op["op"]
            if kind == "admit":
                live[r], length[r] = len(self.tokens), 0
                self.tokens.append([])
                continue
            n = scheduled(op)
            if kind == "share":
                n = op["len"]
                self.tokens[live[r]][:n] = self.tokens[live[op["from"]]][:n]
            elif kind == "draft":
                drafts[r] = n
            elif kind == "accept":
                n = len(op["path"]) - drafts.pop(r)
            length[r] += n
            self._extend(live[r], length[r])
        for r, n in batch_rows:
            self._extend(live[r], length[r] + n)

    def _extend(self, a, n):
        t = self.tokens[a]
        t.extend((a * TOKEN_STRIDE + np.arange(len(t), n)).tolist())


class Allocation:
    """The isomorphism between vLLM's blocks and kvfuzz's pages, per KV-cache group: page_of[kv_gid]
    [vLLM block] = kvfuzz page (0 for the null block and blocks no live row holds)."""

    def __init__(self, setup, num_blocks):
        self.setup, self.ps = setup, setup.page_size
        self.page_of = {g.kv_gid: np.zeros(num_blocks, np.int64) for g in setup.groups}
        self.kv_gid_of_layer = {l: g.kv_gid for g in setup.groups for l in g.layer_ids}
        self.gid_of_layer = {l: g.gid for g in setup.groups for l in g.layer_ids}
        # per attention group: (batch row, logical block, kvfuzz page) of the blocks outside every
        # window of its layers, where vLLM and kvfuzz free at different times (to_kvfuzz_pages)
        self.outside = {}

    def to_kvfuzz_pages(self, calls):
        """Recorded page-table calls {layer: [call]} in place: vLLM's block ids -> kvfuzz's pages. A
        block no query of the layer's group reads (outside every window) is kvfuzz's page there:
        vLLM frees those per window size (null blocks), kvfuzz per pool, and the page_table family
        has one table for all sliding layers; no kernel reads them either way."""
        for layer, layer_calls in calls.items():
            page_of = self.page_of[self.kv_gid_of_layer[layer]]
            for c in layer_calls:
                table = page_of[c["page_table"].cpu().numpy()]
                if table.ndim == 2 and not c.get("common_prefix_len"):  # kernel rows are batch rows
                    for row, lb, page in self.outside.get(self.gid_of_layer[layer], []):
                        if row < table.shape[0] and lb < table.shape[1]:
                            table[row, lb] = page
                c["page_table"] = c["page_table"].new_tensor(table)

    def kvfuzz_slots(self, g, slots):
        """vLLM's slot mapping of group g's tokens as slots of kvfuzz's pool (negative: no slot). Where a
        token's slot is not kvfuzz's (a broken allocation), the step's write is reported as a plan-run
        disagreement (plan-run:slot_mapping: the cache kvfuzz laid out against where vLLM writes) and
        kvfuzz's slots are returned, so that the plan is still checked and the reads show the rest."""
        slots = np.asarray(slots, np.int64)
        mapped = np.where(slots < 0, slots, self.page_of[g.kv_gid][np.maximum(slots, 0) // self.ps] * self.ps
                          + slots % self.ps)
        expected = self.setup.expected_slots(g.pool)
        wrong = np.nonzero(mapped != expected)[0]
        if wrong.size == 0:
            return mapped
        t = int(wrong[0])
        self.setup.case.disagree("slot_mapping", f"slot {int(expected[t])}",
                                 f"vLLM block {int(slots[t]) // self.ps}, kvfuzz's slot {int(mapped[t])}",
                                 where=f"{g}, token {t} (position {int(self.setup.positions[t])}) of "
                                       f"{wrong.size} written elsewhere: the cache kvfuzz holds against "
                                       "vLLM's KVCacheManager's blocks")
        return expected


def replay(vl, setup):
    """vLLM's KVCacheManager over the case's history and batch; setup.groups' table_rows become vLLM's
    block ids. Returns the Allocation that maps them back. Raises UnsupportedCase where vLLM's
    policy cannot hold what kvfuzz's allocator did."""
    case, bs = setup.case, setup.bs
    request_ids = [int(r) for r in case.batch["request_ids"][:bs]]
    history = case.info["history"]
    query_lens = [int(n) for n in setup.query_lens]
    lifetimes = Lifetimes(history, list(zip(request_ids, query_lens)))
    manager, num_blocks, new_request = _manager(vl, setup)
    requests, pending = {}, {}
    status = importlib.import_module("vllm.v1.request").RequestStatus
    admissions = iter(range(len(lifetimes.tokens)))

    def allocate(r, n, what, drafts=False):
        """drafts: the scheduler caches no draft token's block (request.num_tokens excludes them)."""
        req = requests[r]
        blocks, hit = pending.pop(r, (None, 0))
        got = manager.allocate_slots(req, n, num_new_computed_tokens=hit, new_computed_blocks=blocks,
                                     delay_cache_blocks=drafts)
        if got is None:
            raise UnsupportedCase(f"vLLM {vl.version}'s KVCacheManager cannot allocate {what} of request {r} "
                                  f"({req.num_computed_tokens} tokens computed) from its pool of {num_blocks} "
                                  "blocks, where kvfuzz's allocator could")
        req.num_computed_tokens += hit + n
        req.status = status.RUNNING

    last_draft = {}
    for i, op in enumerate(history):
        r, kind = op["request"], op["op"]
        if kind == "draft":
            last_draft[r] = op
        if kind == "admit":
            requests[r] = new_request(next(admissions), lifetimes)
        elif kind == "share":
            blocks, hit = _cache_hit(manager, requests[r])
            if hit != op["len"]:
                why = "it would recompute them"
                if requests[r].num_tokens <= op["len"]:  # get_computed_blocks hits num_tokens - 1 at most
                    why = "the request computes no token of its own; vLLM recomputes a cached prompt's last block"
                elif any(type(g.kv_cache_spec).__name__ != "FullAttentionSpec" for g in setup.kv_groups):
                    why = "a sliding-window or chunked group's hit is the blocks its window still needs"
                raise UnsupportedCase(f"history[{i}]: vLLM's prefix cache finds {hit} of the {op['len']} tokens "
                                      f"request {r} shares with request {op['from']} ({why})")
            pending[r] = (blocks, hit)
        elif kind in ("extend", "decode", "draft"):
            allocate(r, scheduled(op), f"history[{i}] ({kind} {scheduled(op)})", drafts=kind == "draft")
        elif kind == "accept":  # the scheduler rolls back the rejected drafts; their blocks stay
            requests[r].num_computed_tokens -= scheduled(last_draft[r]) - len(op["path"])
        elif kind == "free":
            manager.free(requests.pop(r))
        # swa_evict: vLLM's sliding-window manager frees on its own (remove_skipped_blocks)
    for i, (r, n) in enumerate(zip(request_ids, query_lens)):
        allocate(r, n, f"batch row {i}'s {n} tokens", drafts=setup.mode == "target_verify")
        if requests[r].num_computed_tokens != int(setup.seq_lens[i]):
            raise RuntimeError(f"kv_cache_manager.py: request {r} holds {requests[r].num_computed_tokens} tokens in "
                               f"vLLM's replay, kvfuzz's batch row {i} has seq_len {int(setup.seq_lens[i])}")
    alloc = Allocation(setup, num_blocks)
    ids = [manager.get_block_ids(requests[r].request_id) for r in request_ids]
    _isomorphism(setup, alloc, ids)
    return alloc


def _manager(vl, setup):
    """The release's KVCacheManager (prefix caching on) over fake_runner's KV-cache groups, and a
    maker of vLLM Requests hashed as the engine core hashes them (sha256)."""
    kcm = importlib.import_module("vllm.v1.core.kv_cache_manager")
    utils = importlib.import_module("vllm.v1.core.kv_cache_utils")
    interface = vl.kv_cache_interface
    cache = setup.case.cache_config
    pages = {"full": int(cache["full_pages"]), "swa": int(cache["swa_pages"])}
    pool_of_kv_group = {g.kv_gid: g.pool for g in setup.groups}
    num_blocks = 1 + sum(pages[p] for p in pool_of_kv_group.values())
    ps = setup.page_size
    # the scheduler's view (generate_scheduler_kv_cache_config, 0.11 on): a group of per-layer specs
    # of one type (UniformTypeKVCacheSpecs) is managed by one of them
    scheduler_view = getattr(utils, "generate_scheduler_kv_cache_config", lambda configs: configs[0])
    config = scheduler_view([construct(
        interface.KVCacheConfig, num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=list(setup.kv_groups),
        hash_block_size=ps)])
    try:
        manager = _call(kcm.KVCacheManager, kv_cache_config=config, max_model_len=int(setup.r2t.shape[1]),
                        enable_caching=True, use_eagle=False, log_stats=False, enable_kv_cache_events=False,
                        dcp_world_size=1, pcp_world_size=1, scheduler_block_size=ps, hash_block_size=ps)
    except (AssertionError, ValueError, NotImplementedError) as e:  # the coordinator refuses the groups
        raise UnsupportedCase(f"vLLM {vl.version}'s KVCacheManager takes no such KV-cache groups "
                              f"({', '.join(type(g.kv_cache_spec).__name__ for g in setup.kv_groups)}): {e}") from e
    hashing = vl._first("vllm.utils.hashing", "vllm.utils", attr="get_hash_fn_by_name")
    hash_fn = hashing.get_hash_fn_by_name("sha256")
    utils.init_none_hash(hash_fn)
    hasher = utils.get_request_block_hasher(ps, hash_fn)
    request_cls = importlib.import_module("vllm.v1.request").Request
    sampling = importlib.import_module("vllm.sampling_params").SamplingParams

    def new_request(admission, lifetimes):
        return _call(request_cls, request_id=f"kvfuzz-{admission}", prompt_token_ids=list(lifetimes.tokens[admission]),
                     sampling_params=sampling(max_tokens=1), pooling_params=None, eos_token_id=None,
                     block_hasher=hasher)

    return manager, num_blocks, new_request


def _cache_hit(manager, request):
    """get_computed_blocks' blocks and hit length (0.33 adds a third answer)."""
    answer = manager.get_computed_blocks(request)
    return answer[0], int(answer[1])


def _isomorphism(setup, alloc, ids):
    """Sets each group's table_rows to vLLM's blocks and alloc.page_of to the map back (module
    docstring). A break is left for the kernels to read: the map keeps a block's first page."""
    ps = setup.page_size
    claimed = {}  # vLLM block -> the KV-cache group whose page it is
    for g in setup.groups:
        kvfuzz_rows = g.table_rows
        g.table_rows = []
        page_of = alloc.page_of[g.kv_gid]
        seen = np.zeros(page_of.shape[0], bool)
        lowest = lowest_visible(setup, g)
        for i, row in enumerate(kvfuzz_rows):
            blocks = list(ids[i][g.kv_gid])
            if len(blocks) < len(row):
                raise RuntimeError(f"{g}: vLLM's KVCacheManager holds {len(blocks)} blocks of batch row {i}, "
                                   f"which reads {len(row)} pages")
            blocks = blocks[: len(row)]
            g.table_rows.append(blocks)
            for lb, (k, v) in enumerate(zip(row, blocks)):
                outside = (lb + 1) * ps <= lowest[i]
                if outside and g.kind == "attention":  # chunked groups' kernel rows are virtual batches
                    alloc.outside.setdefault(g.gid, []).append((i, lb, k))
                # vLLM's null block (freed: right outside every window, a break inside it, read as
                # page 0); kvfuzz evicted the page (outside every window) where vLLM may not have yet
                if v == 0 or k == 0:
                    continue
                # a block of another KV-cache group's (a break) stays page 0 here; a block seen
                # before keeps its first page (another page here is a break the reads show)
                if claimed.setdefault(v, g.kv_gid) == g.kv_gid and not seen[v]:
                    seen[v], page_of[v] = True, k


def lowest_visible(setup, g):
    """Per batch row, the lowest key position any query of the group's layers reads: a block wholly
    below it is outside every window (vLLM may have freed it, kvfuzz may have evicted it)."""
    first_q = setup.seq_lens - setup.query_lens
    lowest = np.full(setup.bs, np.iinfo(np.int64).max, np.int64)
    for l in g.layer_ids:
        x = setup.layers_spec[l]
        if x["kind"] == "sliding_window":
            low = np.maximum(first_q - x["window"], 0)
        elif x["kind"] == "chunked":
            low = first_q // x["chunk"] * x["chunk"]
        else:
            low = np.zeros(setup.bs, np.int64)
        lowest = np.minimum(lowest, low)
    return lowest
