"""The vLLM release kvfuzz drives: its modules, and the entry points that moved between releases.

    vl = Vllm(".vllm/0.33.0")            # ci/vllm.sh installs the release's Python source there
    fa = vl.flash_attn                    # vllm.v1.attention.backends.flash_attn
    vl = Vllm(".vllm/0.33.0", "flashinfer")  # layers, caches and block sizes of FlashInferBackend
    table = vl.block_table(block_size=16, max_num_reqs=8, max_num_blocks_per_req=64, max_num_batched_tokens=8192)

The process plays one CUDA device of compute capability 9.0 (an H100, where vLLM runs FlashAttention 3)
with one rank: vLLM's platform probe is replaced by its own CUDA platform class answering so, and
FlashAttention's version probe answers 3. Kernels stay stubs (vllm_import.py) until recorded.
`backend` ("fa", "triton", "tree", "flashinfer") picks the attention backend whose KV-cache shape, layout, head and
block sizes the caches and layers take.
"""
import importlib
import os

import torch

import vllm_import
from engine.release import release_of

FA_VERSION = 3


def triton_interpreter():
    """On CPU the metadata kernels written in Triton run in Triton's interpreter; vLLM enables Triton
    only where exactly one GPU driver is active, so the CUDA driver reports active there."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        from triton.backends import backends

        backends["nvidia"].driver.is_active = staticmethod(lambda: True)


def install_platform():
    """Makes vLLM's current_platform its own CUDA platform class answering for one sm90 device (no NVML,
    no driver): what the metadata code and the Triton kernel (adapters/gpu/vllm_triton.py) ask it."""
    platforms = importlib.import_module("vllm.platforms")
    cuda = importlib.import_module("vllm.platforms.cuda")
    interface = importlib.import_module("vllm.platforms.interface")
    base = getattr(cuda, "NonNvmlCudaPlatform", None) or cuda.CudaPlatform

    class KvfuzzCudaPlatform(base):
        @classmethod
        def get_device_capability(cls, device_id=0):
            return interface.DeviceCapability(9, 0)

        @classmethod
        def has_device_capability(cls, capability, device_id=0):
            if isinstance(capability, tuple):
                capability = capability[0] * 10 + capability[1]
            return 90 >= capability

        @classmethod
        def is_device_capability(cls, capability, device_id=0):
            if isinstance(capability, tuple):
                capability = capability[0] * 10 + capability[1]
            return capability == 90

        @classmethod
        def is_device_capability_family(cls, capability, device_id=0):
            return capability // 10 == 9

        @classmethod
        def get_device_name(cls, device_id=0):
            return "NVIDIA H100 80GB HBM3"

        @classmethod
        def num_compute_units(cls, device_id=0):  # an H100's SMs (MLA decode kernels size splits by them)
            return 132

        @classmethod
        def is_pin_memory_available(cls):  # no pinned host memory without a CUDA device (0.32 asks here)
            import torch

            return torch.cuda.is_available()

    platforms._current_platform = KvfuzzCudaPlatform()


class Vllm:
    def __init__(self, site, backend="fa"):
        site = os.path.abspath(site)
        vllm_import.install_finder(site)
        self.site = site
        self.version = release_of(site, "vllm")
        triton_interpreter()
        install_platform()
        self._fa_version()
        self.flash_attn = importlib.import_module("vllm.v1.attention.backends.flash_attn")
        self.utils = importlib.import_module("vllm.v1.attention.backends.utils")
        self.kv_cache_interface = importlib.import_module("vllm.v1.kv_cache_interface")
        self.block_table_module = importlib.import_module("vllm.v1.worker.block_table")
        self.CommonAttentionMetadata = self._first("vllm.v1.attention.backend",
                                                   "vllm.v1.attention.backends.utils").CommonAttentionMetadata
        self._host_copy_of_seq_lens()
        self._no_pinned_memory()
        self.AttentionType = self._first("vllm.v1.attention.backend", "vllm.attention.backends.abstract",
                                         attr="AttentionType").AttentionType
        self.backend = backend
        self.flashinfer = None
        if backend == "flashinfer":  # vllm.v1.attention.backends.flashinfer
            self.flashinfer = importlib.import_module("vllm.v1.attention.backends.flashinfer")
            self._no_pinned_memory()

    def stub_packages(self, *names):
        """Stub these packages too (imports after this call): code that imports the model loader,
        model classes or the sampler for types and helpers the metadata path never calls."""
        import sys

        from engine import stub_import

        finder = next(f for f in sys.meta_path if isinstance(f, stub_import._Finder))
        finder.stubbed = tuple(dict.fromkeys(finder.stubbed + names))

    @property
    def backend_cls(self):
        """The attention backend class the adapter's layers run (attention_backend(backend))."""
        return self.attention_backend(self.backend) or self.flash_attn.FlashAttentionBackend

    def _first(self, *names, attr="CommonAttentionMetadata"):
        """The first of several module paths (releases moved them) that holds `attr`."""
        for name in names:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError:
                continue
            if hasattr(module, attr):
                return module
        raise ModuleNotFoundError(f"vllm {self.version}: none of {names} holds {attr}")

    def _host_copy_of_seq_lens(self):
        """CommonAttentionMetadata's deprecated seq_lens_cpu property (0.2x to 0.29.0: `_seq_lens_cpu`,
        filled on first use with seq_lens.to("cpu")) copies the GPU's seq_lens to the host. On a CPU
        device `.to("cpu")` returns seq_lens itself, so the copy and seq_lens would be one tensor, and
        EAGLE's drafting loop, which advances both (the Triton kernel seq_lens, then
        _update_positions_dependent_metadata `_seq_lens_cpu += 1`), would advance it twice: seq_lens
        there is handed the copy a GPU makes (docs/vllm.md "EAGLE drafting": once a finding of ours)."""
        import dataclasses

        cls = self.CommonAttentionMetadata
        prop = cls.__dict__.get("seq_lens_cpu")
        if not isinstance(prop, property) or "_seq_lens_cpu" not in {f.name for f in dataclasses.fields(cls)}:
            return

        def seq_lens_cpu(metadata, fget=prop.fget):
            if metadata._seq_lens_cpu is None and metadata.seq_lens.device.type == "cpu":
                metadata._seq_lens_cpu = metadata.seq_lens.clone()
            return fget(metadata)

        cls.seq_lens_cpu = property(seq_lens_cpu)

    def _no_pinned_memory(self):
        """Without a CUDA device there is no pinned host memory: the modules' PIN_MEMORY flags say so."""
        import sys

        import torch

        if torch.cuda.is_available():
            return
        for name, module in list(sys.modules.items()):
            if name.startswith("vllm.") and getattr(module, "PIN_MEMORY", None) is True:
                module.PIN_MEMORY = False

    def _fa_version(self):
        """FlashAttention 3, as vLLM picks it on sm90 (the version probe asks vllm_flash_attn's build)."""
        for name in ("vllm.v1.attention.backends.fa_utils", "vllm.attention.utils.fa_utils"):
            try:
                fa_utils = importlib.import_module(name)
            except ModuleNotFoundError:
                continue
            fa_utils.get_flash_attn_version = lambda *args, **kwargs: FA_VERSION
            if hasattr(fa_utils, "is_flash_attn_varlen_func_available"):
                fa_utils.is_flash_attn_varlen_func_available = lambda: True

    def chunked_local_backend(self, underlying, chunk, block_size):
        """The release's ChunkedLocalAttention backend over `underlying` (Llama 4's local layers);
        releases up to 0.11 took the block size as a third argument."""
        import inspect

        module = self._first("vllm.model_executor.layers.attention.chunked_local_attention",
                             "vllm.attention.layers.chunked_local_attention",
                             attr="create_chunked_local_attention_backend")
        create = module.create_chunked_local_attention_backend
        extra = [block_size] if len(inspect.signature(create).parameters) > 2 else []
        return create(underlying, chunk, *extra)

    def kv_cache_layout(self, backend=None):
        """The KV-cache layout the engine core resolves for a model on `backend` (default the adapter's;
        0.33 on: the first layout the backend supports, get_supported_kv_cache_layouts); None before
        layouts existed."""
        if not hasattr(self.utils, "get_supported_kv_cache_layouts"):
            return None
        return self.utils.get_supported_kv_cache_layouts([backend or self.backend_cls])[0]

    def kv_cache_groups(self, config, specs):
        """The release's KV-cache groups of per-layer specs {name: spec} (get_kv_cache_groups: the
        hybrid manager's grouping, or one unified group when config disables it)."""
        try:
            module = self._first("vllm.v1.core.kv_cache_planning", "vllm.v1.core.kv_cache_utils",
                                 attr="get_kv_cache_groups")
        except ModuleNotFoundError:  # up to 0.10: the groups of the whole KV-cache configuration
            utils = importlib.import_module("vllm.v1.core.kv_cache_utils")
            return utils.get_kv_cache_config(config, dict(specs), 1 << 40).kv_cache_groups
        return module.get_kv_cache_groups(config, dict(specs))

    def kv_cache_shape(self, num_blocks, block_size, num_kv_heads, head_size, backend=None):
        """A layer's KV cache tensor as the release allocates it for `backend` (default the adapter's):
        the backend's get_kv_cache_shape where it has one (up to about 0.3x: FlashAttention's
        [2, blocks, block_size, heads, dim], Triton's and FlashInfer's [blocks, 2, block_size, heads,
        dim]), else the unified page layout the impls' forward documents ([blocks, heads, block_size, 2 * dim])."""
        backend = backend or self.backend_cls
        if hasattr(backend, "get_kv_cache_shape"):
            return tuple(backend.get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size))
        return (num_blocks, num_kv_heads, block_size, 2 * head_size)

    def publish(self, config):
        """The configuration the builders look up (set_current_vllm_config's global)."""
        import sys

        for name in ("vllm.config.vllm", "vllm.config"):
            module = sys.modules.get(name)
            if module is not None and hasattr(module, "_current_vllm_config"):
                module._current_vllm_config = config

    def head_size(self, head_dim, backend=None):
        """The head size vLLM's layers are built with: the case's where `backend` (default the
        adapter's) takes it, else 64. No metadata builder reads it for which keys are read (FA3's
        scheduler sizes tiles with it, FlashInfer's plan() picks its kernel by it); the executor
        attends with the case's own head dim."""
        backend = backend or self.backend_cls
        if hasattr(backend, "supports_head_size"):
            return head_dim if backend.supports_head_size(head_dim) else 64
        if hasattr(backend, "get_supported_head_sizes"):
            return head_dim if head_dim in backend.get_supported_head_sizes() else 64
        try:  # Triton up to about 0.1x: validate_head_size raises below 32
            backend.validate_head_size(head_dim)
        except ValueError:
            return 64
        return head_dim

    @property
    def triton_attn(self):
        """vllm.v1.attention.backends.triton_attn (imported at first use)."""
        return importlib.import_module("vllm.v1.attention.backends.triton_attn")

    @property
    def tree_attn(self):
        """vllm.v1.attention.backends.tree_attn (0.10.x, 0.11.x; imported at first use)."""
        return importlib.import_module("vllm.v1.attention.backends.tree_attn")

    def attention_backend(self, name):
        """The AttentionBackend class of a planner's --backend (KV-cache layout, head and block
        sizes): fa, triton, flashinfer and tree (TREE_ATTN, 0.10 and 0.11 only: None where the
        release has none)."""
        if name == "triton":
            return self.triton_attn.TritonAttentionBackend
        if name == "flashinfer":
            return importlib.import_module("vllm.v1.attention.backends.flashinfer").FlashInferBackend
        if name == "tree":
            try:
                return self.tree_attn.TreeAttentionBackend
            except ModuleNotFoundError:
                return None
        return self.flash_attn.FlashAttentionBackend if name == "fa" else None

    def layers_of(self, backend, kv_cache_dtype="auto"):
        """What `backend`'s layers answer, as fake_runner.Setup asks an attention backend (mla_backends.py
        answers the same for MLA): head_size, supports_block_size, kv_cache_shape, dtype, mla, name;
        kv_cache_dtype (vLLM's --kv-cache-dtype: "auto", or "fp8", whose cache vLLM allocates as bytes,
        STR_DTYPE_TO_TORCH_DTYPE's torch.uint8, and the impls view as e4m3) and the cache tensor's dtype."""
        vl = self
        if kv_cache_dtype not in ("auto", "fp8"):
            raise ValueError(f"kv_cache_dtype {kv_cache_dtype}: auto or fp8")
        if kv_cache_dtype != "auto" and hasattr(backend, "supports_kv_cache_dtype") and \
                not backend.supports_kv_cache_dtype(kv_cache_dtype):
            raise ValueError(f"vLLM {self.version}'s {backend.get_name()} does not take --kv-cache-dtype {kv_cache_dtype} "
                             "(its supports_kv_cache_dtype)")

        class Layers:
            mla, dtype, name = False, torch.float16, backend.get_name()
            cache_dtype = torch.uint8 if kv_cache_dtype == "fp8" else dtype

            @staticmethod
            def head_size(head_dim):
                return vl.head_size(head_dim, backend)

            @staticmethod
            def supports_block_size(block_size):
                return vl.supports_block_size(block_size, backend)

            @staticmethod
            def kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size):
                return vl.kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size, backend)

        Layers.kv_cache_dtype = kv_cache_dtype
        return Layers

    def supports_block_size(self, block_size, backend=None):
        """Whether the release runs `backend` (default the adapter's) at this block size.
        FlashAttention and Triton: a multiple of 16 in every release (supports_block_size from 0.1x
        on, get_kv_cache_shape's check before). FlashInfer: a kernel block size it lists (16, 32, 64
        on sm90; a larger multiple would be split into kernel blocks, which is not modelled), up to
        0.11 any --block-size vLLM accepts."""
        backend = backend or self.backend_cls
        if backend.__name__ == "FlashInferBackend":
            if hasattr(backend, "get_supported_kernel_block_sizes"):
                return block_size in backend.get_supported_kernel_block_sizes()
            return block_size in (1, 8, 16, 32, 64, 128)
        if hasattr(backend, "supports_block_size"):
            return bool(backend.supports_block_size(block_size))
        try:
            backend.get_kv_cache_shape(1, block_size, 1, 16)
        except ValueError:
            return False
        return True

    @property
    def AttentionCGSupport(self):
        return self._first("vllm.v1.attention.backend", "vllm.v1.attention.backends.utils",
                           attr="AttentionCGSupport").AttentionCGSupport

    def cudagraph_support(self, builder_cls, config, spec):
        """A builder's CUDA-graph support as the runner asks it (a classmethod from 0.1x on, before a
        class attribute)."""
        if hasattr(builder_cls, "get_cudagraph_support"):
            return builder_cls.get_cudagraph_support(config, spec)
        for name in ("cudagraph_support", "_cudagraph_support", "attn_cudagraph_support"):
            if hasattr(builder_cls, name):
                return getattr(builder_cls, name)
        raise AttributeError(f"vllm {self.version}: {builder_cls.__name__} states no CUDA-graph support")

    @property
    def forward_context(self):
        """vllm.forward_context (BatchDescriptor; imported at first use)."""
        return importlib.import_module("vllm.forward_context")

    def cudagraph_mode(self, name):
        module = self._first("vllm.config.compilation", "vllm.config", attr="CUDAGraphMode")
        return getattr(module.CUDAGraphMode, name)

    def block_table(self, **kwargs):
        """The release's BlockTable (vllm/v1/worker/block_table.py), built with the arguments it takes."""
        import inspect

        import torch

        cls = self.block_table_module.BlockTable
        known = dict(dict(pin_memory=False, device=torch.device("cpu"), cp_kv_cache_interleave_size=1,
                          dcp_kv_cache_interleave_size=1, kernel_block_size=kwargs["block_size"]), **kwargs)
        params = inspect.signature(cls.__init__).parameters
        return cls(**{k: v for k, v in known.items() if k in params})

    def slot_mapping(self, table, num_reqs, query_start_loc, positions, query_lens):
        """The release's slot mapping of the step's tokens, computed by `table` (host tensor)."""
        import inspect

        import numpy as np

        params = list(inspect.signature(table.compute_slot_mapping).parameters)
        if params[0] == "req_indices":  # up to about 0.1x: numpy, then committed
            req_indices = np.repeat(np.arange(num_reqs, dtype=np.int32), query_lens)
            table.compute_slot_mapping(req_indices, positions.numpy())
            table.commit_slot_mapping(int(positions.shape[0]))
        else:  # a Triton kernel over the device block table (Triton's interpreter on CPU)
            table.compute_slot_mapping(num_reqs, query_start_loc.to(torch_int32()), positions)
        mapping = table.slot_mapping  # a CpuGpuBuffer from about 0.11 on, a device tensor before
        return (mapping.gpu if hasattr(mapping, "gpu") else mapping).clone()

    def device_block_table(self, table, num_reqs):
        import inspect

        if inspect.signature(table.get_device_tensor).parameters:
            return table.get_device_tensor(num_reqs)
        return table.get_device_tensor()[:num_reqs]


def torch_int32():
    import torch

    return torch.int32
