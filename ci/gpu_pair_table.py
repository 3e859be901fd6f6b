"""The production-pair table: each reproducer run of a folder of outputs, as markdown.

    python3 ci/gpu_pair_table.py OUT [-o table.md]

OUT is what ci/gpu_repro.sh (or `bash ci/repro.sh run DIR`) wrote: per run of the reproducer
FILE.py, FILE.N.out (its output, whose last line is `RESULT {json}`, adapters/repro/common.py) and
FILE.N.label ("LABEL: exit N"), in OUT or its subfolders. Each run is one row: the reproducer,
the known issue whose minimal case it reproduces (the reproducer's BUNDLE names the case,
adapters/*/known_issues.json the issue; the release the run reports picks between issues of one
case), the release it ran (and fix), the device, the exit status and what it means, the largest
|actual - expected| against the float64 expectation, the queries wrong, and the worst query's keys
(read vs visible). A run whose output has no RESULT line (an older reproducer, a crash before it)
is a row with its exit status only. Exit 2 when OUT holds no run.
"""
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MEANING = {0: "right", 1: "WRONG (bug there)", 2: "cannot run", 3: "reproducer failed"}


def version_key(v):
    """'0.5.12.post1' -> (0, 5, 12, 1): post releases after their base."""
    nums = [int(x) for x in re.findall(r"\d+", v)]
    return tuple(nums + [0] * (5 - len(nums)))


def known_issues():
    """[(case path, issue entry)] of every known-issue file of the checkout."""
    out = []
    for f in sorted(ROOT.glob("adapters/*/known_issues.json")):
        for e in json.loads(f.read_text()).get("issues", []):
            mc = e.get("minimal_case")
            cases = [mc["case"]] if isinstance(mc, dict) else re.findall(r"\S+\.json", mc or "")
            out += [(c, e) for c in cases]
    return out


def issue_of(case, release, issues):
    """The id of the issue whose minimal case is case, the one whose releases hold release first."""
    found = [e for c, e in issues if c == case]
    if not found:
        return "?"

    def holds(e):
        a = e.get("affected") or {}
        if not release or a.get("package") != "sglang":
            return False
        first, fixed = a.get("first"), a.get("fixed")
        return (not first or version_key(first) <= version_key(release)) and \
            (not fixed or version_key(release) < version_key(fixed))
    return next((e["id"] for e in found if holds(e)), found[0]["id"])


def bundle_case(script):
    """The case the reproducer's BUNDLE was written from ('' when not found)."""
    text = script.read_text() if script.is_file() else ""
    at = text.find("BUNDLE = json.loads(r'''")
    if at < 0:
        return ""
    start = at + len("BUNDLE = json.loads(r'''")
    return json.loads(text[start:text.index("''')", start)]).get("finding", {}).get("case", "")


def result(out):
    """The RESULT json of a run's output (the last such line), or None."""
    lines = [line for line in out.read_text(errors="replace").splitlines() if line.startswith("RESULT {")]
    return json.loads(lines[-1][len("RESULT "):]) if lines else None


def row(out, issues):
    """One table row (a list of cells) for a run's .out file."""
    name = re.fullmatch(r"(.+)\.\d+\.out", out.name).group(1) + ".py"  # FILE.N.out -> FILE.py
    label_file = out.with_suffix(".label")
    label = label_file.read_text().strip() if label_file.is_file() else ""
    # the copy the run ran (ci/repro.sh's run folder), else the generated one (ci/repro.sh generate)
    scripts = [p for p in [out.parent / name] + sorted(ROOT.glob(f"build/repro/*/repro/{name}")) if p.is_file()]
    script = scripts[0] if scripts else ROOT / name
    r = result(out)
    m = re.search(r": exit (\d+)$", label)
    code = r["exit"] if r else int(m.group(1)) if m else None
    release = (r or {}).get("release") or (re.search(r"sglang (\d\S*?)[,:\s]", label + " ") or [None, ""])[1]
    fixes = "".join(f" + fix {n}" for n in (r or {}).get("fixes") or [])
    issue = issue_of(bundle_case(script), release, issues)
    verdict = MEANING.get(code, f"exit {code}")
    if r and r.get("raised"):
        verdict += f": raised {r['raised'].split(':')[0]}"
    worst = (r or {}).get("worst")
    keys = "" if not worst else (f"request {worst['request']} at {worst['position']} (layer {worst['layer']}): "
                                 f"read {worst['read'] if worst['read'] is not None else '(no probe)'} "
                                 f"({worst['keys_read'] if worst['keys_read'] is not None else '?'} keys), "
                                 f"visible {worst['should_read']} ({worst['visible']})")
    err = "" if not r or not r["queries"] else (r["max_error"] if isinstance(r["max_error"], str)
                                                 else f"{r['max_error']:.3g}")
    return [f"`{name}`", issue, f"{release}{fixes}",
            (r or {}).get("device", ""), f"{code} {verdict}", err,
            "" if not r else f"{r['wrong']} of {r['queries']}" if r["queries"] else "none checked", keys]


def table(folder):
    """The markdown table of every run under folder (sorted by path)."""
    issues = known_issues()
    outs = sorted(o for o in pathlib.Path(folder).rglob("*.out") if re.fullmatch(r".+\.\d+\.out", o.name))
    head = ["reproducer", "known issue", "release", "device", "exit", "max abs error", "queries wrong",
            "worst query: keys read vs visible"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row(o, issues)) + " |" for o in outs]
    return "\n".join(lines) + "\n", len(outs)


def output_option(args, tool):
    """(the file of `-o FILE` or None, args without it); exit 2 when -o has no file."""
    if "-o" not in args:
        return None, args
    at = args.index("-o")
    if at + 1 >= len(args):
        print(f"{tool}: -o needs a file", file=sys.stderr)
        sys.exit(2)
    return args[at + 1], args[:at] + args[at + 2:]


def main():
    target, args = output_option(sys.argv[1:], "gpu_pair_table")
    if len(args) != 1 or not pathlib.Path(args[0]).is_dir():
        print(f"usage: python3 ci/gpu_pair_table.py OUT [-o table.md]  (OUT: a folder of reproducer runs; "
              f"got {' '.join(args) or 'nothing'})", file=sys.stderr)
        sys.exit(2)
    text, n = table(args[0])
    if n == 0:
        print(f"gpu_pair_table: {args[0]} holds no reproducer run (FILE.N.out)", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(text)
    if target:
        pathlib.Path(target).write_text(text)


if __name__ == "__main__":
    main()
