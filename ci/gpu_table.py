"""The GPU campaign's table (ci/gpu.sh): one row per real executor from its campaign log, every
finding of its index triaged by fingerprint against adapters/gpu/known_issues.json
(adapters/triage.py; KVFUZZ_GPU_VERSIONS, "flashinfer=0.7.2.post1 torch=2.11.0 ...", gives the
packages' releases for the issues' affected ranges; KVFUZZ_GPU_ISSUES, files separated by spaces, adds
known-issue lists: adapters/sglang/known_issues.json for a pair with sglang's planner, ci/gpu_mla_pairs.sh).

    python3 ci/gpu_table.py OUT NAME...   # OUT/NAME.log, OUT/NAME.rc, OUT/NAME/ (findings)

A log may hold several campaigns' logs one after the other (ci/gpu.sh with one kvfuzz process a GPU:
the shards of one campaign): their counts and times add up, their wall time is the longest, their
first 100 the soonest one shard's (the shards together got there no later), their undeclared share
the draws outside over all their draws.

Exit 1 when a campaign failed (kvfuzz exit > 1), its findings folder is missing, or triage exits
non-zero (a NEW finding or a regression: 1; a finding it cannot read: 3).
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRIAGE = [sys.executable, os.path.join(HERE, "..", "adapters", "triage.py")]
ISSUES = os.path.join(HERE, "..", "adapters", "gpu", "known_issues.json")


def triage(folder):
    """(triage's exit code, its groups, a note), writing the triage's report next to the folder."""
    if not os.path.isdir(folder):
        return 3, [], f"no findings folder {folder}"
    versions = [f"--version={v}" for v in os.environ.get("KVFUZZ_GPU_VERSIONS", "").split()]
    issues = ISSUES
    extra = os.environ.get("KVFUZZ_GPU_ISSUES", "").split()
    if extra:  # triage takes one file: the lists joined, next to the folder
        issues = folder + ".issues.json"
        with open(issues, "w") as f:
            json.dump({"issues": [i for path in [ISSUES] + extra for i in json.load(open(path))["issues"]]}, f)
    result = subprocess.run(TRIAGE + [folder, "--issues", issues] + versions, capture_output=True, text=True)
    with open(folder + ".triage", "w") as f:
        f.write(result.stdout + result.stderr)
    groups = []
    if result.returncode in (0, 1):
        with open(os.path.join(folder, "triage.json")) as f:
            groups = json.load(f)["groups"]
    return result.returncode, groups, result.stderr.strip().splitlines()[-1:] or [""]


def breakdown(name, text, wall, jobs, cpu):
    """The breakdown line of one campaign: shares of its job time (wall x jobs) in the kernel, in
    first calls of a kernel variant (its compiles), in the adapter's own code, in the exchange, in
    the oracle, waiting behind other jobs' requests in a shared executor server (--adapter-servers),
    and the rest of kvfuzz (checks, generation, planning), from kvfuzz run's lines "adapter NAME
    time: ..." and "oracle: ..."; then `cpu`, the host's CPU busy over the campaign (OUT/NAME.cpu,
    ci/gpu.sh), or "-"; None when the log has neither line."""
    t = re.findall(r"adapter \S+ time: kernel ([\d.]+) s, first calls of a variant ([\d.]+) s, adapter code ([\d.]+) s, "
                   r"exchange ([\d.]+) s", text)
    o = re.findall(r"^oracle: ([\d.]+) s in run_oracle", text, re.M)
    q = re.findall(r"adapter \S+ time: .*, server queue ([\d.]+) s$", text, re.M)
    if not t or not o or not wall:
        return None
    job = wall * jobs
    parts = [sum(float(m[i]) for m in t) for i in range(4)] + [sum(map(float, o)), sum(map(float, q))]
    shares = [100 * x / job for x in parts] + [100 * (job - sum(parts)) / job]
    return (f"{name:<22} {job:>9.1f} s" + "".join(f"{x:>{w}.0f}%" for x, w in zip(shares, BREAKDOWN_WIDTHS))
            + f"{cpu:>{len(HOST_CPU) + 2}}")


BREAKDOWN_COLUMNS = ["kernel", "first calls", "adapter", "exchange", "oracle", "queue", "kvfuzz rest"]
HOST_CPU = "host CPU"
BREAKDOWN_WIDTHS = [len(c) + 2 for c in BREAKDOWN_COLUMNS]


def counts(text):
    """(cases checked, unsupported, wall seconds) of a campaign's log; a log of several shards: the
    cases added up, the longest wall time."""
    wall = max((float(x) for x in re.findall(r"campaign: \d+ cases in ([\d.]+) s", text)), default=0.0)
    checked = unsupported = 0
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3 and ":" in f[0] and f[1].isdigit() and f[2].isdigit():
            checked, unsupported = checked + int(f[1]), unsupported + int(f[2])
    return checked, unsupported, wall


def row(name, log, groups):
    text = open(log).read()
    wall_file = log[:-len(".log")] + ".wall"  # ci/gpu.sh: the campaign's whole time, shrinking included
    ran = f"{int(open(wall_file).read())} s" if os.path.exists(wall_file) else "-"
    cpu_file = log[:-len(".log")] + ".cpu"  # ci/gpu.sh: the host's CPU busy over the campaign, 0..1
    cpu = open(cpu_file).read().strip() if os.path.exists(cpu_file) else ""
    cpu = f"{100 * float(cpu):.0f}%" if cpu else "-"  # empty: no time passed between the samples
    b = re.findall(r"batches: (\d+) requests carried (\d+) cases", text)
    requests, carried = sum(int(x[0]) for x in b), sum(int(x[1]) for x in b)
    per_batch = f"{carried / requests:.1f}" if requests else "-"
    jobs = sum(int(x) for x in re.findall(r"(\d+) job\(s\)", text)) or 1
    checked, unsupported, wall = counts(text)
    found = {}
    for g in groups:  # cases with a finding of each property
        prop = g["key"].split("/")[0]
        found[prop] = found.get(prop, 0) + g["cases"]
    inside = re.findall(r"([\d.]+) s inside the adapter's function", text)
    share = f"{100 * sum(map(float, inside)) / (wall * jobs):.0f}%" if inside and wall else "?"
    findings = ", ".join(f"{p} {n}" for p, n in sorted(found.items())) or "none"
    known = sum(g["label"] == "known" for g in groups)
    new = sum(g["label"] == "NEW" for g in groups)
    back = sum(g["label"] == "regression" for g in groups)
    saved = str(known) + (f" + {new} NEW" if new else "") + (f" + {back} regr" if back else "")
    rate = f"{checked / wall:.1f}" if wall else "?"
    first = re.findall(r"^first 100 checked cases: ([\d.]+) s", text, re.M)
    first = f"{min(map(float, first)):.0f} s" if first else "-"
    # what the executor's declaration leaves out of the generator's draws (drawn again, not run)
    left = re.findall(r"drawn within support: (\d+) draws .*outside each backend's declared support:.* (\d+)%$", text, re.M)
    draws = sum(int(d) for d, _ in left)  # shards: their draws outside, over all their draws
    left = f"{round(sum(int(d) * int(p) for d, p in left) / draws)}%" if draws else "0%"
    shapes = re.findall(r"^shapes: (\d+)", text, re.M)
    shapes = str(max(map(int, shapes))) if shapes else "-"  # the shards draw from one shape table
    return (f"{name:<22} {checked:>9} {unsupported:>12} {rate:>9} {first:>9} {ran:>7} {per_batch:>9} {left:>9} {shapes:>7}"
            f" {share:>10} {saved:>12}"
            f"  {findings}",
            breakdown(name, text, wall, jobs, cpu))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, names = sys.argv[1], sys.argv[2:]
    status = 0
    budget = os.environ.get("KVFUZZ_GPU_SECONDS", "?")
    print(f"{'backend':<22} {'checked':>9} {'unsupported':>12} {'checked/s':>9} {'first 100':>9} {'ran':>7}"
          f" {'per batch':>9} {'undeclared':>9}"
          f" {'shapes':>7} {'in kernel':>10} {'fingerprints':>12}  cases with findings, by property")
    times = []
    for name in names:
        rc = int(open(os.path.join(out, name + ".rc")).read())
        log = os.path.join(out, name + ".log")
        if rc > 1:
            last = open(log).read().strip().splitlines()[-1:] or [""]
            print(f"{name:<22} kvfuzz exited {rc}: {last[0]}")
            status = 1
            continue
        rc, groups, note = triage(os.path.join(out, name))
        if rc not in (0, 1):
            print(f"{name:<22} triage exited {rc}: {note[0]}")
            status = 1
            continue
        status |= rc
        line, time_line = row(name, log, groups)
        print(line)
        times.append(time_line or f"{name:<22} (no time breakdown in {log})")
    print('("checked/s": cases checked per second of wall time, unsupported ones apart; "first 100": when the')
    print(f' 100th checked case finished; "ran": the whole campaign, shrinking included, for --seconds {budget};')
    print(' "per batch": cases a server request carried (batching); "undeclared": the generator\'s draws outside the executor\'s declared')
    print(' support, drawn again and never run; "shapes": page size, model and dtype combinations the cases ran on;')
    print(' "in kernel": time inside the adapter\'s function over the campaign\'s wall time times its jobs;')
    print(' "fingerprints": distinct fingerprints of every finding, known to adapters/gpu/known_issues.json (and any list of')
    print(' KVFUZZ_GPU_ISSUES) or NEW / regression,')
    print(f' each listed with its replay line in {out}/<backend>.triage)')
    if times:
        print("\nwhere the time went, as shares of each campaign's job time (wall time x jobs):")
        print(f"{'backend':<22} {'job time':>11}" + "".join(f"{c:>{w + 1}}" for c, w in zip(BREAKDOWN_COLUMNS, BREAKDOWN_WIDTHS))
              + f"{HOST_CPU:>{len(HOST_CPU) + 2}}")
        for line in times:
            print(line)
        print('("first calls": the kernel on the first request of a variant in a worker (dtype, heads, head dims,')
        print(' page size, mode, layer kinds, softcap), where JIT compiles land; "adapter": its own code around the')
        print(' function; "exchange": writing and reading the request\'s arrays on both sides and the pipe; "queue": a')
        print(' job\'s request waiting behind other jobs\' in a shared executor server; "kvfuzz rest": the job time left:')
        print(' kvfuzz\'s checks, generation, planning and shrinking; "host CPU": the host\'s cores busy over the')
        print(' campaign (every process; with KVFUZZ_GPU_PARALLEL=1 the campaigns running at once together): low')
        print(' with a high queue, the servers wait for the GPU, not for cores)')
    return status


if __name__ == "__main__":
    sys.exit(main())
