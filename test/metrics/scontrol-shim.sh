#!/bin/bash
# A stand-in for scontrol with memory, for test/metrics/run.sh: it knows
# one node, whose state and reason it keeps in files next to itself, and
# answers the four calls gpuhc makes (-o show node NAME, -o show nodes,
# update State=DRAIN Reason=..., update State=RESUME) in scontrol's own
# one-line format. "-o show nodes" also prints the lines of others.txt,
# the rest of the cluster as the storm guard counts it. Anything else
# exits 1 as scontrol does for an error. Each call is logged to calls.log.
set -euo pipefail
dir=$(dirname "$(readlink -f "$0")")
node=$(cat "$dir/node")
printf '%q ' "$@" >>"$dir/calls.log"; echo >>"$dir/calls.log"
line() {
	local state reason=""
	state=$(cat "$dir/state")
	[[ -s $dir/reason ]] && reason=" Reason=$(cat "$dir/reason")"
	echo "NodeName=$node Arch=x86_64 CPUAlloc=0 CPUTot=2 State=$state Partitions=gpu$reason"
}
case "$*" in
"-o show node $node") line ;;
"-o show nodes")
	line
	if [[ -f $dir/others.txt ]]; then cat "$dir/others.txt"; fi
	;;
"update NodeName=$node State=DRAIN Reason="*)
	echo IDLE+DRAIN >"$dir/state"
	printf '%s [root@%s]\n' "${4#Reason=}" "$(date +%Y-%m-%dT%H:%M:%S)" >"$dir/reason"
	;;
"update NodeName=$node State=RESUME")
	echo IDLE >"$dir/state"
	: >"$dir/reason"
	;;
*)
	echo "scontrol shim: unexpected call: $*" >&2
	exit 1
	;;
esac
