import { readdirSync, readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BubblewrapSandboxProvider } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import type { Sandbox } from '../../../src/main/hands/sandbox'
import { EgressCertificateAuthority } from '../../../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor, type EgressHandle, type EgressPolicy } from '../../../src/main/vault/egress-proxy'
import { fakeDialer, fakeResolver } from '../vault/egress-helpers'
import { bwrapReq } from './support'

/*
 * What bubblewrap's sandbox keeps from the host (red-team issue #15, findings 7 and 8): its
 * environment never shows in a process list, and the hardening holds from inside a real
 * bubblewrap sandbox.
 */

const bwrap = bwrapReq()

/** Every host process's command line (NULs as spaces), with its pid. */
function hostCommandLines(): { pid: string; cmdline: string }[] {
  const out: { pid: string; cmdline: string }[] = []
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      out.push({ pid, cmdline: readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ') })
    } catch {
      // gone meanwhile
    }
  }
  return out
}

describe.skipIf(!bwrap.ok)('bubblewrap sandbox hardening', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bwrap-hard-'))
  let proxy: EgressProxy
  let provider: BubblewrapSandboxProvider
  let sandbox: Sandbox
  let handle: EgressHandle | undefined
  let n = 0
  const run = (command: string, timeout?: number) => sandbox.execute({ toolUseId: `toolu_hard_${++n}`, name: 'bash', input: { command, ...(timeout ? { timeout } : {}) } })

  beforeAll(async () => {
    proxy = new EgressProxy({ runtimeDir: join(dir, 'egress'), ca: EgressCertificateAuthority.generate(), resolver: fakeResolver({}), dialer: fakeDialer({}) })
    provider = new BubblewrapSandboxProvider({ dataDir: join(dir, 'sandboxes') })
    const sessionId = `sesn_hard_${process.pid}`
    const policy: EgressPolicy = {
      networking: { type: 'limited', allowedHosts: ['api.example.test'] },
      credentials: [{ credentialId: 'vcrd_hardening', secretName: 'API_TOKEN', hosts: ['api.example.test'], header: true, body: false, secret: async () => 'canary-hardening-secret' }],
      repositories: [],
    }
    sandbox = provider.create({
      sessionId,
      environmentId: 'env_hard',
      config: { type: 'cloud', corral: { backend: 'bubblewrap', pids: 64, memory_mb: 256 } },
      egress: { open: async () => (handle ??= await proxy.open({ sessionId, policy })), release: async () => handle?.close() },
    })
    await sandbox.provision()
  }, 60_000)

  afterAll(async () => {
    await sandbox?.dispose({ removeWorkspace: true })
    await provider?.dispose()
    await proxy?.dispose()
    rmSync(dir, { recursive: true, force: true })
  })

  it('shows neither the credential placeholder nor the proxy socket path in any host process command line while a sandbox runs', async () => {
    const placeholder = placeholderFor('vcrd_hardening')
    const pending = run('echo "token=$API_TOKEN"; sleep 1')
    await new Promise((r) => setTimeout(r, 300))
    const leaks = hostCommandLines().filter((p) => p.cmdline.includes(placeholder) || p.cmdline.includes(handle!.dir) || p.cmdline.includes(handle!.bridge.socket))
    const r = await pending
    // The sandbox does have them: they are just not in anybody's argv.
    expect(r.content).toBe(`token=${placeholder}`)
    expect(hostCommandLines().some((p) => /\bbwrap\b/.test(p.cmdline))).toBe(true)
    expect(leaks).toEqual([])
  })

  it('does not let the sandbox read a key in the session keyring of the process that starts it', async () => {
    // A desktop login's processes share a session keyring (pam_keyinit); a test worker may have
    // none. So bwrap is started through a wrapper that joins a session keyring, puts a canary key
    // in it (and reads it back: its owner can) and then runs bwrap, as a keyring-holding host would.
    const secret = `canary-key-${process.pid}`
    const wrapper = join(dir, 'bwrap-in-a-keyring')
    writeFileSync(wrapper, [
      '#!/bin/sh',
      'if [ -z "$IN_RING" ]; then IN_RING=1 exec keyctl session - "$0" "$@"; fi',
      `id=$(keyctl add user corral-canary ${secret} @s) && echo "$id" > ${dir}/key.id && keyctl print "$id" > ${dir}/host-read`,
      'exec bwrap "$@"',
    ].join('\n'), { mode: 0o755 })
    const ringProvider = new BubblewrapSandboxProvider({ dataDir: join(dir, 'ring-sandboxes'), bwrap: wrapper })
    const ringSandbox = ringProvider.create({ sessionId: `sesn_ring_${process.pid}`, environmentId: 'env_ring', config: { type: 'cloud', corral: { backend: 'bubblewrap' } } })
    try {
      const probe = await ringSandbox.execute({ toolUseId: 'toolu_ring_1', name: 'bash', input: { command: `keyctl print $(cat ${dir}/key.id 2>/dev/null || echo 0) 2>&1; keyctl show @s 2>&1; echo done` } })
      expect(readFileSync(join(dir, 'host-read'), 'utf8').trim()).toBe(secret)
      expect(probe.content).not.toContain(secret)
      expect(probe.content).toMatch(/Operation not permitted/)
    } finally {
      await ringSandbox.dispose({ removeWorkspace: true })
      await ringProvider.dispose()
    }
  })

  it('refuses keyring calls, nested user namespaces, perf_event_open, io_uring, bpf, userfaultfd, ptrace, pidfd_getfd and mount with EPERM, and clone3 with ENOSYS', async () => {
    // x86-64 numbers, from asm/unistd_64.h.
    if (process.arch !== 'x64') return
    const calls: [string, string][] = [
      ['keyctl', '250, 0, -3, 0'],
      ['add_key', '248, b"user", b"k", b"v", 1, -3'],
      ['request_key', '249, b"user", b"k", None, 0'],
      ['perf_event_open', '298, None, 0, -1, -1, 0'],
      ['io_uring_setup', '425, 1, None'],
      ['bpf', '321, 0, None, 0'],
      ['userfaultfd', '323, 0'],
      ['ptrace', '101, 0, 0, 0, 0'],
      ['pidfd_getfd', '438, 0, 0, 0'],
      ['mount', '165, b"none", b"/tmp", b"tmpfs", 0, None'],
      ['unshare(CLONE_NEWUSER)', '272, 0x10000000'],
      ['clone3', '435, None, 0'],
    ]
    const py = ['import ctypes', 'libc = ctypes.CDLL(None, use_errno=True)', ...calls.map(([name, args]) => `r = libc.syscall(${args}); print(${JSON.stringify(name)}, r, ctypes.get_errno())`)].join('\n')
    const r = await run(`python3 - <<'EOF'\n${py}\nEOF\nunshare -U true 2>&1; echo "unshare-cli $?"`)
    const got = Object.fromEntries(r.content.split('\n').filter((l) => l.includes(' ')).map((l) => [l.slice(0, l.lastIndexOf(' ', l.lastIndexOf(' ') - 1)), l.slice(l.lastIndexOf(' ', l.lastIndexOf(' ') - 1) + 1)]))
    const expected = Object.fromEntries(calls.map(([name]) => [name, name === 'clone3' ? '-1 38' : '-1 1']))
    expect(Object.fromEntries(calls.map(([name]) => [name, got[name]]))).toEqual(expected)
    expect(r.content).toMatch(/unshare: unshare failed: Operation not permitted\nunshare-cli 1/)
  })

  it('stops a fork bomb at the process limit and a memory hog at the memory limit, and the shell runs with a CPU-time limit', async () => {
    const forks = await run(`python3 - <<'EOF'
import os, sys, time
n = 0
try:
    while n < 500:
        if os.fork() == 0:
            time.sleep(2)
            os._exit(0)
        n += 1
    print('not stopped', n)
except OSError as e:
    print('stopped after', n, 'errno', e.errno)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
EOF`, 30_000)
    const stopped = /stopped after (\d+) errno (\d+)/.exec(forks.content)
    expect(stopped, forks.content).not.toBeNull()
    expect(Number(stopped![1])).toBeLessThan(64)
    expect(stopped![2]).toBe('11') // EAGAIN
    const hog = await run('python3 -c "x = bytearray(512 << 20); print(len(x))"', 30_000)
    expect(hog.isError).toBe(true)
    expect(hog.content).toContain('MemoryError')
    expect((await run('ulimit -t; ulimit -u')).content).toBe('3600\n64')
  })

  it('still runs ordinary work: bash, git, python3, node, ripgrep and the file tools', async () => {
    const r = await run([
      'set -e; mkdir -p /workspace/ordinary && cd /workspace/ordinary',
      'git init -q -b main . && echo hi > a.txt && git -c user.email=t@t -c user.name=t add . && git -c user.email=t@t -c user.name=t commit -qm one && git log --format=%s',
      'python3 -c "import json, subprocess; print(json.dumps({\'sum\': sum(range(10))}))"',
      'node -e "require(\'fs\').writeFileSync(\'n.txt\', String(6 * 7)); console.log(require(\'os\').cpus().length > 0)"',
      'rg -c hi a.txt; cat n.txt; echo',
      'sleep 0.1 & wait; echo waited',
    ].join('\n'))
    expect(r).toMatchObject({ isError: false, content: 'one\n{"sum": 45}\ntrue\n1\n42\nwaited' })
    const tool = (name: string, input: Record<string, unknown>) => sandbox.execute({ toolUseId: `toolu_hard_${++n}`, name, input })
    expect((await tool('write', { file_path: 'ordinary/w.txt', content: 'alpha\n' })).isError).toBe(false)
    expect((await tool('edit', { file_path: 'ordinary/w.txt', old_string: 'alpha', new_string: 'beta' })).isError).toBe(false)
    expect((await tool('read', { file_path: 'ordinary/w.txt' })).content).toBe('     1\tbeta')
    expect((await tool('grep', { pattern: 'beta', path: 'ordinary' })).content).toBe('/workspace/ordinary/w.txt:1:beta')
    expect((await tool('glob', { pattern: '*.txt', path: 'ordinary' })).content.split('\n').sort()).toEqual(['/workspace/ordinary/a.txt', '/workspace/ordinary/n.txt', '/workspace/ordinary/w.txt'])
  })
})
