#!/bin/sh
# nest.sh DEPTH COMMAND...: run COMMAND below DEPTH shells, each waiting on the next (a deep process tree).
depth=$1
shift
if [ "$depth" -gt 0 ]; then
  sh "$0" $((depth - 1)) "$@"
  exit $?
fi
exec "$@"
