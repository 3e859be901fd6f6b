"""What an adapter's function receives: one case of one request (PROTOCOL.md, FAMILIES.md)."""
import math
import time

import numpy as np


class _Base:
    def __init__(self, manifest, folder, guarded, clock=None):
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
        self._clock = clock                     # serve.py's _Clock: time reading arrays adds to clock.read
        self._cache = {}

    def _load(self, key, path):
        if key not in self._cache:
            start = time.perf_counter()
            self._cache[key] = self._guarded.load(key, path)
            if self._clock is not None:
                self._clock.read += time.perf_counter() - start
        return self._cache[key]

    @property
    def sm_scale(self):
        return self.model["sm_scale"]

    @property
    def softcap(self):
        return self.model["softcap"]

    @property
    def sinks(self):
        """The model's attention sinks, one logit per q head, or None (Model::sinks)."""
        return self.model.get("sinks")


class Case(_Base):
    """An executor's case: metadata arrays, Q, the new K/V and the pools of one value set."""

    PER_CASE_PRECISION = ("tile_keys", "split_keys", "max_merges")

    def __init__(self, manifest, folder, value_set, guarded, shared, answered=None, clock=None):
        super().__init__(manifest, folder, guarded, clock)
        self.plan = manifest["plan"]            # the family's plan.json (FAMILIES.md)
        self.value_set = value_set
        self._cache = shared                    # metadata arrays are loaded once per request
        self._answered = {} if answered is None else answered

    def precision(self, **figures):
        """What the kernel chose for this case where its tiling depends on the case's shape: tile_keys,
        split_keys, max_merges (PROTOCOL.md). They replace the declared ones for this request, e.g.
        case.precision(tile_keys=32) for a kernel that takes 32 keys per running-max update here."""
        for name, value in figures.items():
            if name not in self.PER_CASE_PRECISION:
                raise ValueError(f"precision {name!r} cannot be given per case; only {', '.join(self.PER_CASE_PRECISION)}")
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"precision {name} must be an int, got {value!r}")
            self._answered[name] = value

    def once(self, key, make):
        """make() the first time a value set of this request asks for `key`, its result after: what a
        request's value sets share because it depends on the metadata alone (every set of a request
        runs the same plan with other values), as production plans once a step and runs every layer
        on that plan, e.g.  wrapper = case.once("plan", lambda: plan_the_wrapper(case))."""
        slot = ("once", key)  # beside the metadata arrays, whose keys are names (str)
        if slot not in self._cache:
            self._cache[slot] = make()
        return self._cache[slot]

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

    def k_scale(self, layer):
        """The fp8 scale a kernel reads layer's K pool by (vLLM's layer._k_scale): the pools hold what
        the cache stores, e4m3(k / scale), and attention reads stored * scale. 1.0 where the value set
        has none (PROTOCOL.md "kv_scales"); an adapter sees scales other than 1 only where it
        declares supports={"kv_scales": True}. MLA: the latent's one scale."""
        return self._scale(layer, "k")

    def v_scale(self, layer):
        """The fp8 scale of layer's V pool (vLLM's layer._v_scale); MLA: k_scale."""
        return self._scale(layer, "k" if self.model["mla"] else "v")

    def _scale(self, layer, which):
        scales = self.manifest["sets"][self.value_set].get("kv_scales")
        return float(scales[which][layer]) if scales else 1.0

    def descales(self, layer, part):
        """The fp8 descales kernel call `part` of layer's group was handed, as the plan records them
        (FAMILIES.md `descales`: page_table and paged_csr plans of an fp8 cache, e.g. vLLM's
        --kv-cache-dtype fp8 planner): (q, k, v), each float32 [rows, kv_heads] (q None: none, 1),
        what a kernel multiplies the cache's stored values by (FlashAttention's q/k/v_descale,
        FlashInfer's run(q_scale, k_scale, v_scale) repeated over rows and heads). None where the
        plan carries none: the kernel is then handed the layer's own scales, k_scale / v_scale.
        The k and v descales are for this value set's pools: a planner records them against the
        layer's scales (self.layers[layer]["k_scale"]), which the case's own values are stored by;
        the read-set probes' values are stored unscaled (their k_scale(layer) is 1), so there each is
        the recorded descale over the layer's scale (1 where the planner handed the kernel the
        layer's scale). Hand them to the kernel as they come."""
        layers = self.plan.get("descales") or []
        if not layers:
            return None
        parts = layers[layer]["parts"]
        if part >= len(parts):
            raise ValueError(f"the plan's descales of layer {layer} have {len(parts)} parts, none for call {part}")
        heads = self.model["kv_heads"]

        def rows(name):
            values = parts[part].get(name) or []
            if name == "q" and not values:
                return None
            if len(values) % heads:
                raise ValueError(f"descales of layer {layer} call {part}: {name} holds {len(values)} values, "
                                 f"not [rows][{heads} kv heads]")
            d = np.asarray(values, np.float64).reshape(-1, heads)
            if name != "q":  # for this value set's pools (exact: the scales are 4-bit floats)
                d = d * (self._scale(layer, name) / float(self.layers[layer].get(f"{name}_scale", 1.0)))
            return d.astype(np.float32)
        return rows("q"), rows("k"), rows("v")

    def k_cache(self, layer):
        """[slots, kv_heads, head_dim] float32: the layer's pool (full or SWA: self.layers[layer]["pool"]).
        A pool sent sparse (PROTOCOL.md) is materialized here, once; pool_parts avoids that. It holds
        what the cache stores: times k_scale(layer) is what a kernel reads."""
        return self._pool(layer, "k")

    def v_cache(self, layer):
        """[slots, kv_heads, v_head_dim]; for MLA models the first v_head_dim values of K."""
        if self.model["mla"]:
            return self.k_cache(layer)[:, :, : self.model["v_head_dim"]]
        return self._pool(layer, "v")

    def pool_parts(self, layer, which):
        """(num_slots, fill [kv_heads, dim], slots [n] int64 ascending, rows [n, kv_heads, dim]) of
        layer's K ("k") or V ("v") pool: slot slots[i] holds rows[i], every other slot holds fill.
        For a GPU adapter to build the pool on the device without a dense host copy; works for
        dense pools too (every slot stored). MLA: V is the first v_head_dim values of K's parts."""
        if which not in ("k", "v"):
            raise ValueError(f"pool_parts: which must be 'k' or 'v', not {which!r}")
        if which == "v" and self.model["mla"]:
            n, fill, slots, rows = self.pool_parts(layer, "k")
            vd = self.model["v_head_dim"]
            return n, fill[:, :vd], slots, rows[:, :, :vd]
        name = f"{which}_cache.{layer}"
        if not self._sparse(name):
            dense = self._set(name)
            return dense.shape[0], np.zeros(dense.shape[1:], np.float32), np.arange(dense.shape[0], dtype=np.int64), dense
        return (self.manifest["sets"][self.value_set][name]["num_slots"], self._set(f"{name}.fill"),
                self._set(f"{name}.slots"), self._set(f"{name}.rows"))

    def pool_rows(self, layer, which, slots):
        """rows [len(slots), kv_heads, dim] of layer's K ("k") or V ("v") pool at `slots` (int64):
        what k_cache(layer)[slots] gives, without materializing a sparse pool."""
        if which == "v" and self.model["mla"]:
            return self.pool_rows(layer, "k", slots)[:, :, : self.model["v_head_dim"]]
        if not self._sparse(f"{which}_cache.{layer}"):
            return self._pool(layer, which)[slots]
        n, fill, stored, rows = self.pool_parts(layer, which)
        slots = np.asarray(slots, dtype=np.int64)
        if slots.size and (slots.min() < 0 or slots.max() >= n):
            raise IndexError(f"{which}_cache.{layer}: slot outside the pool of {n} slots")
        if stored.shape[0] == 0:
            return np.broadcast_to(fill, slots.shape + fill.shape).copy()
        at = np.minimum(np.searchsorted(stored, slots), stored.shape[0] - 1)
        return np.where((stored[at] == slots)[..., None, None], rows[at], fill)

    def num_slots(self, layer):
        """Slots of layer's pool (full or SWA)."""
        return self.info["pools"]["swa_slots" if self.layers[layer]["pool"] == "swa" else "full_slots"]

    def _sparse(self, name):
        return bool(self.manifest["sets"][self.value_set].get(name, {}).get("sparse", False))

    def _pool(self, layer, which):
        name = f"{which}_cache.{layer}"
        if not self._sparse(name):
            return self._set(name)
        key = f"{self.value_set}/{name}"
        if key not in self._cache:
            n, fill, slots, rows = self.pool_parts(layer, which)
            dense = np.empty((n,) + fill.shape, np.float32)
            dense[...] = fill
            dense[slots] = rows
            self._cache[key] = self._guarded.hold(key, dense)
        return self._cache[key]

    def output_shapes(self):
        layers, tokens = len(self.layers), self.num_tokens
        return ((layers, tokens, self.model["q_heads"], self.model["v_head_dim"]), (layers, tokens, self.model["q_heads"]))


