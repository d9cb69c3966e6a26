#!/usr/bin/env bash
# Starts a Docker engine for Corral's Docker sandboxes, if none answers yet. Idempotent.
#   - exits 0 at once when /var/run/docker.sock already answers;
#   - registers gVisor's runsc runtime in /etc/docker/daemon.json when runsc is installed
#     (sandboxes get --network=none inside gVisor too);
#   - starts dockerd in the background (log: /tmp/dockerd.log) and waits up to 30 s for the socket.
# Needs root. Packages: docker.io (dockerd), optionally runsc.
set -euo pipefail

SOCK=/var/run/docker.sock
LOG=${DOCKERD_LOG:-/tmp/dockerd.log}

answers() { [ -S "$SOCK" ] && docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

has_runsc() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }

register_runsc() {
  [ -x /usr/bin/runsc ] || return 0
  mkdir -p /etc/docker
  if [ ! -s /etc/docker/daemon.json ]; then
    echo '{"runtimes":{"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=none"]}}}' > /etc/docker/daemon.json
    echo "start-dockerd: registered the runsc (gVisor) runtime in /etc/docker/daemon.json"
  elif ! grep -q '"runsc"' /etc/docker/daemon.json; then
    # Merge into an existing config without losing its other settings.
    node -e '
      const fs = require("fs"); const f = "/etc/docker/daemon.json";
      const cfg = JSON.parse(fs.readFileSync(f, "utf8"));
      cfg.runtimes = { ...(cfg.runtimes || {}), runsc: { path: "/usr/bin/runsc", runtimeArgs: ["--network=none"] } };
      fs.writeFileSync(f, JSON.stringify(cfg, null, 2) + "\n");' \
      && echo "start-dockerd: added the runsc (gVisor) runtime to /etc/docker/daemon.json"
  fi
}

if answers; then
  echo "start-dockerd: Docker engine already answers at $SOCK"
  # A running engine that does not know runsc yet: register it and reload (SIGHUP reloads runtimes).
  if [ -x /usr/bin/runsc ] && ! has_runsc; then
    register_runsc
    if [ -f /var/run/docker.pid ] && kill -HUP "$(cat /var/run/docker.pid)" 2>/dev/null; then
      for _ in $(seq 1 50); do has_runsc && break; sleep 0.1; done
      has_runsc && echo "start-dockerd: dockerd reloaded with the runsc runtime" || echo "start-dockerd: dockerd did not pick up runsc; restart it to use gVisor" >&2
    fi
  fi
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "start-dockerd: dockerd is not installed (apt-get install -y docker.io)" >&2
  exit 1
fi

register_runsc

# A stale socket or pid file from a killed daemon stops a new one from starting.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
  rm -f /var/run/docker.pid
fi
if ! pgrep -x dockerd >/dev/null 2>&1; then
  rm -f "$SOCK"
  echo "start-dockerd: starting dockerd (log: $LOG)"
  nohup dockerd >"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 300); do
  if answers; then
    echo "start-dockerd: Docker engine answers ($(docker version --format '{{.Server.Version}}'))"
    exit 0
  fi
  sleep 0.1
done
echo "start-dockerd: dockerd did not answer within 30 s; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
