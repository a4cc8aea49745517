#!/usr/bin/env bash
# Issue 62 item 7: the whole paper-budget protocol (Table 2, its ablation, the constructed network
# and the approximations; Table 1 on the four tasks, its matched controls and its constructed subset), timed piece by
# piece so that its total on a 2-core CPU is measured, not guessed, across sessions of <= 2.5 h.
#
#   list                 the pieces, in the order they must run (a constructed piece reads the step
#                        its shard or task piece tuned)
#   run PIECE...         runs each piece with scripts/table{1,2}_paper.sh into $PROTOCOL_OUT (default
#                        /tmp/protocol: a rerun never touches the committed reports; set it to the
#                        committed folder's parent to land them), timed by /usr/bin/time -v, and
#                        appends one line per piece to the ledger: piece, command, start and end (UTC),
#                        wall and CPU seconds, peak RSS, exit status, commit, CPU model and cores, and
#                        $PROTOCOL_NOTE (what else shared the cores)
#   next                 the first piece of the list without a successful ledger line
#   summary              the latest successful wall time of each piece, the pieces still missing, and
#                        the total against the 8-hour budget
#
# LEDGER names the ledger (default experiments/protocol-time/ledger.jsonl, committed). XTASK names the
# binary (default: a copy of target/debug/xtask made once per `run`, so a rebuild during a run does not
# change it). Each piece is resumable cell by cell (`--resume`): a piece stopped part-way records its
# exit status, and running it again goes on from its JSON (its ledger line then times only the rest;
# `summary` adds the lines of one piece when the earlier ones did not finish).
set -euo pipefail
cd "$(dirname "$0")/.."
LEDGER=${LEDGER:-experiments/protocol-time/ledger.jsonl}
PROTOCOL_OUT=${PROTOCOL_OUT:-/tmp/protocol}
BUDGET_S=${BUDGET_S:-28800}

PIECES=(
    table2:shard:0 table2:shard:1 table2:shard:2 table2:shard:3
    table2:ablation:15x2 table2:ablation:8x4
    table2:constructed:0.3 table2:constructed:0.5 table2:constructed:0.7 table2:constructed:0.9
    table2:exact-derivatives table2:exact-attention table2:all-exact table2:merge
    table1:task:mr-snippets table1:task:cr-snippets table1:task:bbc-topics
    table1:task:amazon-fine-food
    table1:matched:mr-snippets table1:matched:cr-snippets table1:matched:bbc-topics
    table1:matched:amazon-fine-food table1:constructed table1:merge
)

known() { # piece
    local p
    for p in "${PIECES[@]}"; do [[ $p == "$1" ]] && return 0; done
    return 1
}

case "${1:-}" in
list)
    printf '%s\n' "${PIECES[@]}"
    ;;
run)
    shift
    [[ $# -gt 0 ]] || { echo "run: name at least one piece (see: $0 list)" >&2; exit 2; }
    for piece in "$@"; do
        known "$piece" || { echo "run: unknown piece '$piece' (see: $0 list)" >&2; exit 2; }
    done
    [[ -x /usr/bin/time ]] || { echo "run: /usr/bin/time (GNU time, Debian package 'time') is needed to measure each piece" >&2; exit 2; }
    if [[ -z "${XTASK:-}" ]]; then
        XTASK=$(mktemp /tmp/xtask-protocol.XXXXXX)
        cp target/debug/xtask "$XTASK"
        chmod +x "$XTASK"
    fi
    export XTASK
    mkdir -p "$(dirname "$LEDGER")"
    for piece in "$@"; do
        IFS=: read -r table what arg <<<"$piece"
        out="$PROTOCOL_OUT/$table-paper"
        mkdir -p "$out"
        cmd=(scripts/"${table}"_paper.sh "$what")
        [[ -n "$arg" ]] && cmd+=("$arg")
        times=$(mktemp)
        start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
        echo "[protocol] $piece: ${cmd[*]} into $out, from $start" >&2
        status=0
        TABLE_OUT="$out" /usr/bin/time -v -o "$times" "${cmd[@]}" || status=$?
        end=$(date -u +%Y-%m-%dT%H:%M:%SZ)
        python3 - "$LEDGER" "$times" "$piece" "${cmd[*]}" "$out" "$start" "$end" "$status" <<'PY'
import json, os, re, subprocess, sys
ledger, times, piece, command, out, start, end, status = sys.argv[1:]
text = open(times).read()
def field(name):
    m = re.search(re.escape(name) + r': (.+)', text)
    return m.group(1).strip() if m else None
def seconds(clock):
    parts = [float(p) for p in clock.split(':')]
    return sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
cpu = next((l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), '?')
commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(['git', 'status', '--porcelain', '--', 'crates', 'xtask', 'vendor', 'Cargo.lock'],
                       capture_output=True, text=True).stdout.strip() != ''
record = {
    'piece': piece, 'command': command, 'out': out, 'start': start, 'end': end,
    'exit_status': int(status),
    'wall_s': seconds(field('Elapsed (wall clock) time (h:mm:ss or m:ss)') or '0'),
    'user_s': float(field('User time (seconds)') or 0), 'system_s': float(field('System time (seconds)') or 0),
    'peak_rss_kb': int(field('Maximum resident set size (kbytes)') or 0),
    'commit': commit + ('+changes' if dirty else ''), 'cpu': cpu, 'cores': os.cpu_count(),
    'note': os.environ.get('PROTOCOL_NOTE', ''),
}
with open(ledger, 'a') as f:
    f.write(json.dumps(record) + '\n')
print(f"[protocol] {piece}: exit {status}, {record['wall_s']:.0f} s wall, peak RSS {record['peak_rss_kb'] / 1e6:.1f} GB", file=sys.stderr)
PY
        rm -f "$times"
        [[ $status -eq 0 ]] || exit "$status"
    done
    ;;
next | summary)
    mode=$1
    python3 - "$LEDGER" "$BUDGET_S" "$mode" "${PIECES[@]}" <<'PY'
import json, os, sys
ledger, budget, mode, pieces = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
lines = [json.loads(l) for l in open(ledger)] if os.path.exists(ledger) else []
timed = {}
for piece in pieces:
    runs = [r for r in lines if r['piece'] == piece]
    # The latest finished run, with the unfinished runs just before it (a resumed piece).
    parts = []
    for r in runs:
        parts.append(r)
        if r['exit_status'] == 0:
            timed[piece] = (sum(p['wall_s'] for p in parts), parts)
            parts = []
if mode == 'next':
    missing = [p for p in pieces if p not in timed]
    print(missing[0] if missing else '')
    sys.exit(0)
total = 0.0
for piece in pieces:
    if piece in timed:
        wall, parts = timed[piece]
        total += wall
        last = parts[-1]
        print(f"{piece:32} {wall:8.0f} s  {last['end']}  {last['commit']}  {last['note']}")
    else:
        print(f"{piece:32} {'—':>8}    not timed yet")
missing = [p for p in pieces if p not in timed]
print(f"timed {len(pieces) - len(missing)} of {len(pieces)} pieces: {total:.0f} s ({total / 3600:.2f} h) "
      f"of the {budget / 3600:.0f}-hour budget" + (f"; {len(missing)} to go" if missing else ""))
PY
    ;;
*)
    echo "usage: $0 list | run PIECE... | next | summary" >&2
    exit 2
    ;;
esac
