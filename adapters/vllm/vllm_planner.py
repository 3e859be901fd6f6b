"""vLLM v1's real attention-metadata builders as kvfuzz planners, at a pinned release.

    python3 adapters/vllm/vllm_planner.py --site .vllm/0.33.0 --backend fa|triton|tree|flashinfer|mla_flashmla|mla_flashattn|mla_triton [--device cpu|cuda]
        [--runner v1|v2|auto]     # the V1 model runner, Model Runner V2 (v2_runner.py), or the one vLLM picks
        [--v2-speculator eagle|mtp]   # --runner v2: the draft model V2's speculator drafts with (v2_drafting.py)
        [--kv-cache-dtype auto|fp8]   # fa, mla_*: vLLM's --kv-cache-dtype (fp8: the cache in e4m3 bytes; fa: with the layers' scales)
        [--dcp R [--dcp-interleave I]]  # fa: decode-context parallelism over R ranks, interleave I (dcp.py)

kvfuzz sends each case's req_to_token, full_to_swa and forward batch; this adapter maps them onto
vLLM's KV-cache groups and BlockTable (fake_runner.py), runs the release's metadata builder of each
group unchanged (FlashAttentionMetadataBuilder.build from CommonAttentionMetadata; the
ChunkedLocalAttention builder for chunked layers) and every layer's forward with the kernel
recorded (recorder.py). The recorded kernel arguments are the plan of the backend's family
(fa: page_table, flash_attn_page_table.py; triton: page_table, triton_page_table.py; tree:
paged_csr, tree_attn_paged_csr.py, spec-decode verify trees on 0.10/0.11; flashinfer: the
FlashInferMetadataBuilder's wrapper plans as paged_csr, flashinfer_paged_csr.py); kvfuzz's checked
executor runs it and every property applies. On CPU the Triton metadata kernels (the slot mapping,
0.2x on) run in Triton's interpreter.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
# pydantic, where ci/vllm.sh installed it (vLLM's configuration classes need the real package)
sys.path.append(os.path.join(HERE, "..", "..", ".vllm", "pyextra"))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--site", required=True, help="folder holding the wheel's `vllm/` (ci/vllm.sh installs it)")
    p.add_argument("--backend", choices=["fa", "triton", "tree", "flashinfer", "mla_flashmla", "mla_flashattn", "mla_triton"],
                   default="fa", help="fa: FlashAttention; triton; tree: TreeAttention (0.10/0.11); flashinfer; "
                   "mla_*: the MLA backend (FlashMLA, FlashAttention MLA, Triton MLA)")
    p.add_argument("--mla-workspace", choices=["release", "floor"], default="release",
                   help="mla_*: the context gather's workspace: the release's size, or max_num_seqs x block size "
                        "(contexts span several chunks; mla_backends.py)")
    p.add_argument("--device", default="cpu", help="cpu (Triton interpreter) or cuda")
    p.add_argument("--cascade", choices=["heuristic", "always", "never"], default="heuristic",
                   help="cascade attention over shared prefix blocks: vLLM's decision, its support conditions "
                        "without the cost model, or off (cascade.py)")
    p.add_argument("--allocator", choices=["kvfuzz", "vllm"], default="kvfuzz",
                   help="who fills the block tables: kvfuzz's allocator history, or vLLM's own KVCacheManager "
                        "replaying it (kv_cache_manager.py; fa and triton)")
    p.add_argument("--cudagraphs", choices=["case", "every-step"], default="case",
                   help="which steps run under CUDA graphs: the case's CUDA-graph batches only, or every step, "
                        "its size captured as vLLM captures every size up to its largest (the release's own "
                        "dispatcher picks FULL, PIECEWISE or none; cudagraph_dispatch.py)")
    p.add_argument("--runner", choices=["v1", "v2", "auto"], default="v1",
                   help="which model runner prepares the step: V1 (gpu_model_runner.py), Model Runner V2 "
                        "(vllm/v1/worker/gpu/, 0.2x on; fa and triton, eager and CUDA graphs, EAGLE drafting with its own "
                        "speculator: v2_runner.py, v2_drafting.py), or the "
                        "one the release's VllmConfig.use_v2_model_runner picks for the case")
    p.add_argument("--v2-speculator", choices=["eagle", "mtp", "gemma4"], default="eagle",
                   help="--runner v2, drafting steps: the draft model vLLM is configured with, and so the speculator "
                        "V2's init_speculator builds: eagle (an EAGLE head: EagleSpeculator) or mtp (a DeepSeek-V3-"
                        "style MTP module, method mtp, one next-n layer: MTPSpeculator) or gemma4 (Gemma-4's MTP assistant, "
                        "a gemma4_mtp draft config: Gemma4Speculator, on draft_q_only and draft_extend_v2; v2_drafting.py)")
    p.add_argument("--no-async-scheduling", action="store_true",
                   help="EAGLE drafting as vLLM's --no-async-scheduling runs it: the runner hands the proposer its "
                        "host seq_lens (_seq_lens_cpu, 0.2x to 0.29.0: the same tensor as seq_lens_cpu_upper_bound) "
                        "where async scheduling, vLLM's default with EAGLE, hands none (eagle_drafting.py)")
    p.add_argument("--multi-group-drafter", choices=["step3p5", "gemma4"], default="step3p5",
                   help="the proposer that drafts on layers of several KV-cache groups (V1 runner): Step3p5MTPProposer "
                        "(0.23.0 on, draft_decode and draft_extend_v2) or Gemma4Proposer (0.22.0 on; its first pass, "
                        "draft_extend_v2, and its constant-position drafting steps, draft_q_only: draft_groups.py)")
    p.add_argument("--kv-cache-dtype", choices=["auto", "fp8"], default="auto",
                   help="vLLM's --kv-cache-dtype: auto (the model's dtype) or fp8 (e4m3 bytes; fa: the impls built "
                        "for fp8 with each layer's k_scale / v_scale, the q/k/v_descale each kernel call is handed "
                        "recorded into the plan; MLA backends: the release's fp8 decode path, FlashMLA's "
                        "get_mla_metadata_dense_fp8 and flash_mla_with_kvcache_fp8 from 0.15 on, recorded; mla_backends.py)")
    p.add_argument("--dcp", type=int, default=1,
                   help="fa: vLLM's --decode-context-parallel-size R: the step runs once per rank with vLLM's DCP group "
                        "stubbed, each rank's pool what its slot mapping wrote; kvfuzz's page is vLLM's scheduler block "
                        "of block_size x R tokens (dcp.py)")
    p.add_argument("--dcp-interleave", type=int, default=1,
                   help="with --dcp: vLLM's cp_kv_cache_interleave_size I (dcp_kv_cache_interleave_size before it): I "
                        "consecutive tokens per rank")
    p.add_argument("--fa-version", type=int, choices=[2, 3], default=3,
                   help="with --dcp: the FlashAttention version vLLM picked (3 on sm90; 2 on sm80, where 0.27 on run "
                        "mixed batches' DCP context through cp_utils.run_split_fa2_dcp_context_attention: dcp.py)")
    p.add_argument("--name", default=None, help="the adapter's name (default vllm_<backend>_<release>)")
    args = p.parse_args()
    if not os.path.isdir(os.path.join(args.site, "vllm")):
        p.error(f"--site {args.site}: no vllm/ folder there (install a release with ci/vllm.sh)")
    if args.cascade == "always" and args.backend != "fa":
        p.error(f"--cascade always: vLLM runs cascade attention on FlashAttention only, not --backend {args.backend}")
    if args.mla_workspace != "release" and not args.backend.startswith("mla_"):
        p.error(f"--mla-workspace {args.mla_workspace}: only the MLA backends (mla_*) gather context into a workspace")
    if args.allocator == "vllm" and args.backend not in ("fa", "triton"):
        p.error(f"--allocator vllm: the page_table backends (fa, triton) map vLLM's blocks back, not --backend {args.backend}")
    if args.runner != "v1" and args.backend not in ("fa", "triton"):
        p.error(f"--runner {args.runner}: Model Runner V2 is modelled on --backend fa and triton, not {args.backend}")
    if args.kv_cache_dtype != "auto" and not (args.backend.startswith("mla_") or args.backend in ("fa", "flashinfer")):
        p.error(f"--kv-cache-dtype {args.kv_cache_dtype}: modelled on FlashAttention (fa), FlashInfer and the MLA "
                f"backends (mla_*), not --backend {args.backend}")
    if args.runner == "v2" and args.no_async_scheduling:
        p.error("--runner v2 --no-async-scheduling: Model Runner V2's speculator reads no host seq_lens (the flag "
                "changes what the V1 runner hands EagleProposer only: eagle_drafting.py)")
    if args.runner != "v1" and args.multi_group_drafter != "step3p5":
        p.error(f"--runner {args.runner} --multi-group-drafter {args.multi_group_drafter}: the flag picks the V1 "
                "runner's proposer (draft_groups.py); Model Runner V2's speculators are its own (v2_drafting.py)")
    if args.v2_speculator != "eagle" and args.runner != "v2":
        p.error(f"--v2-speculator {args.v2_speculator} needs --runner v2: it picks Model Runner V2's speculator "
                f"(v2_drafting.py), not --runner {args.runner}'s")
    if args.dcp < 1 or args.dcp_interleave < 1:
        p.error(f"--dcp {args.dcp} --dcp-interleave {args.dcp_interleave}: both must be at least 1")
    if args.dcp_interleave != 1 and args.dcp == 1:
        p.error("--dcp-interleave: only with --dcp R > 1")
    if args.dcp > 1 and (args.backend != "fa" or args.runner != "v1" or args.allocator != "kvfuzz" or
                         args.cascade == "always" or args.kv_cache_dtype != "auto" or args.cudagraphs != "case"):
        p.error(f"--dcp {args.dcp}: modelled on --backend fa, the V1 runner, kvfuzz's allocator, no cascade, "
                "--kv-cache-dtype auto and the case's CUDA graphs (dcp.py)")
    if args.fa_version != 3 and args.dcp == 1:
        p.error(f"--fa-version {args.fa_version}: modelled under --dcp only (FlashAttention 3 elsewhere)")
    if args.runner == "v2" and args.cascade == "always":
        p.error("--runner v2 --cascade always: Model Runner V2 runs no cascade attention (vllm/v1/worker/gpu/ has none)")
    return args


ARGS = parse_args()
if ARGS.device == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

import kvfuzz_adapter as kv  # noqa: E402
from fake_runner import Setup, UnsupportedCase  # noqa: E402
import vllm_release  # noqa: E402
from vllm_release import Vllm  # noqa: E402
from eagle_drafting import MODES as DRAFTING  # noqa: E402

vllm_release.FA_VERSION = ARGS.fa_version  # what the release's version probe answers
VL = Vllm(ARGS.site, ARGS.backend)
NAME = ARGS.name or f"vllm_{ARGS.backend}_{VL.version}".replace(".", "_")

import dcp  # noqa: E402
import flash_attn_page_table  # noqa: E402
import kv_cache_manager  # noqa: E402
import flashinfer_paged_csr  # noqa: E402
import mla_latent  # noqa: E402
import tree_attn_paged_csr  # noqa: E402
import triton_page_table  # noqa: E402
import v2_runner  # noqa: E402
from mla_backends import MlaBackend  # noqa: E402

SUPPORTS = {"modes": ["decode", "extend", "mixed", "target_verify", "draft_decode", "draft_extend_v2", "draft_q_only"], "layer_kinds": "all",
            "page_sizes": [16, 32, 64, 128, 256], "mla": False, "non_mla": True, "hybrid_swa": True, "cuda_graph": True}
MLA = {"mla_flashmla": "flashmla", "mla_flashattn": "flashattn_mla", "mla_triton": "triton_mla"}
ATTN = MlaBackend(VL, MLA[ARGS.backend], ARGS.mla_workspace, ARGS.kv_cache_dtype) if ARGS.backend in MLA else None  # what MLA layers answer
if ARGS.backend in ("fa", "flashinfer") and ARGS.kv_cache_dtype != "auto":  # the fp8 cache's bytes, the impls' kv_cache_dtype
    try:
        ATTN = VL.layers_of(VL.attention_backend(ARGS.backend), ARGS.kv_cache_dtype)
    except ValueError as e:
        print(f"vllm_planner.py: --kv-cache-dtype {ARGS.kv_cache_dtype}: {e}", file=sys.stderr)
        sys.exit(2)
# FlashAttention and Triton take gpt-oss's attention sinks (the impl's `sinks`: s_aux / sinks, recorded)
BACKENDS = {"fa": ("page_table", flash_attn_page_table.plan, dict(SUPPORTS, sinks=True)),
            "triton": ("page_table", triton_page_table.plan, dict(SUPPORTS, sinks=True)),
            # spec-decode verify trees, full layers, eager (tree_attn_paged_csr.py)
            "tree": ("paged_csr", tree_attn_paged_csr.plan,
                     dict(SUPPORTS, modes=["target_verify"], layer_kinds=["full"], cuda_graph=False)),
            # FlashInfer: vLLM's kernel block sizes on sm90; CUDA graphs (flashinfer_graph.py)
            "flashinfer": ("paged_csr", flashinfer_paged_csr.plan,
                           dict(SUPPORTS, modes=["decode", "extend", "mixed"], page_sizes=[16, 32, 64]))}
if ARGS.backend in MLA:  # MLA models of full layers, eager and under CUDA graphs (mla_latent.py, mla_graph.py)
    BACKENDS[ARGS.backend] = ("mla", mla_latent.plan, dict(
        SUPPORTS, modes=["decode", "extend", "mixed", "target_verify"], layer_kinds=["full"], softcap=False, mla=True,
        non_mla=False, hybrid_swa=False,
        page_sizes=[ps for ps in SUPPORTS["page_sizes"] + [1, 2, 4, 8] if ATTN.supports_block_size(ps)]))
FAMILY, PLAN, SUPPORTED = BACKENDS[ARGS.backend]
if ARGS.dcp > 1:  # eager steps of full layers, no drafting (dcp.refuse)
    SUPPORTED = dict(SUPPORTED, modes=["decode", "extend", "mixed", "target_verify"], layer_kinds=["full"],
                     hybrid_swa=False, cuda_graph=False, sinks=False,
                     page_sizes=[ps for ps in SUPPORTED["page_sizes"] if ps % (ARGS.dcp * ARGS.dcp_interleave) == 0
                                 and ps // ARGS.dcp % 16 == 0])  # the rank's block: FlashAttention's multiples of 16
    # (vllm_release.supports_block_size; 0.15's answer needs a vLLM config, which exists per case: Setup checks it)
if ARGS.allocator == "vllm":  # drafting's lookahead slots are not replayed (plan() says so)
    SUPPORTED = dict(SUPPORTED, modes=[m for m in SUPPORTED["modes"] if m not in DRAFTING])
HAS_V2 = v2_runner.available(VL)
if ARGS.runner == "v2" and not HAS_V2:
    print(f"vllm_planner.py: --runner v2: vLLM {VL.version} has no Model Runner V2 "
          "(vllm/v1/worker/gpu/block_table.py; the releases installed here from 0.27.1 on ship it)", file=sys.stderr)
    sys.exit(2)
if ARGS.backend == "tree" and VL.attention_backend("tree") is None:
    print(f"vllm_planner.py: --backend tree: vLLM {VL.version} has no TREE_ATTN backend "
          "(vllm/v1/attention/backends/tree_attn.py ships in 0.10.x and 0.11.x)", file=sys.stderr)
    sys.exit(2)


@kv.planner(name=NAME, family=FAMILY, supports=SUPPORTED,
            description=f"vLLM {VL.version} {ARGS.backend} backend's own metadata builders, kernels recorded")
def plan(case):
    import torch

    if case.batch["mode"] in DRAFTING and ARGS.backend not in ("fa", "triton"):
        raise kv.Unsupported(f"EAGLE drafting is modelled on FlashAttention and Triton, not --backend {ARGS.backend}")
    if case.batch["mode"] in DRAFTING and ARGS.allocator == "vllm":
        raise kv.Unsupported("EAGLE drafting under vLLM's own allocation is not modelled: its scheduler allocates the "
                             "drafts' slots as lookahead tokens (allocate_slots' num_lookahead_tokens)")
    if any(float(x.get(k, 1.0)) != 1.0 for x in case.layers for k in ("k_scale", "v_scale")) and (
            ARGS.backend in ("fa", "flashinfer") and ARGS.kv_cache_dtype == "auto"):
        # (the other backends' plans carry no scales: their executor reads the cache by the layer's)
        raise kv.Unsupported(f"fp8 KV-cache scales (model.layers[].k_scale / v_scale) on --backend {ARGS.backend}: "
                             "vLLM's auto cache holds no scaled values (--kv-cache-dtype fp8 runs its fp8 path)")
    if ARGS.dcp > 1:
        if not dcp.available(VL):
            raise kv.Unsupported(f"vLLM {VL.version}'s FlashAttention backend runs no decode-context parallelism "
                                 "(its metadata has no dcp_context_kv_lens: flash_attn.py; DCP is MLA's there)")
        try:
            return dcp.plan(VL, lambda: Setup(VL, case, torch.device(ARGS.device), VL.attention_backend(ARGS.backend),
                                              ATTN, dcp=(ARGS.dcp, ARGS.dcp_interleave)), ARGS.dcp, ARGS.dcp_interleave)
        except UnsupportedCase as e:
            raise kv.Unsupported(str(e))
    try:
        setup = Setup(VL, case, torch.device(ARGS.device), VL.attention_backend(ARGS.backend), ATTN,
                      every_step=ARGS.cudagraphs == "every-step")
        setup.cascade = ARGS.cascade
        setup.async_scheduling = not ARGS.no_async_scheduling
        setup.multi_group_drafter = ARGS.multi_group_drafter
        setup.v2_speculator = ARGS.v2_speculator
        if ARGS.runner == "v2" or (ARGS.runner == "auto" and HAS_V2 and v2_runner.chooses_v2(VL, setup.vllm_config)):
            setup.cascade = "never"  # V2's runner computes no common prefix (vllm/v1/worker/gpu/ has no cascade)
            setup.v2 = v2_runner.V2Inputs(VL, setup)
        if ARGS.allocator == "vllm":
            setup.allocation = kv_cache_manager.replay(VL, setup)
        return PLAN(VL, setup)
    except UnsupportedCase as e:
        raise kv.Unsupported(str(e))


if __name__ == "__main__":
    kv.serve(plan)
