# gpu_steps.sh -- sourced by the device runs' scripts (bench/results/*/run*.sh): bounded steps
# inside one device call, each logged with its exit status and time, so that a slow step ends
# the run's later steps cleanly instead of the call's limit killing everything.
#
#   . tools/gpu_steps.sh DIR [LIMIT]   # DIR for logs (rc.txt); LIMIT: the call's seconds (L, 560)
#   step NAME SECONDS CMD [ARGS...]    # runs CMD under timeout: SECONDS or what is left, whichever
#                                      # is less; skipped when under 10 s are left
#   steps_done                         # "elapsed N s" into rc.txt, then rc.txt printed
#
# CMD must be a program, not a shell function (timeout runs it); use `env VAR=x prog` for
# variables.
STEPS_DIR=$1
STEPS_T0=$(date +%s)
STEPS_L=${2:-${L:-560}}
mkdir -p "$STEPS_DIR"

steps_left() { echo $(( STEPS_L - 15 - ($(date +%s) - STEPS_T0) )); }

step() {
  local name=$1 lim=$2 l t
  shift 2
  l=$(steps_left)
  [ "$l" -lt "$lim" ] && lim=$l
  if [ "$l" -lt 10 ]; then
    echo "$name skipped (no time)" >> "$STEPS_DIR/rc.txt"
    return 0
  fi
  t=$(date +%s)
  timeout "$lim" "$@"
  echo "$name rc $? ($(( $(date +%s) - t )) s, limit $lim s)" >> "$STEPS_DIR/rc.txt"
}

steps_done() {
  echo "elapsed $(( $(date +%s) - STEPS_T0 )) s" >> "$STEPS_DIR/rc.txt"
  cat "$STEPS_DIR/rc.txt"
}
