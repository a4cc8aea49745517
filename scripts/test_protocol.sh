#!/usr/bin/env bash
# Tests scripts/protocol.sh with a stand-in for xtask (it records its arguments, computes nothing):
# a piece runs its table script into the scratch folder (never the committed one) and appends a
# ledger line with its wall time, peak RSS, commit and exit status; a failing piece is recorded and
# stops the run; `next` names the first piece not yet timed, `summary` adds the timed pieces (a
# piece finished after a failed try counts both tries) against the budget; an unknown piece is
# refused before anything runs. Prints "N passed, 0 failed" or exits non-zero at the first failed
# check. Run from the repository root (CI does, from .ci/run).
set -euo pipefail
# shellcheck source=scripts/lib/check.sh
source "$(dirname "$0")/lib/check.sh"
SCRIPT=$(pwd)/scripts/protocol.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/fake-xtask" <<FAKE
#!/usr/bin/env bash
echo "\$*" >>$WORK/calls
[[ "\$*" != *"--shard 2/4"* || ! -e $WORK/fail ]]
FAKE
chmod +x "$WORK/fake-xtask"
before=$(git status --porcelain experiments)
export XTASK=$WORK/fake-xtask LEDGER=$WORK/ledger.jsonl PROTOCOL_OUT=$WORK/out PROTOCOL_NOTE="test"

"$SCRIPT" run table2:shard:0 table1:task:mr-snippets 2>"$WORK/log"
check "each piece ran its table script's command into the scratch folder" \
  bash -c "grep -q -- '--shard 0/4 .*--out $WORK/out/table2-paper/shard-0of4.json' $WORK/calls && grep -q -- '--task mr-snippets .*--out $WORK/out/table1-paper/mr-snippets.json' $WORK/calls"
check "one ledger line per piece, with its time, exit status and note" \
  python3 -c "
import json
r = [json.loads(l) for l in open('$WORK/ledger.jsonl')]
assert [x['piece'] for x in r] == ['table2:shard:0', 'table1:task:mr-snippets'], r
assert all(x['exit_status'] == 0 and x['wall_s'] >= 0 and x['note'] == 'test' and x['commit'] for x in r), r
"
check "next names the first piece not timed" bash -c "[ \"\$('$SCRIPT' next)\" = table2:shard:1 ]"

touch "$WORK/fail"
status=0
"$SCRIPT" run table2:shard:2 table2:shard:3 2>>"$WORK/log" || status=$?
check "a failing piece stops the run with its status" bash -c "[ $status -ne 0 ] && ! grep -q -- '--shard 3/4' $WORK/calls"
check "and is recorded as failed" \
  python3 -c "
import json
r = json.loads(open('$WORK/ledger.jsonl').read().splitlines()[-1])
assert r['piece'] == 'table2:shard:2' and r['exit_status'] != 0, r
"
check "a failed piece is not timed" bash -c "'$SCRIPT' summary | grep -q 'table2:shard:2 .*not timed yet'"
check "the summary adds the timed pieces against the budget" \
  bash -c "'$SCRIPT' summary | tail -1 | grep -q '^timed 2 of 24 pieces: .* of the 8-hour budget; 22 to go'"
rm "$WORK/fail"
"$SCRIPT" run table2:shard:2 2>>"$WORK/log"
check "a piece finished after a failed try counts both tries" \
  python3 -c "
import json, subprocess
r = [json.loads(l) for l in open('$WORK/ledger.jsonl') if 'shard:2' in l]
total = sum(x['wall_s'] for x in r)
line = next(l for l in subprocess.run(['$SCRIPT', 'summary'], capture_output=True, text=True).stdout.splitlines() if l.startswith('table2:shard:2 '))
assert len(r) == 2 and float(line.split()[1]) == round(total), (r, line)
"

status=0
"$SCRIPT" run table2:shard:9 2>"$WORK/err" || status=$?
check "an unknown piece is refused before anything runs" \
  bash -c "[ $status = 2 ] && grep -q \"unknown piece 'table2:shard:9'\" $WORK/err && [ \$(wc -l <$WORK/ledger.jsonl) = 4 ]"
check "the committed folders are untouched" test "$before" = "$(git status --porcelain experiments)"
checks_passed
