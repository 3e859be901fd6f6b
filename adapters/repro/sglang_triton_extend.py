# ---- target: sglang's Triton extend kernel (adapters/repro/sglang_triton_extend.py of kvfuzz) ----
# Loads extend_attention_fwd of one sglang release; the reproducer (sglang_triton_extend_body.py)
# calls it the way TritonAttnBackend.forward_extend does:
# q, the step's new K/V (the pool rows at the new tokens' slots), the K/V pools, qo_indptr, the
# prefix CSR (kv_indptr, kv_indices: the cached tokens' slots), the tree-verify custom mask and
# mask_indptr, sliding_window_size = W and window_kv_offsets on sliding-window layers. The
# metadata below is what the finding's planner built (BUNDLE["plan"]); the kernel takes no positions.
# Only the kernel files of the release are loaded (sglang's package __init__ imports the server):
#   python3 repro.py --site DIR      # DIR holds sglang/ (an unpacked sglang wheel); default: the
#                                    # installed sglang, or $SGLANG_SITE
# Without a CUDA device the kernel runs in Triton's interpreter on the CPU (TRITON_INTERPRET=1), in
# fp16 where the case is bf16 (the interpreter's tl.dot has no bf16: triton#11584).
import importlib
import importlib.util
import types

KERNEL_PACKAGES = ("sglang.kernels.ops.attention", "sglang.srt.layers.attention.triton_ops")


def sglang_site(arg):
    if arg or os.environ.get("SGLANG_SITE"):
        return arg or os.environ["SGLANG_SITE"]
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        cannot_run("no sglang: pass --site DIR (a folder holding an unpacked sglang wheel's sglang/)")
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def load_extend(site, torch, cuda):
    """extend_attention_fwd of the release at site, under empty parent packages."""
    package = next((p for p in KERNEL_PACKAGES
                    if os.path.isfile(os.path.join(site, *p.split("."), "extend_attention.py"))), None)
    if package is None:
        cannot_run(f"no sglang Triton kernels under {site}")
    parts = package.split(".")
    for name in {".".join(parts[:i]) for i in range(1, len(parts) + 1)} | {"sglang.srt"}:
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__path__ = [os.path.join(site, *name.split("."))]
    utils = types.ModuleType("sglang.srt.utils")  # the few helpers the kernel files import
    utils.is_hip = lambda: False
    utils.is_cuda = lambda: cuda
    utils.is_gfx95_supported = utils.is_gfx1250_supported = lambda: False
    utils.get_device_core_count = \
        lambda device_id=0: torch.cuda.get_device_properties(device_id).multi_processor_count if cuda else 0
    sys.modules["sglang.srt.utils"] = utils
    release = next((n[len("sglang-"):-len(".dist-info")] for n in os.listdir(site)
                    if n.startswith("sglang-") and n.endswith(".dist-info")), os.path.basename(site.rstrip("/")))
    return importlib.import_module(f"{package}.extend_attention").extend_attention_fwd, release
