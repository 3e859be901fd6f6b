#!/usr/bin/env bash
# ci/gpu_table.py's time breakdown from a real campaign: a short kvfuzz run against the numpy
# page_table example adapter (adapters/examples/), then the table. Its breakdown row must be there,
# with time in every part of a request (kernel, first calls, adapter code, each side of the
# exchange, the pipe), the measured parts within the campaign's job time (kvfuzz rest >= 0), the
# shares adding up to 100%, and its checked/s must be checked over wall time.
# About 15 s. Usage: gpu_table_breakdown_test.sh KVFUZZ SOURCE_DIR WORK_DIR
set -uo pipefail
KVFUZZ=$1 SRC=$2 WORK=$3
python3 -c "import numpy" 2>/dev/null || { echo "SKIPPED: python3 with numpy not found"; exit 0; }
rm -rf "$WORK" && mkdir -p "$WORK"
name=numpy_page_table
"$KVFUZZ" run --cases 60 --profile tiny --profile small --jobs 1 --no-shrink --backend $name \
  --adapter "python3 $SRC/adapters/examples/$name.py" --out "$WORK/$name" >"$WORK/$name.log" 2>&1
echo $? >"$WORK/$name.rc"
python3 "$SRC/ci/gpu_table.py" "$WORK" $name >"$WORK/table.out" 2>&1
rc=$?
cat "$WORK/table.out"
grep "time:\|^oracle:" "$WORK/$name.log"
[ $rc -eq 0 ] || { echo "FAIL: gpu_table.py exit $rc on a clean campaign"; exit 1; }
python3 - "$WORK/table.out" "$WORK/$name.log" <<'PY'
import re, sys
table, log = open(sys.argv[1]).read(), open(sys.argv[2]).read()
failures = []
# the last column, host CPU, is "-" here: ci/gpu.sh samples it, not gpu_table.py (ci_gpu_table_test)
rows = re.findall(r"^numpy_page_table +([\d.]+) s +(\d+)% +(\d+)% +(\d+)% +(\d+)% +(\d+)% +(\d+)% +(-?\d+)% +-$", table,
                  re.M)
if len(rows) != 1:
    sys.exit(f"FAIL: no breakdown row for numpy_page_table in:\n{table}")
job, kernel, first, adapter, exchange, oracle, queue, rest = (float(x) for x in rows[0])
wall = float(re.search(r"campaign: \d+ cases in ([\d.]+) s", log).group(1))
if abs(job - wall) > 0.1:
    failures.append(f"job time {job} s is not the wall time {wall} s of 1 job")
seconds = re.search(r"time: kernel ([\d.]+) s, first calls of a variant ([\d.]+) s, adapter code ([\d.]+) s, "
                    r"exchange ([\d.]+) s \(kvfuzz writes ([\d.]+), adapter reads ([\d.]+), adapter writes ([\d.]+), "
                    r"kvfuzz reads ([\d.]+), pipe ([\d.]+)\)", log)
if not seconds:
    failures.append("no time line with every part >= 0 in the log")
elif not all(float(x) > 0 for x in seconds.groups()):
    failures.append(f"a part of the adapter's time is not positive: {seconds.group(0)}")
if rest < -1:
    failures.append(f"the measured parts exceed the job time: kvfuzz rest {rest}%")
if queue != 0:
    failures.append(f"per-job workers waited {queue}% in a server queue")
if abs(kernel + first + adapter + exchange + oracle + queue + rest - 100) > 3:
    failures.append("the shares do not add up to 100% (rounding aside)")
checked = int(re.search(r"^numpy_page_table +(\d+) +(\d+) +([\d.]+)", table, re.M).group(1))
rate = float(re.search(r"^numpy_page_table +(\d+) +(\d+) +([\d.]+)", table, re.M).group(3))
if checked == 0 or abs(rate - checked / wall) > 0.06:
    failures.append(f"checked/s {rate} is not {checked} checked over {wall} s")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
PY
[ $? -eq 0 ] && echo "gpu_table breakdown test: passed"
