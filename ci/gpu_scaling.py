"""The "every GPU of the host" table (ci/gpu_scaling.sh): each executor's checked cases a second on
one GPU, on every GPU from one kvfuzz process, and on every GPU with a kvfuzz process a GPU, with
the ratios to one GPU, the rate a GPU and the target (1.8x on 2 GPUs, 3.4x on 4: docs/gpu.md).

    python3 ci/gpu_scaling.py OUT NAME...   # OUT/gpus (the GPU count), OUT/{one,all,per_gpu}/NAME.log

A run that is missing (its log absent) or failed (its NAME.rc above 1) shows "-" and its reason
under the table; exit 1 then, 0 when every run of every executor was read. The rates are
ci/gpu_table.py's (checked over the campaign's wall time; a run of shards: their cases added up
over the longest shard's time).
"""
import os
import sys

from gpu_table import counts

RUNS = (("one", "one GPU"), ("all", "every GPU, one process"), ("per_gpu", "every GPU, a process each"))
TARGETS = {2: 1.8, 4: 3.4}  # issue 30: checked/s on 2 and 4 GPUs against one


def rate(out, run, name):
    """(checked/s, None) or (None, why)."""
    base = os.path.join(out, run, name)
    if not os.path.exists(base + ".log"):
        return None, f"{run}/{name}: no log"
    rc = int(open(base + ".rc").read()) if os.path.exists(base + ".rc") else 0
    text = open(base + ".log").read()
    if rc > 1:
        last = text.strip().splitlines()[-1:] or [""]
        return None, f"{run}/{name}: kvfuzz exited {rc}: {last[0]}"
    checked, _, wall = counts(text)
    if not wall:
        return None, f"{run}/{name}: no campaign line in the log"
    return checked / wall, None


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, names = sys.argv[1], sys.argv[2:]
    try:
        gpus = int(open(os.path.join(out, "gpus")).read())
    except (OSError, ValueError):
        print(f"gpu_scaling: {out}/gpus: no GPU count (ci/gpu_scaling.sh writes it)", file=sys.stderr)
        return 2
    target = TARGETS.get(gpus)
    print(f"{'executor':<22} {'one GPU':>9} {'every GPU':>10} {'ratio':>6} {'a process each':>15} {'ratio':>6}"
          f" {'best a GPU':>11}  target ({gpus} GPUs)")
    why, status = [], 0
    for name in names:
        r = {}
        for run, _ in RUNS:
            r[run], reason = rate(out, run, name)
            if reason:
                why.append(reason)
                status = 1
        cell = lambda x: f"{x:.1f}" if x is not None else "-"  # noqa: E731
        ratio = lambda x: f"{x / r['one']:.2f}x" if x is not None and r["one"] else "-"  # noqa: E731
        best = max((x for x in (r["all"], r["per_gpu"]) if x is not None), default=None)
        verdict = "-"
        if target and best is not None and r["one"]:
            verdict = f"{target}x: " + ("met" if best / r["one"] >= target else "missed")
        elif not target:
            verdict = f"none set for {gpus} GPUs"
        print(f"{name:<22} {cell(r['one']):>9} {cell(r['all']):>10} {ratio(r['all']):>6} {cell(r['per_gpu']):>15}"
              f" {ratio(r['per_gpu']):>6} {cell(best / gpus if best is not None else None):>11}  {verdict}")
    print('(checked cases a second: "one GPU" on the first visible GPU with its share of the cores, "every GPU"')
    print(' from one kvfuzz process, "a process each" one kvfuzz process a GPU (KVFUZZ_GPU_PER_GPU=1); "best a GPU":')
    print(' the better of the two over the GPUs)')
    for line in why:
        print(f"  {line}")
    return status


if __name__ == "__main__":
    sys.exit(main())
