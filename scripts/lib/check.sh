# The check harness of the scripts' tests (scripts/test_*.sh), sourced by each: `check DESCRIPTION
# COMMAND...` runs the command and counts it as passed, or prints "FAILED: DESCRIPTION", the count
# and "1 failed" and exits non-zero at once; `checks_passed` prints "N passed, 0 failed" at the end.
passed=0
check() { # description command...
  local what=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    echo "FAILED: $what" >&2
    echo "$passed passed, 1 failed"
    exit 1
  fi
}
checks_passed() {
  echo "$passed passed, 0 failed"
}
