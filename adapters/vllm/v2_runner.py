"""vLLM's Model Runner V2 (vllm/v1/worker/gpu/, 0.2x on): its block tables, input preparation and
slot mapping, run unchanged, feeding the same metadata builders the V1 path feeds.

Where it sits: fake_runner.Setup (kvfuzz's batch, KV-cache groups and block rows) -> **v2_runner.py**
(the CommonAttentionMetadata V2's runner hands each group's builders) -> attention_run.py.

What runs, as GPUModelRunner (gpu/model_runner.py) runs it each step (0.33.0 lines; 0.27.1 and
0.28.0 have the same calls, without the sliding-window masking):
- `BlockTables` (gpu/block_table.py): one table per KV-cache group, rows indexed by the request's
  persistent state index (here kvfuzz's req_pool_index), written with `append_block_ids` +
  `apply_staged_writes` (a Triton kernel; the fused multi-group writer where there are several
  groups), gathered into the forward pass's tables by batch row (`gather_block_tables`, a Triton
  kernel; from 0.33 it nulls each sliding-window group's entries wholly below the window of the
  request's first scheduled token, `sliding_window_reach`), and the slot mapping of every group
  (`compute_slot_mappings`, a Triton kernel), as `prepare_attn` calls them (model_runner.py:1597-1615).
- `prepare_pos_seq_lens` (gpu/input_batch.py, a Triton kernel): positions and seq_lens from each
  request's num_computed_tokens and the query_start_loc the runner cumsums (model_runner.py:1461-1505).
- `build_attn_metadata` (gpu/attn_utils.py): the CommonAttentionMetadata of each KV-cache group, as
  model_states/default.py:prepare_attn calls it (eager: unpadded sizes; max_seq_len from the CPU
  upper bound). The attention groups it is handed keep that object, which attention_run.py then
  hands the release's builders, so every property the V1 path has applies.
On the CPU the kernels run in Triton's interpreter (TRITON_INTERPRET=1, vllm_planner.py), the
buffers in host memory (vLLM's NonUvaBuffer fallback with the platform's device type "cpu").

Re-expressed (a bug there is not found): the BlockTables arguments initialize_kv_cache derives from
the specs (model_runner.py:645-673: block sizes, slot_mapping_enabled, sliding_window_reach), the
request state's num_computed_tokens (kvfuzz's seq_len minus the step's tokens), is_prefilling
(a row of more than one token outside a verify step; kvfuzz has no prompt lengths).
CUDA-graph batches: V2's CudaGraphManager dispatches the step; a FULL graph is captured with V2's
dummy batch over these same persistent buffers (InputBuffers, BlockTables), then the replay refills
them (v2_graph.py); PIECEWISE and NONE run eagerly, as above.
Drafting steps: V2's own speculator drafts after the target step these inputs are (v2_drafting.py).
Not modelled (answered unsupported): backends other than FlashAttention and Triton.

    if v2_runner.available(vl): inputs = v2_runner.V2Inputs(vl, setup)
    common = inputs.common_metadata(g)      # group g's CommonAttentionMetadata, built by V2's code
    inputs.runtime_mode()                   # a CUDA-graph batch: "FULL" (then capture=True, then replay)
"""
import importlib
import importlib.util
import inspect
import types

import numpy as np
import torch

from fake_runner import UnsupportedCase
import v2_graph
from kv_cache_manager import lowest_visible

RUNNERS = ("v1", "v2", "auto")


def available(vl):
    """Whether the release ships Model Runner V2's block tables (vllm/v1/worker/gpu/block_table.py)."""
    try:
        return importlib.util.find_spec("vllm.v1.worker.gpu.block_table") is not None
    except ModuleNotFoundError:  # no vllm/v1/worker/gpu/ at all
        return False


