import type Docker from 'dockerode'
import { runnerPath } from '../paths'
import type { FolderMount } from '../folders'
import { runnerEnv, type SandboxSettings, SESSION_MOUNT, STATE_MOUNT, WORKSPACE } from '../settings'

/** The user the runner becomes inside a container (uid:gid), and the variable that tells it so. */
export const SANDBOX_USER = '1000:1000'
export const RUNNER_USER_ENV = 'CORRAL_RUNNER_USER'

/** The label every container, volume and image Corral makes carries: `corral.managed=<scope>`. */
export const MANAGED = 'corral.managed'

/** A host directory bound read-only into a sandbox at `sandboxDir`, with the env its processes get. */
export interface EgressMount {
  dir: string
  sandboxDir: string
  env?: Readonly<Record<string, string>>
}

/** The container a runner lives in, as Docker's create API wants it. */
export function containerSpec(p: {
  image: string
  settings: SandboxSettings
  volume: string
  name?: string
  labels: Record<string, string>
  bindRunner: boolean
  /** Close the runner's stdin when the attached host goes away (the runner then exits): for warm containers. */
  stdinOnce?: boolean
  /** The session's egress directory, bound read-only; the network stays `none` (the runner starts the bridge). */
  egress?: EgressMount
  /** Host folders bound in (a folder at /workspace moves the workspace volume to STATE_MOUNT). */
  folders?: readonly FolderMount[]
}): Docker.ContainerCreateOptions {
  const s = p.settings
  const folders = p.folders ?? []
  const volumeTarget = folders.some((f) => f.target === WORKSPACE) ? STATE_MOUNT : WORKSPACE
  const env = {
    ...runnerEnv(s, volumeTarget === STATE_MOUNT ? STATE_MOUNT : undefined),
    HOME: '/home/corral',
    LANG: 'C.UTF-8',
    PATH: '/usr/local/bin:/usr/bin:/bin',
    [RUNNER_USER_ENV]: SANDBOX_USER,
    ...p.egress?.env,
  }
  const tmpfs = (size: string, owned: boolean) => `rw,exec,nosuid,nodev,size=${size}${owned ? ',uid=1000,gid=1000,mode=0755' : ',mode=1777'}`
  const extraTmpfs: Record<string, string> = {}
  for (const root of s.extraRoots) if (root !== SESSION_MOUNT && root !== '/tmp') extraTmpfs[root] = tmpfs('256m', true)
  return {
    name: p.name,
    Image: p.image,
    Cmd: ['node', '/opt/corral/runner.js'],
    // Root with nothing but the right to become the sandbox user: the runner drops to uid 1000 as its
    // first act (resources/sandbox/runner.js), which leaves it non-dumpable, while the container's
    // init stays root. What the agent runs (uid 1000, started later) can then open neither the
    // runner's /proc/<pid>/{fd,mem} nor init's /proc/1/fd: it cannot write lines onto the runner's
    // output or reach into its memory (red-team issue #15, finding 9).
    User: '0:0',
    WorkingDir: WORKSPACE,
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    Labels: { [MANAGED]: '1', ...p.labels },
    OpenStdin: true,
    StdinOnce: p.stdinOnce === true,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: 'none',
      CapDrop: ['ALL'],
      CapAdd: ['SETUID', 'SETGID'],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: true,
      Init: true,
      PidsLimit: s.pids,
      Memory: s.memoryMb * 1024 * 1024,
      MemorySwap: s.memoryMb * 1024 * 1024,
      NanoCpus: Math.round(s.cpus * 1e9),
      ...(s.runtime ? { Runtime: s.runtime } : {}),
      // The runner's stdout is the protocol: nothing to keep in a log file.
      LogConfig: { Type: 'none', Config: {} },
      Mounts: [
        { Type: 'volume', Source: p.volume, Target: volumeTarget },
        // A bind follows the folder's real path (resolved by the router); symlinks inside it resolve in the container.
        ...folders.map((f) => ({ Type: 'bind' as const, Source: f.source, Target: f.target, ReadOnly: f.readOnly, BindOptions: { Propagation: 'rprivate' as const } })),
        ...(p.bindRunner ? [{ Type: 'bind' as const, Source: runnerPath(), Target: '/opt/corral/runner.js', ReadOnly: true }] : []),
        ...(p.egress ? [{ Type: 'bind' as const, Source: p.egress.dir, Target: p.egress.sandboxDir, ReadOnly: true }] : []),
      ],
      Tmpfs: { '/tmp': tmpfs('512m', false), '/home/corral': tmpfs('128m', true), [SESSION_MOUNT]: tmpfs('256m', true), ...extraTmpfs },
    },
  }
}
