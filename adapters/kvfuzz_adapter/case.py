"""What an adapter's function receives: one case of one request (PROTOCOL.md, FAMILIES.md)."""
import math


class _Base:
    def __init__(self, manifest, folder, guarded):
        self.manifest = manifest
        self.info = manifest["case"]            # model, dtype, page_size, num_tokens, pools, batch
        self.model = self.info["model"]         # q_heads, kv_heads, head_dim, v_head_dim, mla, sm_scale, softcap, layers
        self.layers = self.model["layers"]      # [{kind, window, chunk, pool}]
        self.batch = self.info["batch"]         # mode, bs, padded_bs, captured, topk, ...
        self.dtype = self.info["dtype"]         # fp32, fp16, bf16, fp8_e4m3: what the values are exact in
        self.page_size = self.info["page_size"]
        self.num_tokens = self.info["num_tokens"]
        self._folder = folder
        self._guarded = guarded
        self._cache = {}

    def _load(self, key, path):
        if key not in self._cache:
            self._cache[key] = self._guarded.load(key, path)
        return self._cache[key]

    @property
    def sm_scale(self):
        return self.model["sm_scale"]

    @property
    def softcap(self):
        return self.model["softcap"]


class Case(_Base):
    """An executor's case: metadata arrays, Q, the new K/V and the pools of one value set."""

    def __init__(self, manifest, folder, value_set, guarded, shared):
        super().__init__(manifest, folder, guarded)
        self.plan = manifest["plan"]            # the family's plan.json (FAMILIES.md)
        self.value_set = value_set
        self._cache = shared                    # metadata arrays are loaded once per request

    def array(self, name):
        """A metadata array by its contract name, e.g. "full.parts.0.page_table" (1-D)."""
        if name not in self.manifest["arrays"]:
            raise KeyError(f"no metadata array {name!r}; this plan has {sorted(self.manifest['arrays'])}")
        return self._load(name, f"{self._folder}/{name}.npy")

    def _set(self, name):
        return self._load(f"{self.value_set}/{name}", f"{self._folder}/{self.value_set}/{name}.npy")

    @property
    def q(self):
        """[layers, num_tokens, q_heads, head_dim] float32 (values exact in self.dtype)."""
        return self._set("q")

    @property
    def k_new(self):
        """[layers, num_tokens, kv_heads, head_dim]: this step's new K (also already in the pools)."""
        return self._set("k_new")

    @property
    def v_new(self):
        return self._set("v_new")

    def k_cache(self, layer):
        """[slots, kv_heads, head_dim] float32: the layer's pool (full or SWA: self.layers[layer]["pool"])."""
        return self._set(f"k_cache.{layer}")

    def v_cache(self, layer):
        """[slots, kv_heads, v_head_dim]; for MLA models the first v_head_dim values of K."""
        if self.model["mla"]:
            return self.k_cache(layer)[:, :, : self.model["v_head_dim"]]
        return self._set(f"v_cache.{layer}")

    def output_shapes(self):
        layers, tokens = len(self.layers), self.num_tokens
        return ((layers, tokens, self.model["q_heads"], self.model["v_head_dim"]), (layers, tokens, self.model["q_heads"]))


class PlanCase(_Base):
    """A planner's case: what a production planner sees."""

    def __init__(self, manifest, folder, guarded):
        super().__init__(manifest, folder, guarded)
        self.cache_config = self.info["cache"]  # page_size, max_requests, max_context_len, hybrid

    def array(self, name):
        """req_to_token [max_requests + 1, max_context_len] int32, full_to_swa [full_slots + 1] int64
        (hybrid only), req_pool_indices, seq_lens, extend_prefix_lens, extend_seq_lens [padded_bs]
        int32, positions [num_tokens] int32, out_cache_loc int64, custom_mask uint8 (verify)."""
        if name not in self.manifest["arrays"]:
            raise KeyError(f"no input array {name!r}; this request has {sorted(self.manifest['arrays'])}")
        return self._load(name, f"{self._folder}/{name}.npy")


def natural_lse_from_base2(lse2):
    return lse2 * math.log(2.0)