def chooses_v2(vl, config):
    """VllmConfig.use_v2_model_runner, the release's own property (config/vllm.py), evaluated over the
    case's configuration: the adapter's model (dense Llama, a `generate` runner, not MoE, not hybrid),
    one rank, VLLM_COMPILE, EAGLE's speculative config on a verify or drafting step. The property and
    the methods it calls are the release's, bound to a view of those fields; a field the view does not
    hold reads None, which is vLLM's default (off) for every opt-in feature these methods ask about
    (logits processors, prompt embeds, EC transfer, routed-expert capture, adaptive verification, ...)."""
    cls = importlib.import_module("vllm.config.vllm").VllmConfig
    methods = {n: v for n, v in vars(cls).items() if n == "use_v2_model_runner" or
               (n.startswith("_") and ("v2_model_runner" in n or "dflash" in n or "dbo" in n))}
    mode = importlib.import_module("vllm.config.compilation").CompilationMode.VLLM_COMPILE
    model, spec = config.model_config, config.speculative_config
    view = type("VllmConfigView", (_Unset,), methods)(
        model_config=_Unset(**vars(model), runner_type="generate", architectures=model.hf_config.architectures,
                            is_moe=False),
        parallel_config=_Unset(**vars(config.parallel_config)),
        compilation_config=_Unset(mode=mode, pass_config=_Unset(enable_sp=False)),
        speculative_config=spec and _Unset(**vars(spec)), attention_config=_Unset(**vars(config.attention_config)),
        cache_config=_Unset(**vars(config.cache_config)), scheduler_config=_Unset(**vars(config.scheduler_config)))
    return bool(view.use_v2_model_runner)


class _Unset(types.SimpleNamespace):
    """Configuration fields; one not given reads None (unset)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def config_view(config):
    """The runner's VllmConfig namespaces as V2's start-up code reads them (init_attn_backend, the
    speculators): a field they do not hold reads None, vLLM's default (off) for the opt-in features
    asked about there (ubatching, watermarks, KV sharing, ...)."""
    return _Unset(**{k: _Unset(**vars(v)) if isinstance(v, types.SimpleNamespace) else v
                     for k, v in vars(config).items()})


def publish_backends(setup, layer_names):
    """The layers as V2's init_attn_backend looks them up (get_layers_from_vllm_config): each its
    group's backend (setup.group_backend), its q heads, no KV sharing."""
    ns = types.SimpleNamespace
    backend_of = {f"layers.{l}": setup.group_backend(g) for g in setup.groups for l in g.layer_ids}
    layers = {name: ns(get_attn_backend=(lambda b: lambda: b)(backend_of[name]), num_heads=setup.model["q_heads"],
                       kv_sharing_target_layer_name=None) for name in layer_names}
    attn_utils = importlib.import_module("vllm.v1.worker.gpu.attn_utils")
    attn_utils.get_layers_from_vllm_config = lambda cfg, c, names=None: {
        k: v for k, v in layers.items() if names is None or k in names}


def check_supported(setup):
    """What the adapter does not model of V2 (UnsupportedCase)."""
    if setup.backend.__name__ not in ("FlashAttentionBackend", "TritonAttentionBackend"):
        raise UnsupportedCase(f"Model Runner V2 with {setup.backend.__name__}: modelled on FlashAttention and Triton")


def _host_buffers(device):
    """V2's host-staged buffers where the device is the host (the CPU, Triton's interpreter). The runner
    stages inputs in pinned host memory that the GPU reads in place (UVA: UvaBuffer). 0.33 falls back to
    device copies without pinned memory (NonUvaBuffer, on current_platform.device_type, which is then
    the host's); 0.27.1 and 0.28.0 have no fallback and need UVA, so there a UvaBuffer is its host
    tensor, the device's view of it being the same memory (what UVA gives a GPU)."""
    if device.type != "cpu":
        return
    importlib.import_module("vllm.platforms").current_platform.device_type = "cpu"
    buffer_utils = importlib.import_module("vllm.v1.worker.gpu.buffer_utils")
    if hasattr(buffer_utils, "NonUvaBuffer"):
        return

    class HostUvaBuffer:
        def __init__(self, size, dtype):
            self.cpu = torch.zeros(size, dtype=dtype, device="cpu")
            self.np = self.cpu.numpy()
            self.uva = self.cpu

    buffer_utils.UvaBuffer = HostUvaBuffer


