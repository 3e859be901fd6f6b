"""fp8 descales as the kernels were handed them, as a plan's per-layer `descales` (FAMILIES.md;
backends/descales.h): shared by the page_table and paged_csr conversions.

A recorded call may hold `descales`: {"q_descale", "k_descale", "v_descale"}, each a float32
[rows, kv_heads] host tensor (q_descale None where the call took none): FlashAttention's own
arguments, or FlashInfer's run() scalars repeated over the call's rows and heads.

    meta["descales"] = per_layer(len(case.layers), calls_by_layer)   # None: no call had any
"""


def per_layer(layers, calls_by_layer):
    """The plan's `descales`: per layer {"parts": [{"q", "k", "v"}]}, flat lists, one part per call
    in order; None where no call was handed any (an unquantized cache). Every call of the step must
    have them then: a quantized cache is read through all of them."""
    calls = [c for l in range(layers) for c in calls_by_layer.get(l, [])]
    if not any("descales" in c for c in calls):
        return None
    out = []
    for l in range(layers):
        parts = []
        for c in calls_by_layer.get(l, []):
            if "descales" not in c:
                raise RuntimeError(f"layer {l}: a kernel call without the fp8 descales the step's other calls have")
            d = c["descales"]
            parts.append({key: [] if d[f"{key}_descale"] is None else [float(x) for x in d[f"{key}_descale"].flatten()]
                          for key in ("q", "k", "v")})
        out.append({"parts": parts})
    return out
