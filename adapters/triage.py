"""Sorts a campaign's findings into known issues, regressions and new ones, by fingerprint.

    python3 adapters/triage.py findings-sglang/0.5.23/fa --issues adapters/sglang/known_issues.json
    python3 adapters/triage.py findings-gpu/flashinfer_paged_csr --issues adapters/gpu/known_issues.json \\
        --version flashinfer=0.7.2.post1 --version torch=2.11.0
    build/fuzz/kvfuzz fingerprint CASE --backend B --adapter A > f.jsonl && python3 adapters/triage.py f.jsonl --issues ...

A source is a campaign folder (its index.jsonl: every finding, saved or not; a folder without one,
its saved findings' .finding.json records) or a JSON-lines file of `kvfuzz fingerprint`. Each
finding's fingerprint (properties/fingerprint.h) is matched against the issues' `match` clauses;
the first issue that matches and whose affected release range holds the finding's release
labels it; an issue whose minimal case names planner flags (`minimal_case.adapter_flags`, such
as vLLM's `--allocator vllm`) only where the finding's replay ran its planner with them. Labels: known; regression (it matches only issues whose `fixed` release is at or
before the finding's: a fixed bug came back); NEW (no issue matches; `hang`, `contract` and harness
errors are always NEW). An issue's `groups` (root keys, properties/root_cause.h) labels known every
finding whose index line's `group` is one of them. Prints the root-cause groups, each with its
fingerprint keys inside and their counts, then the issues seen, and writes the keys (`groups`, one
per key, as before) and the root-cause groups (`root_causes`) to FOLDER/triage.json (or --json-out).
A group's label is its worst key's: NEW, else regression, else known.

Exit: 0 every finding known; 1 at least one NEW or regression; 2 bad usage or issues file;
3 a finding it cannot read (a saved case without its fingerprint record, a malformed line).
"""
import argparse
import collections
import glob
import json
import os
import re
import shlex
import sys

NEVER_KNOWN = {"hang", "contract", "harness-error"}
ISSUE_FIELDS = {"id", "title", "verdict", "kind", "upstream", "status", "affected", "reach", "effect", "minimal_case",
                "match", "groups", "note", "bisect", "match_flags"}
KINDS = {"upstream-bug", "convention", "kvfuzz-limit"}
MINIMAL_CASE_FIELDS = {"case", "backend", "release", "deterministic", "adapter_flags"}


class Unreadable(Exception):
    """A finding triage cannot read: exit 3."""


class BadIssues(Exception):
    """A malformed known-issues file: exit 2."""


def version_key(v):
    """'0.5.10.post1' -> comparable: 0.5.10 < 0.5.10.post1 < 0.5.11."""
    key = []
    for part in re.split(r"[.+]", v):
        m = re.fullmatch(r"(\d+)|post(\d+)", part)
        if not m:
            raise ValueError(f"version {v!r}: part {part!r} is neither a number nor postN")
        key.append((0, int(m.group(1))) if m.group(1) else (1, int(m.group(2))))
    return key


def tags(mechanism):
    """'reads:unowned-slot+missing-oldest' -> {'unowned-slot', 'missing-oldest'};
    'changed:out+lse' (metamorphic) -> {'changed:out', 'changed:lse'}."""
    if mechanism.startswith("reads:"):
        return set(mechanism.split(":", 1)[1].split("+"))
    if mechanism.startswith("changed:"):
        return {"changed:" + t for t in mechanism.split(":", 1)[1].split("+")}
    return set(mechanism.split("+"))


def as_list(v):
    return v if isinstance(v, list) else [v]


# Each match field: a test of the fingerprint (properties/fingerprint.h's to_json).
def _layer(fp, key, default=None):
    return (fp.get("layer") or {}).get(key, default)