class V2Inputs:
    """One step's inputs as Model Runner V2 prepares them, over setup's KV-cache groups and block rows."""

    def __init__(self, vl, setup):
        check_supported(setup)
        self.vl, self.setup = vl, setup
        setup.vllm_config.use_v2_model_runner = True  # what the builders ask (0.33 backend.py max_decode_query_len)
        # attn_utils imports the model loader (0.2x: through model_states and the encoder runner) for
        # helpers the metadata path never calls
        vl.stub_packages("vllm.model_executor.models", "vllm.model_executor.model_loader")
        _host_buffers(setup.device)
        self.block_table_module = importlib.import_module("vllm.v1.worker.gpu.block_table")
        self.input_batch = importlib.import_module("vllm.v1.worker.gpu.input_batch")
        self.attn_utils = importlib.import_module("vllm.v1.worker.gpu.attn_utils")
        s = setup
        self.kv_groups = sorted({g.kv_gid for g in s.groups})
        self.max_num_reqs = max(int(s.r2t.shape[0]), s.padded_bs, 1)  # a CUDA graph's padded rows too
        self.max_tokens = max(s.total_tokens, s.num_tokens, 1)  # a drafting step: its target step's tokens
        self.desc = None  # the CudaGraphManager's descriptor of the step (runtime_mode), where it has CUDA graphs
        self.tables = None  # the persistent BlockTables and InputBuffers, made at the first common_metadata(),
        self._common = {}  # after any --allocator vllm replay; per phase (eager, capture, replay), per group

    def _block_tables(self):
        """BlockTables as initialize_kv_cache builds it (model_runner.py:645-730), per KV-cache group."""
        s, it = self.setup, self.vl.kv_cache_interface
        specs = {}
        for g in s.groups:
            spec = g.group_spec
            specs[g.kv_gid] = getattr(spec, "first_spec", None) or spec  # UniformTypeKVCacheSpecs: its first
        ps = s.page_size
        max_blocks = -(-int(s.r2t.shape[1]) // ps)
        known = dict(
            block_sizes=[ps] * len(self.kv_groups), kernel_block_sizes=[ps] * len(self.kv_groups),
            max_num_reqs=self.max_num_reqs, max_num_batched_tokens=self.max_tokens,
            max_num_blocks_per_group=[max_blocks] * len(self.kv_groups), device=s.device,
            slot_mapping_enabled=[bool(getattr(specs[k], "uses_slot_mapping", True)) for k in self.kv_groups],
            dcp_sharded=[bool(getattr(specs[k], "dcp_sharded", True)) for k in self.kv_groups],
            sliding_window_reach=[int(specs[k].num_retained_tokens)
                                  if isinstance(specs[k], it.SlidingWindowSpec) and hasattr(specs[k], "num_retained_tokens")
                                  else 0 for k in self.kv_groups])
        cls = self.block_table_module.BlockTables
        params = inspect.signature(cls.__init__).parameters
        return cls(**{k: v for k, v in known.items() if k in params})

    def _fill(self):
        """Each request's blocks in its persistent row (its req_pool_index), as the runner writes the
        scheduler's new block ids (append_block_ids, then apply_staged_writes)."""
        s = self.setup
        rows = {}
        for g in s.groups:
            rows.setdefault(g.kv_gid, g.table_rows)
        for i in range(s.bs):
            self.tables.append_block_ids(int(s.rows[i]), tuple(rows[k][i] for k in self.kv_groups), overwrite=True)
        self.tables.apply_staged_writes()

    def resolve_mode(self):
        """The CUDA-graph mode V2 settles on at start-up (v2_graph.resolve_mode), set on the config."""
        return v2_graph.resolve_mode(self.vl, self.setup)

    def runtime_mode(self):
        """The mode V2's CudaGraphManager runs the step in ("FULL", "PIECEWISE", "NONE"; v2_graph.py)."""
        self.desc = v2_graph.dispatch(self.vl, self.setup)
        return self.desc.cg_mode.name

    def common_metadata(self, g, capture=False):
        """Group g's CommonAttentionMetadata, as V2's prepare_inputs, prepare_attn and build_attn_metadata
        leave it (built once per step for every KV-cache group). Under a FULL CUDA graph: capture, the
        dummy batch's (prepare_inputs_to_capture); else the replay's, over the same buffers."""
        full = self.desc is not None and self.desc.cg_mode.name == "FULL"
        phase = "capture" if capture else ("replay" if full else "eager")
        if phase not in self._common:
            self.persistent()
            self._common[phase] = self._build(phase)
        return self._common[phase][self.kv_groups.index(g.kv_gid)]

    def persistent(self):
        """The runner's persistent state as start-up leaves it (before any step, so before the CUDA graphs
        a speculator captures over it): BlockTables with each request's blocks in its row, InputBuffers,
        the model state. Made once."""
        if self.tables is None:
            self.tables = self._block_tables()
            self._fill()
            self.buffers = self.input_batch.InputBuffers(self.max_num_reqs, self.max_tokens, self.setup.device)
            self.model_state = v2_graph.model_state(self)

    def _outside(self, block_tables):
        """The entries V2's gather nulled that no query of the attention group's layers reads (wholly below
        every window): kvfuzz's page there in the plan (to_kvfuzz_pages). V2 nulls them per KV-cache
        group, that is per window size, and the page_table family has one table for all sliding layers;
        no kernel reads them either way. A nulled entry a query does read stays null (a finding)."""
        s = self.setup
        self.outside, self.gid_of_layer = {}, {}
        for g in s.groups:
            self.gid_of_layer.update({l: g.gid for l in g.layer_ids})
            if g.kind != "attention" or s.allocation is not None:  # chunked rows are virtual batches; vLLM's
                continue                                          # allocation maps its own (kv_cache_manager.py)
            table = block_tables[self.kv_groups.index(g.kv_gid)].cpu().numpy()
            lowest = lowest_visible(s, g)
            for i, row in enumerate(g.table_rows):
                for lb, page in enumerate(row):
                    if (lb + 1) * s.page_size <= lowest[i] and page != 0 and table[i, lb] == 0:
                        self.outside.setdefault(g.gid, []).append((i, lb, page))

    def to_kvfuzz_pages(self, calls):
        """Recorded page-table calls {layer: [call]} in place: the entries _outside() names hold kvfuzz's page."""
        for layer, layer_calls in calls.items():
            restore = self.outside.get(self.gid_of_layer.get(layer), ())
            for c in layer_calls:
                if not restore or c["page_table"].dim() != 2:
                    continue
                table = c["page_table"].clone()
                for row, lb, page in restore:
                    if row < table.shape[0] and lb < table.shape[1]:
                        table[row, lb] = page
                c["page_table"] = table

    def _build(self, phase):
        s = self.setup
        held = [_Keep() for _ in self.kv_groups]
        config = types.SimpleNamespace(kv_cache_groups=[types.SimpleNamespace(layer_names=[]) for _ in self.kv_groups])
        if phase == "capture":
            v2_graph.capture_inputs(self, self.desc, [[h] for h in held], config)
            return [h.common for h in held]
        n, dev, buffers = s.bs, s.device, self.buffers
        npad, ntok = (self.desc.num_reqs, self.desc.num_tokens) if phase == "replay" else (n, s.num_tokens)
        idx_mapping = torch.from_numpy(s.rows.astype(np.int64)).to(dev)
        # the request states' num_computed_tokens (req_states.num_computed_tokens, [max_num_reqs])
        computed_np = np.zeros(self.max_num_reqs, np.int32)
        computed_np[s.rows] = s.seq_lens - s.query_lens
        computed = torch.from_numpy(computed_np).to(dev)
        # query_start_loc: the runner's cumsum into its persistent buffer, padded with the step's
        # tokens (model_runner.py:1461-1484)
        qsl_np = np.full(self.max_num_reqs + 1, s.num_tokens, np.int32)
        qsl_np[0] = 0
        np.cumsum(s.query_lens, out=qsl_np[1:n + 1])
        buffers.query_start_loc.copy_(torch.from_numpy(qsl_np))
        qsl = buffers.query_start_loc[: npad + 1]
        self.input_batch.prepare_pos_seq_lens(idx_mapping, qsl, computed, buffers.positions, buffers.seq_lens)
        # what V2 computed goes on as computed: its seq_lens to the builders (the reads judge them), its
        # positions to the slot mapping (checked against kvfuzz's writes, as on the V1 path)
        seq_lens = buffers.seq_lens[:npad]
        kwargs = {}
        if "num_computed_tokens" in inspect.signature(self.tables.gather_block_tables).parameters:
            kwargs["num_computed_tokens"] = computed
        block_tables = self.tables.gather_block_tables(idx_mapping, num_reqs_padded=npad, **kwargs)
        self._outside(block_tables)
        slot_mappings = self.tables.compute_slot_mappings(idx_mapping, qsl, buffers.positions[: self.max_tokens],
                                                          num_tokens_padded=ntok)
        for g in s.groups:
            s._check_slots(g, slot_mappings[self.kv_groups.index(g.kv_gid)][: s.num_tokens].cpu().numpy())
        upper = torch.from_numpy((computed_np[s.rows] + s.query_lens).astype(np.int32))
        # a verify row prefills nothing: the step's (target_verify) or a drafting step's target step's (s.valid)
        verify = np.array([v is not None for v in getattr(s, "valid", None) or [None] * n], bool)
        is_prefilling = (s.query_lens > 1) & (s.mode != "target_verify") & ~verify
        attn_groups = [[h] for h in held]
        if phase == "replay":  # the release's prepare_attn with the padded sizes (FULL)
            batch = v2_graph.replay_batch(self, self.desc, idx_mapping, qsl_np,
                                          block_tables, slot_mappings, v2_graph.padded_upper_bound(upper, npad),
                                          is_prefilling)
            self.model_state.prepare_attn(batch, self.vl.cudagraph_mode("FULL"), block_tables, slot_mappings,
                                          attn_groups, config)
            return [h.common for h in held]
        known = dict(
            attn_groups=attn_groups, num_reqs=n, num_tokens=s.num_tokens, query_start_loc_gpu=qsl,
            query_start_loc_cpu=torch.from_numpy(qsl_np[: n + 1]), max_query_len=int(s.query_lens.max()),
            seq_lens=seq_lens, max_seq_len=int(upper.max()), block_tables=block_tables, slot_mappings=slot_mappings,
            kv_cache_config=config, seq_lens_cpu_upper_bound=upper, positions=buffers.positions[: s.num_tokens],
            is_prefilling=torch.from_numpy(is_prefilling), req_idx=s.rows.astype(np.int64))
        build = self.attn_utils.build_attn_metadata
        params = inspect.signature(build).parameters
        build(**{k: v for k, v in known.items() if k in params})
        return [h.common for h in held]


class _Keep:
    """An attention group (and its builder) for build_attn_metadata that keeps the CommonAttentionMetadata
    it is handed: attention_run.py runs the release's builders on it. 0.33 asks the group to build
    (build_metadata), 0.27.1 and 0.28.0 its builder (build(common_prefix_len=0, ...): V2 has no cascade)."""
    layer_names = ()
    kv_cache_spec = None
    supports_update_block_table = False
    common = None

    def get_metadata_builder(self, ubatch_idx=0):
        return self

    def build_metadata(self, common, ubatch_idx=0, **kwargs):
        self.common = common

    def build(self, common_prefix_len, common_attn_metadata, **kwargs):
        assert common_prefix_len == 0
        self.common = common_attn_metadata

    def build_metadata_for_cudagraph_capture(self, common, ubatch_idx=0):  # 0.33
        self.common = common

    def build_for_cudagraph_capture(self, common):  # 0.27.1, 0.28.0: the builder's
        self.common = common
