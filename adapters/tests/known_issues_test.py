"""Every known-issue entry is keyed on a mechanism, not on a configuration alone.

    python3 adapters/tests/known_issues_test.py adapters/sglang/known_issues.json adapters/gpu/known_issues.json

For each entry and each of its match clauses, a fingerprint built to satisfy the clause:
  - with a mechanism of the clause is labelled with that entry (and no earlier one swallows it);
  - with the same configuration and another mechanism is NEW (for a plan-run mechanism, also the
    plan-run of another argument: plan-run:window_left does not match plan-run:causal);
  - at the entry's fixed release (when it has one) is a regression;
  - as a hang or a contract finding is NEW;
  - for an entry whose minimal case runs under planner flags (minimal_case.adapter_flags), made by a
    planner without them is NEW (the flags' path is what the entry says was found).
  - for a clause that needs decode-context parallelism (dcp_min), the same fingerprint without DCP in
    its context (a planner run with the entry's flags) is not that entry.
Exit 1 with a line per failure.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import triage  # noqa: E402


def fingerprint_for(clause, issue, release):
    """A fingerprint that satisfies every field of `clause`, at `release` of the entry's package."""
    first = lambda v: v[0] if isinstance(v, list) else v  # noqa: E731
    backend = first(clause.get("backend", "x"))
    planner, _, executor = backend.partition(":")
    package = issue["affected"]["package"]
    context = {"page_size": clause.get("page_size_min", 1), "topk": clause.get("topk_min", 1),
               "hybrid": clause.get("hybrid", False), "sliding_layers": clause.get("sliding_layers", False),
               "graph": clause.get("graph", False),
               "deterministic": clause.get("deterministic", False),
               "pool_elements": clause.get("pool_elements_min", 4096), "head_dim": 8, "v_head_dim": 8,
               "sinks": clause.get("sinks", False), "after_verify": clause.get("after_verify", False)}
    if "dcp_min" in clause:
        context["dcp"] = clause["dcp_min"]
    if "v_narrower_qk_dim_max" in clause:
        context["head_dim"], context["v_head_dim"] = clause["v_narrower_qk_dim_max"], clause["v_narrower_qk_dim_max"] // 2
    if "v_unlike_qk_dim_max" in clause:
        context["head_dim"], context["v_head_dim"] = 8, clause["v_unlike_qk_dim_max"] // 2
    kind = first(clause.get("layer_kinds", ["sliding_window" if "windows" in clause or "window_min" in clause else "full"]))
    window = first(clause["windows"]) if "windows" in clause else clause.get("window_min", 3)
    if "mechanisms" in clause:
        mechanism = clause["mechanisms"][0]
    else:
        mechanism = first(clause["mechanism_contains"])
    return {"property": first(clause["property"]), "backend": backend, "planner": planner, "executor": executor,
            "release": release if planner.split("_")[0] == package else "",
            "mode": first(clause.get("modes", ["decode"])),
            "layer": None if kind == "none" else {"kind": kind, "window": window, "chunk": 8},
            "mechanism": mechanism, "variant": first(clause.get("variants", [""])), "context": context}


def main():
    failures = []
    for path in sys.argv[1:]:
        issues = triage.load_issues(path)
        for issue in issues:
            a = issue["affected"]
            for n, clause in enumerate(triage.as_list(issue.get("match", []))):  # groups: checked by triage_test
                where = f"{os.path.basename(path)}: {issue['id']} clause {n}"
                if not ({"mechanisms", "mechanism_contains"} & set(clause)):
                    failures.append(f"{where}: matches no mechanism (mechanisms or mechanism_contains)")
                    continue
                versions = {a["package"]: a["first"]}
                fp = fingerprint_for(clause, issue, a["first"])
                m = issue.get("minimal_case")
                flags = m.get("adapter_flags", []) if isinstance(m, dict) else []
                adapter = ["python3", "planner.py", *flags]
                got, hit = triage.label(fp, issues, versions, set(), adapter=adapter)
                if got != "known" or hit["id"] != issue["id"]:
                    failures.append(f"{where}: its own mechanism is {got} ({hit and hit['id']}), not {issue['id']}")
                if flags:
                    got, hit = triage.label(fp, issues, versions, set(), adapter=["python3", "planner.py"])
                    if got == "known" and hit["id"] == issue["id"]:
                        failures.append(f"{where}: matched a planner run without its adapter_flags {flags}")
                if "dcp_min" in clause:
                    del fp["context"]["dcp"]
                    got, hit = triage.label(fp, issues, versions, set(), adapter=adapter)
                    if got == "known" and hit["id"] == issue["id"]:
                        failures.append(f"{where}: matched a fingerprint without decode-context parallelism")
                    fp["context"]["dcp"] = clause["dcp_min"]
                fp["mechanism"] = "never-seen-mechanism"
                got, hit = triage.label(fp, issues, versions, set(), adapter=adapter)
                if got != "NEW":
                    failures.append(f"{where}: another mechanism at the same configuration is {got} ({hit and hit['id']})")
                for mechanism in clause.get("mechanisms", []):
                    if mechanism.startswith("plan-run:"):
                        fp["mechanism"] = "plan-run:another-argument"
                        got, hit = triage.label(fp, issues, versions, set(), adapter=adapter)
                        if got != "NEW":
                            failures.append(f"{where}: plan-run of another argument is {got} ({hit and hit['id']})")
                if a.get("fixed"):
                    fp = fingerprint_for(clause, issue, a["fixed"])
                    got, hit = triage.label(fp, issues, {a["package"]: a["fixed"]}, set(), adapter=adapter)
                    if got != "regression":
                        failures.append(f"{where}: at the fixed release {a['fixed']} it is {got}, not a regression")
                for prop in ("hang", "contract"):
                    fp = fingerprint_for(clause, issue, a["first"])
                    fp["property"] = prop
                    if triage.label(fp, issues, versions, set())[0] != "NEW":
                        failures.append(f"{where}: a {prop} finding matched")
    for f in failures:
        print("FAIL:", f)
    print(f"known issues test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
