import { describe, expect, it } from 'vitest'
import { bwrapArgs } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { describeHardening } from '../../../src/main/hands/bubblewrap/hardening'
import { sandboxSettings } from '../../../src/main/hands/settings'

describe('bubblewrap hardening as doctor reports it and bwrap gets it', () => {
  const full = { seccomp: 'x86_64' as const, disableUserns: true, keyctl: '/usr/bin/keyctl', prlimit: '/usr/bin/prlimit' }

  it('says everything is in force on a host that offers it all', () => {
    const d = describeHardening(full, { pids: 64, memoryMb: 256, cgroup: ['pids', 'memory'], root: false })
    expect(d.seccomp).toMatch(/^filter in force \(x86_64;/)
    expect(d.user_namespaces).toBe('nested user namespaces disabled (--disable-userns)')
    expect(d.keyring).toBe('a fresh anonymous session keyring (keyctl session); keyring calls refused')
    expect(d.limits).toBe('a cgroup of its own: 64 processes, 256 MiB memory for the whole sandbox; per process: 256 MiB data, 3600 s CPU (shell), 64 processes, no core dumps; no CPU share')
  })

  it('names what is missing: no filter, nested namespaces, a reachable keyring, an unenforced process limit', () => {
    const d = describeHardening({ disableUserns: false, prlimit: '/usr/bin/prlimit' }, { pids: 64, memoryMb: 256, cgroup: [], root: true })
    expect(d.seccomp).toMatch(/^no filter/)
    expect(d.user_namespaces).toMatch(/^nested user namespaces possible/)
    expect(d.keyring).toBe('the host session keyring is reachable: install keyutils')
    expect(d.limits).toContain('64 processes (not enforced by the kernel while Corral runs as root)')
    expect(describeHardening({ disableUserns: false }, { pids: 1, memoryMb: 1, cgroup: [], root: false }).limits).toMatch(/^none/)
  })

  it('passes the filter descriptor, --disable-userns and prlimit with the environment\'s limits to bwrap', () => {
    const settings = sandboxSettings({ corral: { pids: 64, memory_mb: 256 } })
    const args = bwrapArgs({ sessionDir: '/data/s', settings, runner: '/r/runner.js', hardening: { ...full, seccompFd: 4 } })
    const line = args.join(' ')
    expect(line).toContain('--unshare-user --disable-userns')
    expect(line).toContain('--seccomp 4')
    expect(line).toContain('--setenv CORRAL_CPU_SECONDS 3600')
    expect(args.slice(-7)).toEqual(['/usr/bin/prlimit', '--nproc=64', `--data=${256 * 1024 * 1024}`, '--core=0', '--', '/usr/bin/node', '/opt/corral/runner.js'])
    expect(bwrapArgs({ sessionDir: '/data/s', settings, runner: '/r/runner.js' }).join(' ')).not.toMatch(/--seccomp|prlimit|--disable-userns/)
  })
})