class PlanCase(_Base):
    """A planner's case: what a production planner sees."""

    def __init__(self, manifest, folder, guarded, clock=None):
        super().__init__(manifest, folder, guarded, clock)
        self.cache_config = self.info["cache"]  # page_size, max_requests, max_context_len, hybrid
        self.plan_run = []                      # disagreements reported with the plan (disagree())

    def disagree(self, argument, planned, ran, layer=-1, where=""):
        """Reports that the engine fixed `argument` at its plan step and passed it differently at its
        run step (PROTOCOL.md "plan_run"): kvfuzz files a `plan-run` finding, mechanism
        plan-run:ARGUMENT, and still checks the plan. E.g. a FlashInfer wrapper planned without the
        window that forward() is handed: case.disagree("window_left", -1, 2, layer=0, where="paged prefill")."""
        if not argument:
            raise ValueError("disagree() needs the argument's name")
        what = f"{where}: " if where else ""
        self.plan_run.append({"argument": str(argument), "layer": int(layer),
                              "message": f"{what}{argument} is {planned!r} at the plan step, {ran!r} at the run step"})

    def array(self, name):
        """req_to_token [max_requests + 1, max_context_len] int32, full_to_swa [full_slots + 1] int64
        (hybrid only), req_pool_indices, seq_lens, extend_prefix_lens, extend_seq_lens [padded_bs]
        int32, positions [num_tokens] int32, out_cache_loc int64, custom_mask uint8 (verify)."""
        if name not in self.manifest["arrays"]:
            raise KeyError(f"no input array {name!r}; this request has {sorted(self.manifest['arrays'])}")
        return self._load(name, f"{self._folder}/{name}.npy")


def natural_lse_from_base2(lse2):
    return lse2 * math.log(2.0)
