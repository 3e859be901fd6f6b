"""sglang's real attention backends as kvfuzz planners, at a pinned release.

    python3 adapters/sglang/sglang_planner.py --site .sglang/0.5.10.post1 --backend fa|triton|flashinfer
                                              |flashmla|flashinfer_mla|fa3_mla
                                              [--device cpu|cuda] [--fix N]

kvfuzz sends each case's req_to_token, full_to_swa and forward batch; this adapter builds the
release's backend (FlashAttentionBackend: family page_table, fa_page_table.py; TritonAttnBackend:
token_csr, triton_token_csr.py; FlashInferAttnBackend: paged_csr, flashinfer_paged_csr.py; the MLA
backends FlashMLABackend, FlashInferMLAAttnBackend and FlashAttentionBackend on an MLA model: mla,
mla_backends.py) on a fake
model runner (fake_runner.py), runs its metadata code unchanged — eager init_forward_metadata, or CUDA-graph
capture then replay — and its forward for every layer, with the attention kernels replaced by
recorders (recorder.py). The recorded kernel arguments are the plan; kvfuzz's checked executor
runs it and every property applies. On CPU the Triton metadata kernels run in Triton's
interpreter (TRITON_INTERPRET=1, set here before Triton loads).

--fix N applies upstream fix N (fixes.py) on top of the release, to show a finding gone with it.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
# msgspec, where ci/sglang.sh installed it (0.5.23's configuration classes need the real package)
sys.path.append(os.path.join(HERE, "..", "..", ".sglang", "pyextra"))

import fixes  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--site", required=True, help="folder holding the sglang wheel's `sglang/` (ci/sglang.sh installs it)")
    p.add_argument("--backend", choices=["fa", "triton", "flashinfer", "flashmla", "flashinfer_mla", "fa3_mla"],
                   default="fa")
    p.add_argument("--device", default="cpu", help="cpu (Triton interpreter) or cuda")
    p.add_argument("--fix", action="append", default=[], choices=sorted(fixes.FIXES),
                   help="apply upstream fix N (fixes.py) on top of the release; repeatable")
    p.add_argument("--deterministic", action="store_true",
                   help="serve as --enable-deterministic-inference does (FlashInfer: paged-only prefill, "
                        "tensor-core decode, fixed split sizes)")
    p.add_argument("--name", default=None, help="the adapter's name (default sglang_<backend>_<release>)")
    args = p.parse_args()
    if not os.path.isdir(os.path.join(args.site, "sglang")):
        p.error(f"--site {args.site}: no sglang/ folder there (install a release with ci/sglang.sh)")
    return args


ARGS = parse_args()
if ARGS.device == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("SGLANG_DISABLE_REQUEST_LOGGING", "1")

import kvfuzz_adapter as kv  # noqa: E402
from fake_runner import Setup, UnsupportedCase  # noqa: E402
from sglang_release import Sglang  # noqa: E402

SG = Sglang(ARGS.site)
for number in ARGS.fix:
    fixes.apply(SG, number)
NAME = ARGS.name or (f"sglang_{ARGS.backend}_{SG.version}".replace(".", "_") + "".join(f"_fix{n}" for n in ARGS.fix)
                     + ("_det" if ARGS.deterministic else ""))

import fa_page_table  # noqa: E402
import flashinfer_paged_csr  # noqa: E402
import mla_backends  # noqa: E402
import triton_token_csr  # noqa: E402

SUPPORTS = {"modes": "all", "layer_kinds": "all", "page_sizes": [1, 2, 4, 8, 16, 32, 64, 128, 256],
            "mla": False, "non_mla": True,  # sglang asserts power-of-two page sizes
            "hybrid_swa": True, "cuda_graph": True}
BACKENDS = {"fa": ("page_table", fa_page_table.plan, dict(SUPPORTS, sinks=True)),  # its sinks recorded (recorder.py)
            "triton": ("token_csr", triton_token_csr.plan, SUPPORTS),
            "flashinfer": ("paged_csr", flashinfer_paged_csr.plan, SUPPORTS)}
for _mla in mla_backends.BACKENDS:  # MLA models of full layers, no soft cap (DeepSeek's), eager and CUDA graphs
    BACKENDS[_mla] = ("mla", lambda sg, setup, which=_mla: mla_backends.plan(sg, setup, which), dict(
        SUPPORTS, modes=mla_backends.MODES, layer_kinds=["full"], page_sizes=mla_backends.PAGE_SIZES[_mla],
        mla=True, non_mla=False, hybrid_swa=False, softcap=False))
FAMILY, PLAN, _SUPPORTS = BACKENDS[ARGS.backend]


@kv.planner(name=NAME, family=FAMILY, supports=_SUPPORTS,
            description=f"sglang {SG.version} {ARGS.backend} backend's own metadata code, kernels recorded")
def plan(case):
    import torch

    try:
        setup = Setup(SG, case, torch.device(ARGS.device), deterministic=ARGS.deterministic,
                      attention_backend={"fa": "fa3", "fa3_mla": "fa3"}.get(ARGS.backend, ARGS.backend),
                      mla=ARGS.backend in mla_backends.BACKENDS)
        return PLAN(SG, setup)
    except UnsupportedCase as e:
        raise kv.Unsupported(str(e))
    except AssertionError as e:  # a limit the release asserts: "... doesn't support topk > 1 ... page size > 1"
        if "support" not in str(e):
            raise  # any other assertion is the backend failing: a finding
        raise kv.Unsupported(f"sglang {SG.version} asserts: {e}")


if __name__ == "__main__":
    kv.serve(plan)
