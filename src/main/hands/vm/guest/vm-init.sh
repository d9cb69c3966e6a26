#!/bin/sh
# The vm backend's guest, stage 2: PID 1 in the root filesystem (dash), as root.
#   $1 the runner's port (corral.runner), $2 the control port (corral.control), $3 the egress
#   port (corral.egress) or empty.
# Starts the runner (it becomes uid 1000 as its first act, CORRAL_RUNNER_USER) on the runner's
# port, opened once read-write (a virtio port allows one open), and answers the host's control
# lines on the control port. The host snapshots the VM once the runner said hello; every sandbox
# is a restore of that snapshot, after which the host sends one control line:
#   start <unix seconds> [<9p tag>,<guest path>,<ro|rw>]...   (path bytes outside [A-Za-z0-9._/@+-] as \0ooo)
# which sets the clock (the restored guest's clock is the snapshot's; the host sends it once the
# restored runner answered, rounded to the second: busybox's date takes whole seconds) and mounts
# the session's 9p shares (a mounted share blocks migration, so nothing is mounted before the
# snapshot), then
#   clock <unix seconds>              sets the clock again
#   ping [<runner pid>]               the host's heartbeat during a call: builtins only (no
#                                     process), and with a pid, whether the runner is stopped
#                                     (SIGSTOP: state T or t in /proc/<pid>/stat) or gone
# Each line is answered, in order, with: ok | error <reason>
# Every process costs tens to hundreds of ms right after a restore under TCG (none of its code is
# translated yet; a dynamically linked one runs ld.so in emulation too), so the loop uses builtins
# and the static busybox only.
# Then this shell only reaps orphans (it is PID 1).
runner=$1 control=$2 egress=$3
export PATH=/usr/local/bin:/usr/bin:/bin
hostname corral 2>/dev/null
mount -t tmpfs -o mode=1777,size=512m tmpfs /tmp
mount -t tmpfs -o mode=0755,uid=1000,gid=1000,size=256m tmpfs /mnt/session
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts 2>/dev/null && mount -t tmpfs -o mode=1777 tmpfs /dev/shm

# The guest has only lo: up, for the egress bridge and anything the agent serves itself.
/opt/corral/busybox ifconfig lo 127.0.0.1 up 2>/dev/null
# vmnet's egress bridge (src/main/hands/vm/egress-bridge.ts): the guest's 127.0.0.1:3128 carried
# over the corral.egress port to the host, which opens the session's egress proxy per stream. It
# waits while no host is connected (the template boot, across the snapshot).
if [ -n "$egress" ] && [ -f /opt/corral/egress-bridge.js ]; then
  node /opt/corral/egress-bridge.js --channel "$egress" </dev/null >/dev/console 2>&1 &
fi

# The runner's environment: nothing of the host's; per-sandbox settings are on the kernel command
# line as corral.env.<NAME>=<value> (the template's, part of its key).
runner_env= pids=
for arg in $(cat /proc/cmdline); do
  case "$arg" in corral.env.CORRAL_*=*) runner_env="$runner_env ${arg#corral.env.}" ;; esac
  case "$arg" in corral.env.CORRAL_PIDS=*) pids=${arg#corral.env.CORRAL_PIDS=} ;; esac
done
cd /workspace
# shellcheck disable=SC2086
# When the runner ends (its host went away: the port's EOF; or it died) the VM powers off, and
# qemu (-no-reboot) exits: a VM does not outlive its host (qemu's -runas drops the host's
# parent-death signal).
# The environment's `pids`: RLIMIT_NPROC, binding once the runner is uid 1000 (its own threads,
# the shell and every command count), so a fork bomb gets EAGAIN instead of filling the guest's
# memory until its kernel kills the runner.
(
  case "$pids" in '' | *[!0-9]*) ;; *) ulimit -p "$pids" ;; esac
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/corral LANG=C.UTF-8 USER=corral CORRAL_RUNNER_USER=1000:1000 $runner_env \
    node /opt/corral/runner.js 0<>"$runner" 1>&0 2>/dev/console
  /opt/corral/busybox poweroff -f
) &

bb=/opt/corral/busybox
control_loop() {
  while read -r cmd at shares; do
    case "$cmd" in
      start)
        err=
        $bb date -s "@$at" >/dev/null 2>&1 || err="date -s @$at failed"
        for share in $shares; do
          [ -n "$err" ] && break
          tag=${share%%,*}; rest=${share#*,}; target=${rest%,*}; mode=${rest##*,}
          # A byte other than letters, digits and . _ / @ + - comes as \0ooo (a space, a comma, ...).
          case "$target" in *\\*) target=$(printf '%b' "$target") ;; esac
          # Builtins where they do: every fork and exec costs tens of ms under TCG.
          [ -d "$target" ] || $bb mkdir -p "$target" 2>/dev/null
          opts=trans=virtio,version=9p2000.L,msize=524288,cache=none,access=client
          [ "$mode" = ro ] && opts="$opts,ro"
          out=$($bb mount -t 9p -o "$opts" "$tag" "$target" 2>&1) || { err="mount $tag at $target: $out"; break; }
          # A fresh workspace directory belongs to whoever runs qemu on the host: the sandbox user owns it here.
          if [ "$mode" = rw ] && [ "$target" = /workspace -o "$target" = /opt/corral/state ]; then $bb chown 1000:1000 "$target"; fi
        done
        if [ -z "$err" ]; then echo ok; else echo "error $err" | tr -d '\r'; fi
        ;;
      ping)
        # $at is the runner's pid here, when the host knows it.
        if [ -z "$at" ]; then echo ok
        elif ! read -r stat 2>/dev/null <"/proc/$at/stat"; then echo "error the runner (pid $at) is gone"
        else
          stat=${stat##*) }
          case "${stat%% *}" in
            T | t) echo "error the runner (pid $at) is stopped" ;;
            *) echo ok ;;
          esac
        fi
        ;;
      clock)
        $bb date -s "@$at" >/dev/null 2>&1 && echo ok || echo "error date -s @$at failed"
        ;;
      *) echo "error unknown control line" ;;
    esac
  done
}
control_loop <>"$control" >&0 &
while :; do wait; done
