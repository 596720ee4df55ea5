#!/bin/bash
# Where state_growth.py's time goes for one side: py-spy (install it apart, e.g.
# `pip install py-spy`; root or ptrace rights needed) on every Python worker the run's
# PySpark daemon forks (one raw profile each, summed by nexmark/profile_summary.py), and
# the CPU seconds of the run's JVM and of its Python workers, read from /proc while the
# run goes (the last value seen of each process), beside the run's wall time.
#
# usage: benchmarks/profile_state_growth.sh OUT SIDE [state_growth.py options]
#   e.g. benchmarks/profile_state_growth.sh /tmp/prof tidemark --batches 24
#        python benchmarks/nexmark/profile_summary.py /tmp/prof
set -euo pipefail
OUT=$1; SIDE=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python}
PY_SPY=${PY_SPY:-py-spy}
rm -rf "$OUT"; mkdir -p "$OUT"
START=$(date +%s.%N)
"$PYTHON" "$HERE/state_growth.py" --sides "$SIDE" --rounds 1 "$@" > "$OUT/run.txt" 2>&1 &
RUN=$!
declare -A seen cpu kind
descends_from_run() {  # is $1 a descendant of the run (not another job's process)?
    local pid=$1
    while [ "$pid" -gt 1 ] && [ "$pid" != "$RUN" ]; do
        pid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null || echo 1)
    done
    [ "$pid" = "$RUN" ]
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || true; }
while kill -0 "$RUN" 2>/dev/null; do
    for jvm in $(pgrep -P "$RUN" java || true); do
        t=$(ticks "$jvm"); [ -n "$t" ] && cpu[$jvm]=$t && kind[$jvm]=jvm
    done
    for daemon in $(pgrep -f pyspark.daemon || true); do
        descends_from_run "$daemon" || continue
        for worker in $(pgrep -P "$daemon" || true); do
            t=$(ticks "$worker"); [ -n "$t" ] && cpu[$worker]=$t && kind[$worker]=python
            if [ -z "${seen[$worker]:-}" ]; then
                seen[$worker]=1
                "$PY_SPY" record --pid "$worker" -r 100 -f raw -o "$OUT/w-$worker.raw" \
                    > /dev/null 2>&1 &
            fi
        done
    done
    sleep 0.5
done
wait
WALL=$(echo "$(date +%s.%N) - $START" | bc)
HZ=$(getconf CLK_TCK)
JVM=0; PY=0
for pid in "${!cpu[@]}"; do
    if [ "${kind[$pid]}" = jvm ]; then JVM=$((JVM + cpu[$pid])); else PY=$((PY + cpu[$pid])); fi
done
grep -v WARN "$OUT/run.txt" | tail -8
printf 'wall %.0f s (warm-up and end-of-input run included); CPU: JVM %.0f s, Python workers %.0f s\n' \
    "$WALL" "$(echo "$JVM / $HZ" | bc -l)" "$(echo "$PY / $HZ" | bc -l)"
