# Phase timing for .ci/run and ./test.sh (sourced, not run).
#   phase NAME CMD...   runs CMD, appends "NAME<TAB>SECONDS<TAB>STATUS<TAB>FREE_KIB" to
#                       $LOREKEEPER_PHASES (FREE_KIB: the disk space left after it, `df -P .`)
#   phase_report        prints the phases and the slowest tests (scripts/test-report.py)
# The first script to source this owns the file and prints the report when it exits; a script
# it runs (test.sh under .ci/run) adds its phases to the same file.
if [ -z "${LOREKEEPER_PHASES:-}" ]; then
  export LOREKEEPER_PHASES
  LOREKEEPER_PHASES=$(mktemp /tmp/lorekeeper-phases.XXXXXX)
  export LOREKEEPER_T0
  LOREKEEPER_T0=$(date +%s)
  _phases_owner=1
else
  _phases_owner=0
fi

phase() {
  local name=$1 t s=0
  shift
  echo "== $name =="
  t=$(date +%s)
  "$@" || s=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$(( $(date +%s) - t ))" "$s" \
    "$(df -P . 2>/dev/null | awk 'NR == 2 { print $4 }')" >> "$LOREKEEPER_PHASES"
  return "$s"
}

phase_report() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/test-report.py" "$LOREKEEPER_PHASES" \
    "$(( $(date +%s) - LOREKEEPER_T0 ))" "$LOREKEEPER_T0" || true
}

if [ "$_phases_owner" = 1 ]; then
  trap 'phase_report; rm -f "$LOREKEEPER_PHASES"' EXIT
fi
