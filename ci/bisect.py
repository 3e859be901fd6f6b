"""Release bisection: the first release of an engine with a finding's mechanism, and the first without.

    kvfuzz bisect --issue kvfuzz-flashinfer-swa-full-prefix            # a known issue's minimal case
    kvfuzz bisect --issues adapters/vllm/known_issues.json --all       # every entry of a file, one table
    kvfuzz bisect findings/cache-extent-triton-17-3fa2c1.json          # a campaign's saved finding: its key
    kvfuzz bisect corpus/vllm/alloc_swa_null_block_cached.json --engine vllm --backend fa \\
        --planner-args "--allocator vllm" --from 0.10.2 --to 0.15.0  # a case: any finding (or --key, --issue)

(`kvfuzz bisect ARGS` runs `python3 ci/bisect.py --kvfuzz KVFUZZ ARGS` from the source tree.)

The releases are the engine's on the package index between --from and --to (default: the span the
adapter drives, sglang 0.5.10.post1 and vLLM 0.10.2 to the newest), listed by `pip index versions`
once into .sglang/releases.txt or .vllm/releases.txt (--refresh lists again). At each release the
project's engine script installs the release's Python source from its wheel and prints the case's
fingerprints (`SGLANG_VERSION=R bash ci/sglang.sh fingerprint CASE BACKEND [PLANNER FLAGS]`, the
same for ci/vllm.sh): that line, printed beside each verdict, reproduces it. A release's verdict:

    with         a fingerprint has the mechanism (the issue's match clauses, whatever its affected
                 range; a saved finding's fingerprint key; with neither, any finding)
    without      the case ran to the end and no fingerprint has it (other findings are listed)
    crash        the case crashed, or the harness failed, for another reason: says nothing either way
    unsupported  the release's adapter declines the case
    error        the engine script failed (the release would not install or import)

--method sweep runs every release; bisect (the default) runs both bounds and the release the
mechanism was met at (the issue's minimal-case release, the saved finding's), then splits every
interval whose ends disagree: it assumes a verdict holds between two tested releases that agree (a
bug gone and back between them is missed); releases it did not run are marked inferred.
Exit: 0 the search ran; 2 bad input (an unknown issue, release or file).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "adapters"))
import triage  # noqa: E402  (version_key, matches)

ENGINES = {"sglang": {"first": "0.5.10.post1", "root": ".sglang"}, "vllm": {"first": "0.10.2", "root": ".vllm"}}
NOT_RUN_THROUGH = {"crash", "harness-error", "hang"}


class BadInput(Exception):
    """Exit 2, with the message."""


def index_releases(engine, refresh, cache=None):
    """Every release of `engine` on the package index, oldest first (cached in ROOT/releases.txt)."""
    cache = cache or os.path.join(SOURCE, ENGINES[engine]["root"], "releases.txt")
    if refresh or not os.path.exists(cache):
        out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", engine], capture_output=True, text=True)
        m = re.search(r"^Available versions: (.*)$", out.stdout, re.M)
        if out.returncode or not m:
            raise BadInput(f"pip index versions {engine} failed: {(out.stderr or out.stdout).strip()[-300:]}")
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(cache + ".tmp", "w") as f:
            f.write("\n".join(v.strip() for v in m.group(1).split(",")) + "\n")
        os.replace(cache + ".tmp", cache)
    with open(cache) as f:
        versions = [v.strip() for v in f if v.strip()]
    return sorted(versions, key=triage.version_key)


def span(versions, lo, hi):
    for bound in (lo, hi):
        if bound not in versions:
            raise BadInput(f"release {bound} is not on the index's list ({versions[0]} .. {versions[-1]})")
    key = triage.version_key
    return [v for v in versions if key(lo) <= key(v) <= key(hi)]


def source_relative(path):
    """A path given from the current folder, as the engine scripts (run in the source tree) see it."""
    full = os.path.abspath(path)
    return os.path.relpath(full, SOURCE) if full.startswith(SOURCE + os.sep) else full


class Target:
    """What is bisected: a case on a backend (planner flags too) and the mechanism to look for."""

    def __init__(self, engine, case, backend, planner_args, name, has, anchor=None):
        self.engine, self.case, self.backend, self.planner_args = engine, case, backend, planner_args
        self.name, self.has = name, has  # has(fingerprint line) -> bool
        self.anchor = anchor  # a release the mechanism was met at: tested first, never assumed

    def command(self, release, runner):
        return (f"{self.engine.upper()}_VERSION={release} {runner} fingerprint {self.case} {self.backend}"
                + (f" {self.planner_args}" if self.planner_args else ""))


def issue_target(issue, issues_file):
    engine = issue["affected"]["package"]
    if engine not in ENGINES:
        raise BadInput(f"{issues_file}: issue {issue['id']} is about {engine}, not an engine bisect installs")
    m = issue.get("minimal_case") or {}
    if "case" not in m or "backend" not in m:
        raise BadInput(f"{issues_file}: issue {issue['id']} has no minimal_case with a case and a backend")
    # the planner flags the minimal case runs under (triage matches the issue only under them)
    args = " ".join((["--deterministic"] if m.get("deterministic") else []) + list(m.get("adapter_flags", [])))
    return Target(engine, m["case"], m["backend"], args, issue["id"],
                  lambda line: triage.matches(issue, line["fingerprint"], line.get("group")), m.get("release"))


def finding_target(path):
    """A campaign's saved finding: its record's first fingerprint key, case and replay line."""
    record = path if path.endswith(".finding.json") else path[:-len(".json")] + ".finding.json"
    try:
        with open(record) as f:
            r = json.load(f)
        key, replay = r["fingerprints"][0]["key"], r["replay"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise BadInput(f"{path}: not a saved finding with a fingerprint record ({record}: {e})")
    try:
        words = triage.replay_words(replay)
    except ValueError as e:
        raise BadInput(f"{path}: its replay line cannot be split ({e}): {replay}")
    opts = {words[i]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("--")}
    m = re.fullmatch(r"(sglang|vllm)_(\w+?)_(\d+_\d+_\d+(?:_post\d+)?)(_det)?:\w+", opts.get("--backend", ""))
    if not m:
        raise BadInput(f"{path}: its replay line's --backend {opts.get('--backend')!r} is no engine planner "
                       "(sglang_BACKEND_RELEASE:EXECUTOR or vllm_...)")
    planner = shlex.split(opts.get("--adapter", ""))
    extra, i = [], 0
    while i < len(planner):  # the planner's own flags, less what the engine script sets per release
        if planner[i] in ("--site", "--device", "--backend", "--name"):
            i += 2
            continue
        if planner[i].startswith("--"):
            extra.append(planner[i])
            if i + 1 < len(planner) and not planner[i + 1].startswith("--"):
                extra.append(planner[i + 1])
                i += 1
        i += 1
    case = r.get("case") or path
    if not os.path.exists(case):  # a campaign folder moved since: the record's neighbour
        case = os.path.join(os.path.dirname(path), os.path.basename(case))
    return Target(m.group(1), source_relative(case), m.group(2), shlex.join(extra), f"key {key}",
                  lambda line: line["key"] == key, m.group(3).replace("_post", ".post").replace("_", "."))


class Runner:
    """Runs the engine script at a release (once per release and case) and judges its output."""

    def __init__(self, command, dry=False):
        self.command, self.dry, self.cache, self.runs = command, dry, {}, 0

    def fingerprints(self, target, release):
        key = (target.engine, release, target.case, target.backend, target.planner_args)
        if key not in self.cache:
            self.runs += 1
            cmd = target.command(release, self.command.format(engine=target.engine))
            print(f"  .. {release}: {cmd}", file=sys.stderr, flush=True)
            out = subprocess.run(cmd, shell=True, cwd=SOURCE, capture_output=True, text=True)
            self.cache[key] = out
        return self.cache[key]

    def verdict(self, target, release):
        """(verdict, detail) at one release."""
        out = self.fingerprints(target, release)
        if out.returncode:
            tail = [l for l in (out.stderr or out.stdout).strip().splitlines() if l.strip()]
            return "error", f"exit {out.returncode}: {tail[-1] if tail else ''}"[:200]
        try:
            lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
        except ValueError as e:
            return "error", f"not fingerprint lines: {e}"
        hits = [l["key"] for l in lines if target.has(l)]
        if hits:
            return "with", hits[0] + (f" (+{len(hits) - 1})" if len(hits) > 1 else "")
        broken = [l["key"] for l in lines if l["fingerprint"]["property"] in NOT_RUN_THROUGH]
        if broken:
            return "crash", broken[0]
        if not lines and "unsupported" in out.stderr:
            return "unsupported", ""
        return "without", f"other findings: {', '.join(l['key'] for l in lines)}" if lines else "clean"


def search(releases, judge, method, anchors=()):
    """{index: (verdict, detail, tested)} over `releases`; judge(release) -> (verdict, detail).
    Bisection tests both ends and the anchors (releases known to matter: a minimal case's), then
    splits every interval between tested releases whose verdicts differ."""
    seen = {}

    def at(i):
        if i not in seen:
            seen[i] = judge(releases[i])
        return seen[i][0]

    if method == "sweep":
        for i in range(len(releases)):
            at(i)
    else:
        def split(lo, hi):  # both ends tested
            if hi - lo <= 1 or at(lo) == at(hi):
                return
            mid = (lo + hi) // 2
            at(mid)
            split(lo, mid)
            split(mid, hi)
        points = sorted({0, len(releases) - 1} | {releases.index(a) for a in anchors if a in releases})
        for p in points:
            at(p)
        for a, b in zip(points, points[1:]):
            split(a, b)
    result, last = {}, None
    for i in range(len(releases)):
        if i in seen:
            last = seen[i]
            result[i] = (*seen[i], True)
        else:  # between two tested releases that agree
            result[i] = (last[0], "", False)
    return result


def summary(releases, result):
    """(first with, first without after it, runs of equal verdicts as text)."""
    j = next((i for i in range(len(releases)) if result[i][0] == "with"), None)
    first_with = None
    if j is not None:  # releases before it back to the last without said nothing: it may have come among them
        k = max((i for i in range(j) if result[i][0] == "without"), default=-1)
        gap = releases[k + 1] + ("" if j == k + 2 else ".." + releases[j - 1])
        first_with = releases[j] + (f" (or one of {gap}, not judged)" if j > k + 1 else "")
    last_with = max((i for i in range(len(releases)) if result[i][0] == "with"), default=None)
    first_without = None
    if last_with is not None:
        i = next((i for i in range(last_with + 1, len(releases)) if result[i][0] == "without"), None)
        if i is not None:  # releases between the last with and it said nothing: the fix may be among them
            gap = releases[last_with + 1] + ("" if i == last_with + 2 else ".." + releases[i - 1])
            first_without = releases[i] + (f" (or one of {gap}, not judged)" if i > last_with + 1 else "")
    runs, start = [], 0
    for i in range(1, len(releases) + 1):
        if i == len(releases) or result[i][0] != result[start][0]:
            a, b = releases[start], releases[i - 1]
            runs.append(f"{a}{'' if a == b else '..' + b} {result[start][0]}")
            start = i
    return first_with, first_without, "; ".join(runs)


def bisect_one(target, releases, runner, method, out, skip=()):
    run = [r for r in releases if r not in skip]
    found = search(run, lambda r: runner.verdict(target, r), method, [target.anchor] if target.anchor else [])
    result = {i: found[run.index(r)] if r in run else ("skipped", "", False) for i, r in enumerate(releases)}
    runner_cmd = runner.command.format(engine=target.engine)
    tested = sum(1 for v in result.values() if v[2])
    print(f"{target.engine} {target.name}: {target.case} on {target.backend}"
          f"{' ' + target.planner_args if target.planner_args else ''}, releases {releases[0]}..{releases[-1]} "
          f"({len(releases)}), {method}: {tested} run", file=out)
    for i, r in enumerate(releases):
        v, detail, ran = result[i]
        how = target.command(r, runner_cmd) if ran else "--skip" if v == "skipped" else "inferred"
        print(f"  {r:14} {v:12} {how}{'   # ' + detail if detail else ''}", file=out)
    first_with, first_without, runs = summary(releases, result)
    lower = " (the lower bound: maybe earlier)" if first_with == releases[0] else ""
    print(f"  first with: {first_with or 'none'}{lower}; first without: {first_without or 'none'}", file=out)
    print(f"  runs: {runs}", file=out)
    return {"id": target.name, "engine": target.engine, "first_with": first_with, "first_without": first_without,
            "lower_bound": first_with == releases[0], "runs": runs, "method": method, "tested": tested,
            "releases": len(releases)}


def main(argv=None):
    p = argparse.ArgumentParser(prog="kvfuzz bisect", description=__doc__.split("\n")[0])
    p.add_argument("finding", nargs="?", help="a saved finding (a campaign's .json or .finding.json) or, with "
                   "--backend, a case file")
    p.add_argument("--issue", action="append", default=[], help="a known issue's id: its minimal case and its match "
                   "clauses (repeatable; with a case, only the clauses)")
    p.add_argument("--issues", action="append", default=[], help="known-issue files (default both engines')")
    p.add_argument("--all", action="store_true", help="every issue of --issues with a minimal case")
    p.add_argument("--engine", choices=sorted(ENGINES), help="the engine, for a case file")
    p.add_argument("--backend", help="the engine's attention backend (fa, triton, flashinfer, ...), for a case file")
    p.add_argument("--planner-args", default="", help="more planner flags, e.g. '--allocator vllm' or '--deterministic'")
    p.add_argument("--key", help="the fingerprint key to look for (a case file; default any finding)")
    p.add_argument("--from", dest="lo", help="the oldest release (default the span the adapter drives)")
    p.add_argument("--to", dest="hi", help="the newest release (default the newest on the index)")
    p.add_argument("--method", choices=["bisect", "sweep"], default="bisect")
    p.add_argument("--skip", default="", help="releases not run, comma-separated (ones the adapter does not drive: "
                   "a sweep shows them as error or crash); reported as skipped")
    p.add_argument("--refresh", action="store_true", help="list the index's releases again")
    p.add_argument("--releases-file", help="the releases, one a line (instead of the index; tests)")
    p.add_argument("--runner", default="bash ci/{engine}.sh",
                   help="what runs `fingerprint CASE BACKEND` at ENGINE_VERSION=R (default: the engine script)")
    p.add_argument("--kvfuzz", help="the kvfuzz binary the engine script runs (KVFUZZ)")
    p.add_argument("--table", action="store_true", help="end with a markdown table (docs/bugs.md's)")
    args = p.parse_args(argv)
    if args.kvfuzz:
        os.environ["KVFUZZ"] = os.path.abspath(args.kvfuzz)
    try:
        targets = make_targets(args)
        runner = Runner(args.runner)
        rows = []
        for t in targets:
            versions = (open(args.releases_file).read().split() if args.releases_file
                        else index_releases(t.engine, args.refresh))
            versions = sorted(versions, key=triage.version_key)
            releases = span(versions, args.lo or ENGINES[t.engine]["first"], args.hi or versions[-1])
            skip = [r for r in args.skip.split(",") if r]
            for r in skip:
                if r not in releases:
                    raise BadInput(f"--skip {r}: not a release between {releases[0]} and {releases[-1]}")
            rows.append(bisect_one(t, releases, runner, args.method, sys.stdout, skip))
            rows[-1]["command"] = command_of(args, t)
            sys.stdout.flush()
    except BadInput as e:
        print(f"kvfuzz bisect: {e}", file=sys.stderr)
        return 2
    if args.table:
        print("\n| known issue | first release with | first without | how computed | command |\n|---|---|---|---|---|")
        for r in rows:
            fw = r["first_with"] or "none"
            fw = f"{fw} (the span's first)" if r["lower_bound"] else fw
            print(f"| `{r['id']}` | {fw} | {r['first_without'] or 'none'}"
                  f" | {r['method']}, {r['tested']} of {r['releases']} releases run: {r['runs']} | `{r['command']}` |")
    return 0


def command_of(args, target):
    """The kvfuzz bisect line that computes this target alone."""
    bounds = ((f" --from {args.lo}" if args.lo else "") + (f" --to {args.hi}" if args.hi else "")
              + (f" --skip {args.skip}" if args.skip else ""))
    method = " --method sweep" if args.method == "sweep" else ""
    if target.name.startswith("key ") or not args.issue and not args.all:
        return " ".join(shlex.quote(a) for a in ["kvfuzz", "bisect"] + sys.argv[1:] if a != "--table")
    return f"kvfuzz bisect --issue {target.name}{bounds}{method}"


def make_targets(args):
    issues = {}
    files = args.issues or [os.path.join("adapters", e, "known_issues.json") for e in ENGINES]
    for path in files if args.issue or args.all else []:
        try:
            for i in triage.load_issues(os.path.join(SOURCE, path) if not os.path.isabs(path) else path):
                issues[i["id"]] = (i, path)
        except triage.BadIssues as e:
            raise BadInput(str(e))
    for i in args.issue:
        if i not in issues:
            raise BadInput(f"--issue {i}: no such issue in {', '.join(files)}")
    if args.finding and args.backend:  # a case file
        if not args.engine:
            raise BadInput("a case file needs --engine (sglang or vllm)")
        if not os.path.exists(args.finding):
            raise BadInput(f"{args.finding}: no such case file")
        if len(args.issue) > 1 or args.issue and args.key:
            raise BadInput("a case file takes at most one of --issue and --key")
        if args.issue:
            issue = issues[args.issue[0]][0]
            has, name = (lambda line: triage.matches(issue, line["fingerprint"], line.get("group"))), issue["id"]
        elif args.key:
            has, name = (lambda line: line["key"] == args.key), f"key {args.key}"
        else:
            has, name = (lambda line: True), "any finding"
        return [Target(args.engine, source_relative(args.finding), args.backend, args.planner_args, name, has)]
    if args.finding:
        if args.issue or args.key or args.engine:
            raise BadInput(f"{args.finding}: a saved finding names its own engine, backend and key "
                           "(a case file needs --backend)")
        return [finding_target(args.finding)]
    chosen = [issues[i] for i in args.issue]
    if args.all:
        chosen += [v for k, v in issues.items() if k not in args.issue and v[0].get("minimal_case")]
    if not chosen:
        raise BadInput("nothing to bisect: name a saved finding, a case with --backend, --issue ID or --all")
    return [issue_target(i, path) for i, path in chosen]


if __name__ == "__main__":
    sys.exit(main())
