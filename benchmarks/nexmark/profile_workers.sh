#!/bin/bash
# Profile Spark's Python workers while run.py streams one Nexmark query: py-spy (install
# it apart, e.g. `pip install py-spy`; root or ptrace rights needed) attaches to every
# worker the run's PySpark daemon forks and writes one raw profile per worker, then
# profile_summary.py sums them.
#
# usage: benchmarks/nexmark/profile_workers.sh OUT QUERY EVENTS BATCH_ROWS [run.py options]
#   e.g. benchmarks/nexmark/profile_workers.sh /tmp/q11 q11 800000 100000
#        python benchmarks/nexmark/profile_summary.py /tmp/q11
set -euo pipefail
OUT=$1; QUERY=$2; EVENTS=$3; BATCH_ROWS=$4; shift 4
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python}
PY_SPY=${PY_SPY:-py-spy}
rm -rf "$OUT"; mkdir -p "$OUT"
"$PYTHON" "$HERE/run.py" --events "$EVENTS" --batch-rows "$BATCH_ROWS" --modes stream \
    --queries "$QUERY" --repeat 1 "$@" > "$OUT/run.txt" 2>&1 &
RUN=$!
declare -A seen
descends_from_run() {  # is $1 a descendant of the run (not another job's daemon)?
    local pid=$1
    while [ "$pid" -gt 1 ] && [ "$pid" != "$RUN" ]; do
        pid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null || echo 1)
    done
    [ "$pid" = "$RUN" ]
}
while kill -0 "$RUN" 2>/dev/null; do
    for daemon in $(pgrep -f pyspark.daemon || true); do
        descends_from_run "$daemon" || continue
        for worker in $(pgrep -P "$daemon" || true); do
            if [ -z "${seen[$worker]:-}" ]; then
                seen[$worker]=1
                "$PY_SPY" record --pid "$worker" -r 200 -f raw -o "$OUT/w-$worker.raw" \
                    > /dev/null 2>&1 &
            fi
        done
    done
    sleep 0.3
done
wait
grep "stream |" "$OUT/run.txt" | tail -1
