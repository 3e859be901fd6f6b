"""A pinned sglang release's modules that kvfuzz calls, and its metadata entry points across releases.

Where it sits: the sglang adapter's planners (sglang_planner.py) and the standalone reproducers
`kvfuzz repro` writes (adapters/repro/sglang_metadata.py embeds this file) build a release's backend
on fake_runner.Setup and initialise its metadata here: eagerly, or by CUDA-graph capture then replay,
as each release's runner does.

    sg = Sglang(".sglang/0.5.23")                # the release's own modules, heavy imports stubbed
    backend = importlib.import_module("sglang.srt.layers.attention.triton_backend").TritonAttnBackend(runner)
    sg.init_metadata(backend, setup)             # setup: fake_runner.Setup(sg, case, device)
"""
import dataclasses
import importlib
import inspect
import os
import types

import sglang_import
from engine.release import release_of


class Sglang:
    """The release's modules kvfuzz calls, and the metadata entry points across releases."""

    def __init__(self, site):
        self.site = os.path.abspath(site)
        sglang_import.install_finder(self.site)
        self.version = release_of(site, "sglang")
        fb = importlib.import_module("sglang.srt.model_executor.forward_batch_info")
        self.ForwardMode, self.ForwardBatch = fb.ForwardMode, fb.ForwardBatch
        swa = importlib.import_module("sglang.srt.mem_cache.swa_memory_pool")
        self.SWAKVPool = swa.SWAKVPool
        if not hasattr(swa, "SWATokenToKVPoolAllocator"):  # 0.5.13 on: mem_cache/allocator/swa.py
            swa = importlib.import_module("sglang.srt.mem_cache.allocator.swa")
        self.SWATokenToKVPoolAllocator = swa.SWATokenToKVPoolAllocator
        self.AttentionArch = importlib.import_module("sglang.srt.configs.model_config").AttentionArch
        self.AttentionType = importlib.import_module("sglang.srt.layers.radix_attention").AttentionType
        server_args = importlib.import_module("sglang.srt.server_args")
        self._server_args = server_args
        # 0.5.17 on: the backends read the server's configuration through sglang.srt.runtime_context,
        # published from a real ServerArgs (publish); before, from server_args' module global (0.5.14
        # to 0.5.16 have a runtime_context too, a read-through of the parallel state only, no publish).
        self.runtime = None
        if os.path.exists(os.path.join(site, "sglang", "srt", "runtime_context.py")):
            runtime = importlib.import_module("sglang.srt.runtime_context")
            self.runtime = runtime if hasattr(runtime, "publish") else None
        if self.runtime is not None:
            self._namespace = importlib.import_module("sglang.srt.arg_groups.arg_utils").namespace_of(
                server_args.ServerArgs)
            self.KVIndexTranslator = None  # 0.5.19 on: the runner's KVIndexTranslator
            if os.path.exists(os.path.join(site, "sglang", "srt", "mem_cache", "kv_index_translator.py")):
                translator = importlib.import_module("sglang.srt.mem_cache.kv_index_translator")
                self.KVIndexTranslator = translator.KVIndexTranslator
            self.SpeculativeAlgorithm = importlib.import_module("sglang.srt.speculative.spec_info").SpeculativeAlgorithm
        # One process, tensor- and context-parallel size 1: the attention TP and CP groups the backends
        # ask for (0.5.14 to 0.5.18 through runtime_context.get_parallel, which reads these groups;
        # 0.5.19 on it reads the widths server_args stamps, and these stay unread).
        parallel = importlib.import_module("sglang.srt.distributed.parallel_state")
        parallel._ATTN_TP = types.SimpleNamespace(world_size=1, rank_in_group=0, rank=0)
        parallel._ATTN_CP = types.SimpleNamespace(world_size=1, rank_in_group=0, rank=0)
        # 0.5.16 to 0.5.20: the model runner carries a ParallelState (model_runner.ps; FA reads its tp and
        # attn_cp sizes): the release's own one-rank one
        self.parallel_state = None
        if os.path.exists(os.path.join(site, "sglang", "srt", "distributed", "parallel_state_wrapper.py")):
            trivial = getattr(importlib.import_module("sglang.srt.distributed.parallel_state_wrapper").ParallelState,
                              "trivial", None)  # 0.5.14 and 0.5.15 have the class, unread by the backends
            self.parallel_state = trivial() if trivial else None

    def unquantized_kv_cache_method(self):
        """The quant method an unquantized KV pool carries (FlashInfer asks it how to read K/V)."""
        # 0.5.16 on (FlashInfer's __init__ asks it); 0.5.14 and 0.5.15's module has no such class
        if not os.path.exists(os.path.join(self.site, "sglang", "srt", "layers", "quantization",
                                           "fp4_kv_cache_quant_method.py")):
            return None
        module = importlib.import_module("sglang.srt.layers.quantization.fp4_kv_cache_quant_method")
        return module.UnquantizedKVCacheMethod() if hasattr(module, "UnquantizedKVCacheMethod") else None

    def server_args(self, fields):
        """The server's arguments for one case. 0.5.23 on: a real ServerArgs of the fields the release
        declares, published as the scheduler process publishes it (rank 0 of one, GPU 0); before: the
        namespace the backends read through server_args.get_global_server_args()."""
        if self.runtime is None:  # the dataclass's defaults (its __post_init__ probes the machine), then ours
            defaults = {}
            for f in dataclasses.fields(self._server_args.ServerArgs):
                if f.default is not dataclasses.MISSING:
                    defaults[f.name] = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    defaults[f.name] = f.default_factory()
            args = types.SimpleNamespace(**{**defaults, **fields})
            if hasattr(self._server_args.ServerArgs, "get_attention_backends"):  # FlashInfer asks it (0.5.16)
                args.get_attention_backends = types.MethodType(self._server_args.ServerArgs.get_attention_backends, args)
            return args
        known = {k: v for k, v in fields.items() if k in self._namespace}
        args = self._server_args.ServerArgs(model_path="dummy", **known)
        if hasattr(self.runtime, "SpawnRanks"):  # 0.5.21 on
            self.runtime.publish(args, role="scheduler", ranks=self.runtime.SpawnRanks(world_rank=0, gpu_id=0))
        else:
            self.runtime.publish(args, role="scheduler")
            parallel = self.runtime.get_parallel()
            if hasattr(parallel, "stamp_derived_widths"):  # 0.5.19: initialize_model_parallel stamps them, one rank
                parallel.stamp_derived_widths(**self.runtime.derive_parallel_widths(
                    tp_size=1, attn_cp_size=1, attn_dp_size=1, moe_ep_size=1, moe_dp_size=1, dcp_size=1,
                    dcp_enabled=False))
        return args

    def module(self, name):
        return importlib.import_module(f"sglang.srt.layers.attention.{name}")

    def eagle_verify_input(self):
        """sglang's EagleVerifyInput, imported at the first verify case: its module pulls in much of
        the server (MoE, batch overlap); if that fails here, verify cases are unsupported, not findings."""
        try:
            return importlib.import_module("sglang.srt.speculative.eagle_info").EagleVerifyInput
        except Exception as e:  # noqa: BLE001 - any import-time failure of the server's modules
            raise UnsupportedCase(f"sglang.srt.speculative.eagle_info does not import here: {e}") from e

    def publish_server_args(self, setup):
        """Before 0.5.17 the backends read the server's arguments from server_args' module global (some
        in their __init__: publish before building them)."""
        if self.runtime is None:
            self._server_args._global_server_args = setup.runner.server_args

    def init_metadata(self, backend, setup):
        """Eager metadata, or a CUDA graph captured at padded_bs and replayed with this batch."""
        self.publish_server_args(setup)
        if not setup.graph:
            # model_runner.forward_idle: an IDLE batch of no rows keeps the old metadata
            if setup.fb.batch_size > 0 or setup.mode != "idle":
                backend.init_forward_metadata(setup.fb)
            return
        import torch

        fb, n = setup.fb, setup.padded_bs
        tokens = int(fb.positions.shape[0])
        # cuda_graph_runner: an IDLE batch replays the graph captured for DECODE
        capture_mode = self.ForwardMode.DECODE if fb.forward_mode.is_idle() else fb.forward_mode
        backend.init_cuda_graph_state(n, tokens)
        fill = backend.get_cuda_graph_seq_len_fill_value()
        # The runner's static buffers: captured with fill values, refilled in place for the replay.
        seq_lens = torch.full_like(fb.seq_lens, fill)
        rows = torch.zeros_like(fb.req_pool_indices)
        if hasattr(backend, "init_forward_metadata_capture_cuda_graph"):  # up to 0.5.12
            backend.init_forward_metadata_capture_cuda_graph(n, tokens, rows, seq_lens, None, capture_mode,
                                                             fb.spec_info)
            replay = backend.init_forward_metadata_replay_cuda_graph
            extra = {"out_cache_loc": fb.out_cache_loc} if "out_cache_loc" in inspect.signature(replay).parameters else {}
            replay(n, fb.req_pool_indices, fb.seq_lens, fb.seq_lens_sum, None, fb.forward_mode, fb.spec_info,
                   seq_lens_cpu=fb.seq_lens_cpu, **extra)
            return
        # 0.5.13 on (cuda_graph_runner.capture_one_batch_size / replay_prepare): out_graph(in_capture=True)
        # and in_graph at capture; out_graph on the replay view, then the graph replays the in-graph
        # part over the same static buffers, here by running it again on the capture batch.
        capture = types.SimpleNamespace(**vars(fb))
        capture.forward_mode, capture.req_pool_indices, capture.seq_lens = capture_mode, rows, seq_lens
        capture.seq_lens_cpu, capture.seq_lens_sum = seq_lens.cpu(), None
        backend.init_forward_metadata_out_graph(capture, in_capture=True)
        backend.init_forward_metadata_in_graph(capture)
        rows.copy_(fb.req_pool_indices)
        seq_lens.copy_(fb.seq_lens)
        view = types.SimpleNamespace(  # cuda_graph_runner.build_replay_fb_view
            batch_size=n, forward_mode=capture_mode, actual_forward_mode=fb.forward_mode,
            input_ids=torch.zeros(tokens, dtype=torch.int64, device=fb.seq_lens.device), req_pool_indices=rows,
            seq_lens=seq_lens, seq_lens_sum=fb.seq_lens_sum, seq_lens_cpu=fb.seq_lens_cpu, encoder_lens=None,
            out_cache_loc=fb.out_cache_loc, spec_info=fb.spec_info)
        if self.runtime is not None:  # 0.5.23's view adds the padded positions and the batch's KVLocPlan
            view.positions, view.num_padding = fb.positions, n - setup.bs
            for name in ("out_cache_loc_virtual", "kv_loc_plan", "kv_loc_cols", "max_seq_len_host",
                         "max_seq_len_override", "lora_ids", "can_run_decode_cuda_graph"):
                if hasattr(fb, name):  # those the release's ForwardBatch has (kv_loc_plan: 0.5.22 on)
                    setattr(view, name, getattr(fb, name))
            view.origin_out_cache_loc = view.out_cache_loc_dsv4 = view.mamba_track_indices = None
        backend.init_forward_metadata_out_graph(view)
        backend.init_forward_metadata_in_graph(capture)

    def init_draft_metadata(self, multi, setup):
        """TritonMultiStepDraftBackend's metadata for every draft step at once, as the EAGLE worker builds it."""
        # The EAGLE worker builds every step's metadata once, before step 0, when the batch's positions
        # are the drafts' first positions (seq_len, per branch); generate_draft_decode_kv_indices sums them.
        fb = types.SimpleNamespace(**vars(setup.fb))
        fb.positions = fb.seq_lens.repeat_interleave(setup.topk)
        if not setup.graph:
            multi.init_forward_metadata(fb)
            return
        n = setup.padded_bs
        multi.init_cuda_graph_state(n, n * setup.topk)
        if hasattr(multi, "init_forward_metadata_capture_cuda_graph"):  # up to 0.5.12
            multi.init_forward_metadata_capture_cuda_graph(fb)
            multi.init_forward_metadata_replay_cuda_graph(fb, n)
            return
        # 0.5.13 on (eagle_draft_cuda_graph_runner): out_graph(in_capture=True) and in_graph at capture; at
        # replay out_graph on the batch with its padding, then the graph replays the in-graph part.
        multi.init_forward_metadata_out_graph(fb, in_capture=True)
        multi.init_forward_metadata_in_graph(fb)
        multi.init_forward_metadata_out_graph(types.SimpleNamespace(**vars(fb), num_padding=n - setup.bs))
        multi.init_forward_metadata_in_graph(fb)