MATCHERS = {
    "property": lambda v, fp: fp["property"] in as_list(v),
    "backend": lambda v, fp: any(fp.get("backend", "").startswith(b) for b in as_list(v)),
    "modes": lambda v, fp: fp.get("mode") in v,
    "layer_kinds": lambda v, fp: (_layer(fp, "kind") or "none") in v,
    "windows": lambda v, fp: _layer(fp, "kind") == "sliding_window" and _layer(fp, "window") in v,
    "window_min": lambda v, fp: _layer(fp, "kind") == "sliding_window" and _layer(fp, "window") >= v,
    "mechanisms": lambda v, fp: tags(fp.get("mechanism", "")) <= set(v),
    "mechanism_contains": lambda v, fp: any(s in fp.get("mechanism", "") for s in as_list(v)),
    "variants": lambda v, fp: fp.get("variant", "") in v,
    "page_size_min": lambda v, fp: fp["context"]["page_size"] >= v,
    "topk_min": lambda v, fp: fp["context"]["topk"] >= v,
    "topk_max": lambda v, fp: fp["context"]["topk"] <= v,
    "hybrid": lambda v, fp: fp["context"]["hybrid"] == v,
    # the model has a sliding-window layer; absent from fingerprints of kvfuzz before 2026-11-26: no match
    "sliding_layers": lambda v, fp: fp["context"].get("sliding_layers") == v,
    "graph": lambda v, fp: fp["context"]["graph"] == v,
    "deterministic": lambda v, fp: fp["context"]["deterministic"] == v,
    "pool_elements_min": lambda v, fp: fp["context"]["pool_elements"] >= v,
    "v_narrower_qk_dim_max": lambda v, fp: fp["context"]["v_head_dim"] < fp["context"]["head_dim"] <= v,
    # V of another width than Q/K, both at most v (FA3 runs such pairs <= 64 on its (64, 64) kernel)
    "v_unlike_qk_dim_max": lambda v, fp: fp["context"]["v_head_dim"] != fp["context"]["head_dim"]
    and max(fp["context"]["v_head_dim"], fp["context"]["head_dim"]) <= v,
    # the model has attention sinks; absent from fingerprints of kvfuzz before 2026-11-28: no sinks
    "sinks": lambda v, fp: fp["context"].get("sinks", False) == v,
    # draft_decode: a batch request's target step was a verify (its drafter saw rejected drafts);
    # absent from fingerprints of kvfuzz before 2026-11-28: taken as true (matched as before)
    "after_verify": lambda v, fp: fp["context"].get("after_verify", True) == v,
    # the ranks of vLLM's decode-context parallelism the plan ran over, at least v (2: under DCP at all);
    # the context has dcp only when > 1, and fingerprints of kvfuzz before 2026-11-28 none: 1, no DCP
    "dcp_min": lambda v, fp: fp["context"].get("dcp", 1) >= v,
}


