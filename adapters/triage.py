"""Sorts a campaign's findings into known issues and new ones.

    python3 adapters/triage.py findings-sglang/0.5.10.post1/fa --issues adapters/sglang/known_issues.json
    python3 adapters/triage.py findings-gpu/flashinfer_paged_csr --issues adapters/gpu/known_issues.json

Reads every saved finding (`<property>-<backend>-<case>.json` with its `.txt`), matches its case
and backend against each issue's signature, prints one line per finding and a count per issue,
and exits 1 when a finding matches no known issue (0 otherwise, 2 on bad input).
"""
import argparse
import collections
import glob
import json
import os
import sys


def signature(case, backend, prop):
    layers = case["model"]["layers"]
    batch, cache = case["batch"], case["cache"]
    return {
        "backend": backend,
        "property": prop,
        "windows": {layer.get("window") for layer in layers if layer["kind"] == "sliding_window"},
        "mode": batch["mode"],
        "page_size": cache["page_size"],
        "layer_kinds": {layer["kind"] for layer in layers},
        "topk": batch.get("topk", 1),
        "hybrid": cache.get("swa_pages", 0) > 0,
        "graph": batch.get("graph_bs", 0) > 0,
        "deterministic": backend.split(":")[0].endswith("_det"),  # sglang_planner.py --deterministic
        # elements of one layer's K pool: the long profile passes 2^31 (32-bit offsets)
        "pool_elements": cache.get("full_pages", 0) * cache["page_size"] * case["model"].get("kv_heads", 1)
        * max(case["model"].get("head_dim", 0), case["model"].get("v_head_dim", 0)),
        "head_dims": (case["model"].get("head_dim", 0), case["model"].get("v_head_dim", 0)),
    }


def matches(match, sig):
    checks = {
        "backend": lambda v: sig["backend"].startswith(v),
        "backend_any": lambda v: any(sig["backend"].startswith(b) for b in v),  # e.g. one per release
        "properties": lambda v: sig["property"] in v,
        "windows_any": lambda v: bool(sig["windows"] & set(v)),
        "modes": lambda v: sig["mode"] in v,
        "page_size_min": lambda v: sig["page_size"] >= v,
        "layer_kinds_any": lambda v: bool(sig["layer_kinds"] & set(v)),
        "topk_min": lambda v: sig["topk"] >= v,
        "hybrid": lambda v: sig["hybrid"] == v,
        "graph": lambda v: sig["graph"] == v,
        "deterministic": lambda v: sig["deterministic"] == v,
        "pool_elements_min": lambda v: sig["pool_elements"] >= v,
        "v_narrower_qk_dim_max": lambda v: sig["head_dims"][1] < sig["head_dims"][0] <= v,
    }
    unknown = set(match) - set(checks)
    if unknown:
        raise ValueError(f"unknown match field(s) {sorted(unknown)}; known: {sorted(checks)}")
    return all(checks[key](value) for key, value in match.items())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder")
    p.add_argument("--issues", required=True, help="the known-issues file (adapters/*/known_issues.json)")
    args = p.parse_args()
    if not os.path.isdir(args.folder):
        p.error(f"{args.folder}: not a folder")
    try:
        with open(args.issues) as f:
            issues = json.load(f)["issues"]
    except (OSError, ValueError, KeyError) as e:
        print(f"triage: {args.issues}: {e}", file=sys.stderr)
        return 2
    counts, new = collections.Counter(), 0
    for path in sorted(glob.glob(os.path.join(args.folder, "*.json"))):
        if path.endswith(".min.json"):
            continue
        with open(path) as f:
            case = json.load(f)
        with open(path[:-5] + ".txt") as f:
            second = f.read().split("\n")[1]
        backend = second.split(": ")[0]
        prop = os.path.basename(path).split("-" + backend.replace(":", "-"))[0]
        try:
            hit = next((i for i in issues if matches(i["match"], signature(case, backend, prop))), None)
        except ValueError as e:
            print(f"triage: {args.issues}: {e}", file=sys.stderr)
            return 2
        label = hit["id"] if hit else "NEW"
        new += hit is None
        counts[label] += 1
        print(f"{label:30} {prop:14} {os.path.basename(path)}")
    print()
    for issue in issues:
        if counts[issue["id"]]:
            print(f"{counts[issue['id']]:4}  {issue['id']}: {issue['title']} [{issue['verdict']}] {issue['upstream']}")
            if issue.get("minimal_case"):
                print(f"      minimal case: {issue['minimal_case']}")
    if new:
        print(f"{new:4}  NEW: no known issue matches; triage them and add them to {args.issues}")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
