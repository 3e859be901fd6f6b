"""The GPU campaign's table (ci/gpu.sh): one row per real executor from its campaign log, its
saved findings triaged against adapters/gpu/known_issues.json (adapters/triage.py).

    python3 ci/gpu_table.py OUT NAME...   # OUT/NAME.log, OUT/NAME.rc, OUT/NAME/ (findings)

Exit 1 when a campaign failed (kvfuzz exit > 1) or a saved finding is NEW (known to no entry).
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRIAGE = [sys.executable, os.path.join(HERE, "..", "adapters", "triage.py")]
ISSUES = os.path.join(HERE, "..", "adapters", "gpu", "known_issues.json")


def triage(folder):
    """(known, new) saved findings, writing the triage's report next to the folder."""
    if not os.path.isdir(folder) or not any(f.endswith(".json") for f in os.listdir(folder)):
        return 0, 0
    result = subprocess.run(TRIAGE + [folder, "--issues", ISSUES], capture_output=True, text=True)
    with open(folder + ".triage", "w") as f:
        f.write(result.stdout + result.stderr)
    if result.returncode > 1:
        raise SystemExit(f"gpu_table: triage of {folder} failed: {result.stderr.strip()}")
    rows = [line.split() for line in result.stdout.splitlines()]
    saved = [r for r in rows if len(r) == 3 and r[2].endswith(".json") and r[0] != "minimal"]
    new = sum(1 for r in saved if r[0] == "NEW")
    return len(saved) - new, new


def breakdown(name, text, wall, jobs):
    """The breakdown line of one campaign: shares of its job time (wall x jobs) in the kernel, in
    first calls of a kernel variant (its compiles), in the adapter's own code, in the exchange, in
    the oracle, and the rest of kvfuzz (checks, generation, planning), from kvfuzz run's lines
    "adapter NAME time: ..." and "oracle: ..."; None when the log has neither."""
    t = re.search(r"adapter \S+ time: kernel ([\d.]+) s, first calls of a variant ([\d.]+) s, adapter code ([\d.]+) s, "
                  r"exchange ([\d.]+) s", text)
    o = re.search(r"^oracle: ([\d.]+) s in run_oracle", text, re.M)
    if not t or not o or not wall:
        return None
    job = wall * jobs
    parts = [float(x) for x in t.groups()] + [float(o.group(1))]
    shares = [100 * x / job for x in parts] + [100 * (job - sum(parts)) / job]
    return f"{name:<22} {job:>9.1f} s" + "".join(f"{x:>{w}.0f}%" for x, w in zip(shares, BREAKDOWN_WIDTHS))


BREAKDOWN_COLUMNS = ["kernel", "first calls", "adapter", "exchange", "oracle", "kvfuzz rest"]
BREAKDOWN_WIDTHS = [len(c) + 2 for c in BREAKDOWN_COLUMNS]


def row(name, log, known, new):
    text = open(log).read()
    j = re.search(r"(\d+) job\(s\)", text)
    jobs = int(j.group(1)) if j else 1
    m = re.search(r"campaign: (\d+) cases in ([\d.]+) s \(([\d.]+) cases/s\)", text)
    wall = float(m.group(2)) if m else 0.0
    checked = unsupported = 0
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3 and ":" in f[0] and f[1].isdigit() and f[2].isdigit():
            checked, unsupported = checked + int(f[1]), unsupported + int(f[2])
    found = {}
    for prop, count in re.findall(r"^([\w-]+)/\S+\s+(\d+)\s+\d+\s", text, re.M):
        found[prop] = found.get(prop, 0) + int(count)
    inside = re.search(r"([\d.]+) s inside the adapter's function", text)
    share = f"{100 * float(inside.group(1)) / (wall * jobs):.0f}%" if inside and wall else "?"
    findings = ", ".join(f"{p} {n}" for p, n in sorted(found.items())) or "none"
    saved = f"{known} + {new} NEW" if new else str(known)
    rate = f"{checked / wall:.1f}" if wall else "?"
    return (f"{name:<22} {checked:>9} {unsupported:>12} {rate:>9} {share:>10} {saved:>12}  {findings}",
            breakdown(name, text, wall, jobs))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, names = sys.argv[1], sys.argv[2:]
    status = 0
    print(f"{'backend':<22} {'checked':>9} {'unsupported':>12} {'checked/s':>9} {'in kernel':>10} {'saved known':>12}"
          "  findings by property")
    times = []
    for name in names:
        rc = int(open(os.path.join(out, name + ".rc")).read())
        log = os.path.join(out, name + ".log")
        if rc > 1:
            last = open(log).read().strip().splitlines()[-1:] or [""]
            print(f"{name:<22} kvfuzz exited {rc}: {last[0]}")
            status = 1
            continue
        known, new = triage(os.path.join(out, name))
        status |= new > 0
        line, time_line = row(name, log, known, new)
        print(line)
        times.append(time_line or f"{name:<22} (no time breakdown in {log})")
    print('("checked/s": cases checked per second of wall time, unsupported ones apart;')
    print(' "in kernel": time inside the adapter\'s function over the campaign\'s wall time times its jobs;')
    print(f' "saved known": saved findings adapters/gpu/known_issues.json knows, NEW ones listed in {out}/<backend>.triage)')
    if times:
        print("\nwhere the time went, as shares of each campaign's job time (wall time x jobs):")
        print(f"{'backend':<22} {'job time':>11}" + "".join(f"{c:>{w + 1}}" for c, w in zip(BREAKDOWN_COLUMNS, BREAKDOWN_WIDTHS)))
        for line in times:
            print(line)
        print('("first calls": the kernel on the first request of a variant in a worker (dtype, heads, head dims,')
        print(' page size, mode, layer kinds, softcap), where JIT compiles land; "adapter": its own code around the')
        print(' function; "exchange": writing and reading the request\'s arrays on both sides and the pipe; "kvfuzz rest":')
        print(' the job time left: kvfuzz\'s checks, generation, planning and shrinking)')
    return status


if __name__ == "__main__":
    sys.exit(main())
