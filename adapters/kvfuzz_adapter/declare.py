"""The declaration an adapter sends first: name, role, family, what it supports, its precision."""
import contextlib
import sys

FAMILIES = ("page_table", "paged_csr", "token_csr", "mla")


class Unsupported(Exception):
    """Raise from an executor or planner when this case needs what the backend does not do (a
    combination its declaration cannot express, a limit the real code asserts): kvfuzz counts the
    case as unsupported, not as a finding, and keeps the worker."""


def _refuse(role, name, what):
    """A declaration that cannot be right is the adapter's bad input: one clear line on stderr and
    exit status 2 (kvfuzz then refuses the adapter, exit 2, quoting this line), no traceback."""
    sys.stderr.write(f"kvfuzz_adapter: @kv.{role}(name={name!r}): {what}\n")
    raise SystemExit(2)


def _declare(role, fn, name, family, supports, precision, description, batch=False, fetch=None, lanes=None):
    name = name or getattr(fn, "__name__", None)
    if family not in FAMILIES:
        _refuse(role, name, f"unknown family {family!r}; known: {', '.join(FAMILIES)} (FAMILIES.md)")
    for what, value in (("supports", supports), ("precision", precision)):
        if value is not None and not isinstance(value, dict):
            _refuse(role, name, f"{what} must be a dict, got {type(value).__name__}")
    fn.kvfuzz_declaration = {
        "kvfuzz_adapter": 1,
        "name": name,
        "role": role,
        "family": family,
        "description": description or (fn.__doc__ or "").strip().split("\n")[0],
        "supports": dict(supports or {}),
        "precision": dict(precision or {}),
    }
    if batch:
        fn.kvfuzz_declaration["batch"] = True
    if fetch is not None:
        if not callable(fetch):
            _refuse(role, name, f"fetch must be callable, got {type(fetch).__name__}")
        fn.kvfuzz_fetch = fetch  # this process's business: not part of the declaration kvfuzz reads
    if lanes is not None and lanes is not False:
        if lanes is not True and not callable(lanes):
            _refuse(role, name, f"lanes must be True or a callable returning a context manager, got {type(lanes).__name__}")
        # serve() declares "lanes" itself, when kvfuzz offers them (KVFUZZ_ADAPTER_LANES)
        fn.kvfuzz_lanes = contextlib.nullcontext if lanes is True else lanes
    return fn


def executor(name=None, family="page_table", supports=None, precision=None, description=None, batch=False,
             fetch=None, lanes=None):
    """Declares fn(case) -> (out, lse) as an executor of `family`.

    supports: {"modes": [...] or "all", "layer_kinds": [...], "dtypes": [...], "page_sizes": [...] or
    "any", "head_dims": [...] or "any", "mla": bool, "hybrid_swa": bool, "cuda_graph": bool,
    "softcap": bool, "gqa": bool, "sinks": bool (attention sinks, default false), "kv_scales": bool (fp8
    caches with per-tensor scales: case.k_scale / v_scale, default false)}. precision: {"p_dtype": "cache" | "fp32" | ..., "out_dtype":
    "cache" | "fp32" | "bf16" | "fp16", "max_merges": int, "row_sum": "fp32" | "p", "qk_products":
    "fp32" | "cache" | "cache_mha", "tile_keys": int, "split_keys": int}: how the kernel rounds, for
    the oracle's error bound (PROTOCOL.md). batch=True: fn may be handed several independent cases of
    one shape as one case (their rows concatenated, their slots offset into one pool; kvfuzz splits
    the outputs back), when it reads only what the metadata says (PROTOCOL.md "batch"). fetch: fn may
    return (out, lse) still where it computed them (a GPU's tensors): after every value set of a
    request has run, fetch([(out, lse), ...]) returns them as numpy arrays, all at once (a GPU
    executor then waits for its device once a request, not once a set or a layer). lanes: fn (and fetch)
    may run on several threads at once, each request on one thread (PROTOCOL.md "lanes"): True, or a
    callable returning a context manager each lane's thread enters once for its life (a GPU executor's
    per-thread CUDA stream: cuda_arrays.lane). Only fn that keeps no state shared by requests may.
    """
    return lambda fn: _declare("executor", fn, name, family, supports, precision, description, batch, fetch,
                               lanes)


def planner(name=None, family="page_table", supports=None, description=None):
    """Declares fn(plan_case) -> (meta: dict, arrays: dict[str, np.ndarray]) as a planner of `family`."""
    return lambda fn: _declare("planner", fn, name, family, supports, None, description)