def load_issues(path):
    try:
        with open(path) as f:
            issues = json.load(f)["issues"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadIssues(f"{path}: {e}")
    for i in issues:
        where = f"{path}: issue {i.get('id', '?')}"
        if set(i) - ISSUE_FIELDS:
            raise BadIssues(f"{where}: unknown field(s) {sorted(set(i) - ISSUE_FIELDS)}")
        for field in ("id", "title", "verdict", "kind", "affected"):
            if field not in i:
                raise BadIssues(f"{where}: no {field!r}")
        if "match" not in i and "groups" not in i:
            raise BadIssues(f"{where}: neither 'match' clauses nor root-cause 'groups'")
        if not all(isinstance(g, str) and g for g in i.get("groups", [])):
            raise BadIssues(f"{where}: 'groups' must be a list of root keys (the index lines' group field)")
        if i["kind"] not in KINDS:
            raise BadIssues(f"{where}: kind {i['kind']!r} is not one of {sorted(KINDS)}")
        a = i["affected"]
        if not isinstance(a, dict) or set(a) - {"package", "first", "fixed"} or "package" not in a or "first" not in a:
            raise BadIssues(f"{where}: affected must be {{package, first, fixed}} (fixed null while it is open)")
        try:
            for v in (a["first"], a.get("fixed")):
                if v is not None:
                    version_key(v)
        except ValueError as e:
            raise BadIssues(f"{where}: {e}")
        m = i.get("minimal_case")
        if isinstance(m, dict):
            if set(m) - MINIMAL_CASE_FIELDS:
                raise BadIssues(f"{where}: minimal_case: unknown field(s) {sorted(set(m) - MINIMAL_CASE_FIELDS)}")
            flags = m.get("adapter_flags", ["absent"])
            if not isinstance(flags, list) or not flags or not all(isinstance(x, str) and x for x in flags):
                raise BadIssues(f"{where}: minimal_case.adapter_flags must be a non-empty list of strings "
                                "(the planner flags its case runs under, e.g. [\"--allocator\", \"vllm\"])")
        if "match_flags" in i and not (isinstance(i["match_flags"], list) and i["match_flags"]
                                       and all(isinstance(x, str) and x for x in i["match_flags"])):
            raise BadIssues(f"{where}: match_flags must be a non-empty list of strings (the planner words a "
                            "finding's replay must hold, e.g. [\"--fa-version\", \"2\"])")
        for clause in as_list(i.get("match", [])):
            if "property" not in clause:
                raise BadIssues(f"{where}: a match clause without 'property'")
            if set(as_list(clause["property"])) & NEVER_KNOWN:
                raise BadIssues(f"{where}: {sorted(NEVER_KNOWN)} never match a known issue")
            unknown = set(clause) - set(MATCHERS)
            if unknown:
                raise BadIssues(f"{where}: unknown match field(s) {sorted(unknown)}; known: {sorted(MATCHERS)}")
    return issues


def load_findings(source):
    """The finding lines of a source (see the module's doc); raises Unreadable."""
    def parse(line, where):
        try:
            entry = json.loads(line)
            fp = entry["fingerprint"]
            fp["property"], entry["key"]
        except (ValueError, KeyError, TypeError) as e:
            raise Unreadable(f"{where}: not a finding line ({e})")
        return entry

    if os.path.isfile(source):
        with open(source) as f:
            return [parse(line, f"{source}:{n}") for n, line in enumerate(f, 1) if line.strip()]
    if not os.path.isdir(source):
        raise Unreadable(f"{source}: neither a folder nor a file")
    cases = [p for p in glob.glob(os.path.join(source, "*.json"))
             if not p.endswith((".finding.json", "campaign.json", "triage.json"))]
    for case in cases:  # every saved case must carry its report and its fingerprint record
        for companion in (".txt", ".finding.json"):
            if not os.path.exists(case[:-5] + companion):
                raise Unreadable(f"{case}: a saved finding without its {companion[1:]} ({case[:-5]}{companion}): "
                                 "made by an older kvfuzz, or cut short")
    index = os.path.join(source, "index.jsonl")
    if os.path.exists(index):
        with open(index) as f:
            return [parse(line, f"{index}:{n}") for n, line in enumerate(f, 1) if line.strip()]
    if cases:
        raise Unreadable(f"{source}: saved findings but no index.jsonl (the campaign's record of every finding)")
    return []


def release_of(fp, package, versions):
    """The finding's release of `package`: the planner's own ("sglang_fa_0_5_23") or --version's."""
    if fp.get("release") and fp.get("planner", "").split("_")[0] == package:
        return fp["release"]
    return versions.get(package)


def matches(issue, fp, group=None):
    """Whether a fingerprint has the issue's mechanism, whatever the release: the issue names the
    finding's root-cause group, or one of its match clauses holds."""
    return (group is not None and group in issue.get("groups", [])) or any(
        all(MATCHERS[k](v, fp) for k, v in clause.items()) for clause in as_list(issue.get("match", [])))


def replay_words(replay):
    """A replay line's shell words, the parentheses of "(cd DIR && ...)" (a line with an adapter,
    fuzz/replay.h) apart: replay_words("(cd /w && k check c.json --adapter 'py p.py')") ==
    ['(', 'cd', '/w', '&&', 'k', 'check', 'c.json', '--adapter', 'py p.py', ')']. Raises ValueError."""
    lexer = shlex.shlex(replay or "", posix=True, punctuation_chars="()")
    lexer.whitespace_split = True
    return list(lexer)


def adapter_words(replay):
    """The words of every --adapter command a finding's replay line names (shlex): what the planner
    ran with. adapter_words('kvfuzz check c.json --backend b --adapter "py p.py --allocator vllm"')
    == ['py', 'p.py', '--allocator', 'vllm']; [] when it names none or cannot be split."""
    try:
        words = replay_words(replay)
    except ValueError:
        return []
    out = []
    for flag, value in zip(words, words[1:]):
        if flag == "--adapter":
            try:
                out += shlex.split(value)
            except ValueError:
                pass
    return out


def runs_under(adapter, flags):
    """Whether the planner command's words hold `flags` in a row."""
    n = len(flags)
    return any(adapter[i:i + n] == flags for i in range(len(adapter) - n + 1))


def flags_to_match(issue):
    """The planner words a finding's replay must hold for `issue` to label it: its `match_flags`, else
    its minimal case's `adapter_flags` (the flags that case runs under), else none. `match_flags` is
    for an entry whose case runs under more than the bug needs: its `--dcp 2` where the fingerprint's
    `dcp_min` already says DCP, so that a `--dcp 4` run's finding is it too."""
    if "match_flags" in issue:
        return issue["match_flags"]
    m = issue.get("minimal_case")
    return m.get("adapter_flags", []) if isinstance(m, dict) else []


def label(fp, issues, versions, warnings, group=None, adapter=()):
    """(label, issue) for one fingerprint in root-cause group `group`: the first matching issue whose
    affected range holds the finding's release; else the first matching issue it is past the fix of
    (a regression); else NEW. An issue whose minimal case runs under planner flags
    (minimal_case.adapter_flags, or the issue's match_flags: a path only those flags reach, such as
    vLLM's own allocator) matches only findings whose planner command (`adapter`: adapter_words of the
    finding's replay) holds them."""
    if fp["property"] in NEVER_KNOWN:
        return "NEW", None
    regression = None
    for issue in issues:
        if not matches(issue, fp, group):
            continue
        if not runs_under(list(adapter), flags_to_match(issue)):
            continue
        a = issue["affected"]
        release = release_of(fp, a["package"], versions)
        if release is None:
            warnings.add(f"{a['package']}'s release unknown (--version {a['package']}=...): "
                         f"{issue['id']}'s affected range not checked")
            return "known", issue
        if version_key(release) < version_key(a["first"]):
            continue  # before the issue existed: another mechanism, whatever it looks like
        if a.get("fixed") and version_key(release) >= version_key(a["fixed"]):
            regression = regression or issue
            continue
        return "known", issue
    return ("regression", regression) if regression else ("NEW", None)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sources", nargs="+", help="campaign folders or kvfuzz fingerprint JSON-lines files")
    p.add_argument("--issues", required=True, help="the known-issues file (adapters/*/known_issues.json)")
    p.add_argument("--version", action="append", default=[], metavar="PACKAGE=RELEASE",
                   help="a package's release for the issues' affected ranges (sglang releases come from the planner name)")
    p.add_argument("--json-out", help="where to write the groups (default: SOURCE/triage.json for one folder)")
    args = p.parse_args()
    versions = {}
    for v in args.version:
        if "=" not in v:
            p.error(f"--version {v!r}: expected PACKAGE=RELEASE")
        versions[v.split("=")[0]] = v.split("=", 1)[1]
    try:
        issues = load_issues(args.issues)
        for release in versions.values():
            version_key(release)
    except (BadIssues, ValueError) as e:
        print(f"triage: {e}", file=sys.stderr)
        return 2
    try:
        findings = [f for source in args.sources for f in load_findings(source)]
    except Unreadable as e:
        print(f"triage: {e}", file=sys.stderr)
        return 3
    groups, roots, warnings = {}, {}, set()
    for f in findings:
        # A key is labelled once per root-cause group (a line of an older kvfuzz has none: its key).
        root = f.get("group") or f["key"]
        g = groups.get((root, f["key"]))
        if g is None:
            lab, issue = label(f["fingerprint"], issues, versions, warnings, f.get("group"),
                               adapter_words(f.get("replay")))
            g = groups[(root, f["key"])] = {"key": f["key"], "group": root, "label": lab,
                                            "issue": issue["id"] if issue else None, "count": 0, "cases": 0,
                                            "saved": [], "replay": f.get("replay", "")}
        g["count"] += f.get("count", 1)
        g["cases"] += 1
        if f.get("saved"):
            g["saved"].append(f["saved"])
        r = roots.setdefault(root, {"group": root, "label": "known", "cases": set(), "keys": []})
        r["cases"].add(f.get("case_index", len(r["cases"])))
        if f.get("group_why") and "why" not in r and f["key"] != root:
            r["why"] = f["group_why"]
    worst = {"NEW": 0, "regression": 1, "known": 2}
    for g in groups.values():
        r = roots[g["group"]]
        r["keys"].append(g["key"])
        if worst[g["label"]] < worst[r["label"]]:
            r["label"] = g["label"]
    for r in sorted(roots.values(), key=lambda r: (r["label"] == "known", r["group"])):
        print(f"group {r['label']}: {r['group']}  ({len(r['cases'])} case(s), {len(r['keys'])} key(s))")
        for g in sorted((groups[(r["group"], k)] for k in r["keys"]), key=lambda g: (g["label"] == "known", g["key"])):
            print(f"{g['label']:10} {g['issue'] or '-':30} {g['cases']:5}  {g['key']}")
            if g["label"] != "known":
                print(f"{'':47}replay: {g['replay']}")
    print()
    seen = collections.Counter(g["issue"] for g in groups.values() if g["issue"])
    for issue in issues:
        if seen[issue["id"]]:
            print(f"{issue['id']}: {issue['title']} [{issue['kind']}] {issue.get('upstream', '')}")
    for w in sorted(warnings):
        print(f"warning: {w}")
    keys = {}
    for g in groups.values():  # a key seen in two groups: its worst label
        if g["key"] not in keys or worst[g["label"]] < worst[keys[g["key"]]]:
            keys[g["key"]] = g["label"]
    counts = collections.Counter(keys.values())
    root_counts = collections.Counter(r["label"] for r in roots.values())
    print(f"{len(findings)} finding line(s), {len(roots)} root-cause group(s): {root_counts['known']} known, "
          f"{root_counts['NEW']} NEW, {root_counts['regression']} regression(s)")
    print(f"{len(keys)} distinct fingerprint(s): {counts['known']} known, "
          f"{counts['NEW']} NEW, {counts['regression']} regression(s)")
    out = args.json_out or (os.path.join(args.sources[0], "triage.json")
                            if len(args.sources) == 1 and os.path.isdir(args.sources[0]) else None)
    if out:
        with open(out + ".tmp", "w") as f:
            json.dump({"issues_file": args.issues, "groups": list(groups.values()),
                       "root_causes": [dict(r, cases=len(r["cases"])) for r in roots.values()]}, f, indent=1)
        os.replace(out + ".tmp", out)
    return 1 if counts["NEW"] or counts["regression"] else 0


if __name__ == "__main__":
    sys.exit(main())
