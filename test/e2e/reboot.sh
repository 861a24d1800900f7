#!/usr/bin/env bash
# gpuhc e2e: a simulated node reboot (test/e2e/README.md, "Simulated reboots").
# testbed.sh installs this as <bed dir>/reboot.sh on every test bed.
#
#   reboot.sh              RebootProgram: slurmd runs it as root, with no
#                          arguments, on the node to reboot. It finds that
#                          slurmd among its ancestors, and a detached copy of
#                          itself stops that slurmd and starts it again with
#                          -b (slurmd reports the node rebooted) and its other
#                          arguments; the node gets a new boot id first.
#   reboot.sh exec CMD...  runs CMD with the node's ($SLURMD_NODENAME) current
#                          simulated boot id bind-mounted over
#                          /proc/sys/kernel/random/boot_id, in a private mount
#                          namespace; as plain CMD until the node's first
#                          simulated reboot.
#
# State, next to this script: boot/NODE (the boot id) and boot/NODE.log (one
# line per reboot: time, old and new slurmd pid).
set -euo pipefail

dir=$(cd "$(dirname "$0")" && pwd)
boot=$dir/boot

# stat_of PID N: field N of /proc/PID/stat (4 the parent, 6 the session);
# comm, field 2, may hold spaces.
stat_of() {
	local s f
	s=$(<"/proc/$1/stat")
	read -r -a f <<<"${s##*) }"
	echo "${f[$2 - 3]}"
}

case ${1:-} in
exec)
	shift
	id=$boot/${SLURMD_NODENAME:-none}
	[[ -s $id ]] || exec "$@"
	# In a chroot / is no mount point, so /proc is made private instead.
	# shellcheck disable=SC2016 # $0 and $@ are the inner shell's
	exec unshare -m --propagation unchanged /bin/sh -c \
		'mount --make-rprivate /proc && mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@"' \
		"$id" "$@"
	;;
restart)
	# restart PID NODE ARGV...: the detached half, in its own session.
	pid=$2 node=$3
	shift 3
	# nothing of the old slurmd's (a listening socket) may reach the new one
	for fd in "/proc/$$/fd"/*; do
		fd=${fd##*/}
		if ((fd > 2)); then exec {fd}>&-; fi
	done
	sleep 1 # let slurmd see RebootProgram end
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
	mkdir -p "$boot"
	cat /proc/sys/kernel/random/uuid >"$boot/$node.tmp"
	mv "$boot/$node.tmp" "$boot/$node"
	echo "[gpuhc reboot.sh $(date -u +%FT%T.%3NZ)] $node rebooted: slurmd $pid stopped, starting $*"
	cd /
	exec "$@" &
	echo "$(date -u +%FT%T.%3NZ) $node slurmd $pid -> $! boot_id $(<"$boot/$node")" >>"$boot/$node.log"
	exit 0
	;;
'') ;;
*)
	echo "usage: reboot.sh (as RebootProgram) | reboot.sh exec CMD..." >&2
	exit 2
	;;
esac

# RebootProgram: which slurmd ran us?
pid=$PPID
while [[ $pid -gt 1 && $(<"/proc/$pid/comm") != slurmd ]]; do
	pid=$(stat_of "$pid" 4)
done
[[ $pid -gt 1 ]] || { echo "reboot.sh: no slurmd among my ancestors" >&2; exit 1; }
mapfile -d '' -t argv <"/proc/$pid/cmdline"
node=${SLURM_NODE_NAME:-}  # 26.05 sets it; 24.11 and 22.05 do not
new=("${argv[0]}" -b)
for ((i = 1; i < ${#argv[@]}; i++)); do
	[[ ${argv[i]} == -b ]] && continue
	[[ ${argv[i]} == -N ]] && node=${argv[i + 1]:-}
	new+=("${argv[i]}")
done
[[ -n $node ]] || node=$(hostname -s)
# slurmd's own stdout (the bed's log of it) stays open through
# /proc/PID/fd/1, even from inside a chroot.
setsid "$0" restart "$pid" "$node" "${new[@]}" </dev/null >>"/proc/$pid/fd/1" 2>&1 &
# 26.05's slurmd kills RebootProgram's process group when it ends: wait
# until the restarting half is in its own session.
for ((i = 0; i < 100; i++)); do
	[[ $(stat_of "$!" 6 2>/dev/null) == "$!" ]] && break
	sleep 0.05
done
echo "reboot.sh: rebooting $node (slurmd $pid)"
