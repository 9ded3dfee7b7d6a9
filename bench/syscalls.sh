#!/bin/bash
# System calls per round trip of an echo server: runs SERVER... --listen
# 127.0.0.1:0 under `strace -f -c` on CPU 0 (it must print `listening
# HOST:PORT`, as yard-serve and the peers do), drives it with yard-load echo
# (CONNECTIONS=150 x MESSAGES=2000 messages of 16 B) on CPU 1, stops it, and prints
# the eight most frequent calls divided by the round trips made.
#   usage: bench/syscalls.sh SERVER [ARGS...]
#   e.g.   bench/syscalls.sh build/bin/yard-serve --app echo --model coro --workers 1
#          bench/syscalls.sh peers/go/run --app echo
# strace slows the server down many times over: read the counts, not the time.
set -euo pipefail
if [ $# -lt 1 ]; then
    sed -n '2,10p' "$0" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
load=${YARD_LOAD:-$root/build/bin/yard-load}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/yard-syscalls.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
taskset -c 0 strace -f -c -o "$tmp/strace" "$@" --listen 127.0.0.1:0 > "$tmp/out" 2>&1 &
tracer=$!
for _ in $(seq 200); do
    grep -q '^listening ' "$tmp/out" && break
    sleep 0.05
done
addr=$(sed -n 's/^listening //p' "$tmp/out")
if [ -z "$addr" ]; then
    echo "syscalls.sh: the server did not start:" >&2
    cat "$tmp/out" >&2
    kill "$tracer" 2>/dev/null
    exit 1
fi
taskset -c 1 "$load" echo --target "$addr" --connections "${CONNECTIONS:-150}" \
    --messages "${MESSAGES:-2000}" --size 16 \
    --json > "$tmp/load.json"
# Stop the server, not strace: strace writes its summary when its tracee exits.
kill -TERM "$(pgrep -P "$tracer")"
wait "$tracer" || true
python3 - "$tmp/strace" "$tmp/load.json" "$*" <<'EOF'
import json, sys
trips = json.load(open(sys.argv[2]))["messages"]
calls = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        calls.append((int(f[3]), f[-1]))
calls.sort(reverse=True)
print(f"{sys.argv[3]}: {trips} round trips; system calls per round trip:")
print("  " + "  ".join(f"{name} {n / trips:.3f}" for n, name in calls[:8]))
print(f"  all: {sum(n for n, _ in calls) / trips:.3f}")
EOF
