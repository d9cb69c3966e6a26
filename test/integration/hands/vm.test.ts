import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { QmpClient } from '../../../src/main/hands/vm/qmp'
import type { Sandbox } from '../../../src/main/hands/sandbox'
import { VmSandboxProvider } from '../../../src/main/hands/vm/vm-sandbox'
import { bubblewrapKey } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { sandboxContract } from './sandbox.contract'
import { vmReq } from './support'

const vm = vmReq()

/**
 * The Sandbox contract on the vm backend (QEMU; TCG here). One data directory for the file, so
 * the template boots and is saved once (the first sandbox's provision) and every sandbox after it
 * is a restore; the restarted-host cases make new providers on the same directory.
 */
describe.skipIf(!vm.ok)('VmSandbox', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-vm-'))
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))
  const runDirs = (sessionId: string) => {
    try {
      return readdirSync(join(dataDir, 'run')).filter((n) => n.startsWith(`${bubblewrapKey(sessionId)}-`))
    } catch {
      return []
    }
  }
  const config = { type: 'cloud', networking: { type: 'limited' }, corral: { backend: 'vm', pool_size: 0, memory_mb: 512, cpus: 1 } }
  sandboxContract('vm', {
    provider: () => new VmSandboxProvider({ dataDir }),
    config,
    killRunner: async (sandbox: Sandbox) => {
      const live = (sandbox as unknown as { live?: { vm: { child: { kill: (s: string) => void } } } }).live
      if (!live) throw new Error('no live VM')
      live.vm.child.kill('SIGKILL')
    },
    leftovers: async (sessionId) => {
      const ws = join(dataDir, 'workspaces', bubblewrapKey(sessionId))
      return [...(existsSync(ws) ? [`workspace ${ws}`] : []), ...runDirs(sessionId).map((d) => `VM run directory ${d}`)]
    },
  })

  describe('vm backend', () => {
    let seq = 0
    const sessionId = () => `sesn_vm${Date.now().toString(36)}${(seq++).toString(36)}`
    const live = (sandbox: Sandbox) => (sandbox as unknown as { live?: { vm: { runDir: string } } }).live?.vm
    const bash = (sandbox: Sandbox, command: string) => sandbox.execute({ toolUseId: `toolu_${Math.random().toString(36).slice(2)}`, name: 'bash', input: { command } })
    /** After a killed VM: the next call is answered by a fresh VM (a new run directory, the old one gone) on the kept workspace. */
    const expectReplacedKeepingWorkspace = async (sandbox: Sandbox, first: { runDir: string }) => {
      const next = await sandbox.execute({ toolUseId: 'toolu_after', name: 'read', input: { file_path: 'kept.txt' } })
      expect(next).toMatchObject({ isError: false, content: '     1\tkept' })
      expect(live(sandbox)!.runDir).not.toBe(first.runDir)
      expect(existsSync(first.runDir)).toBe(false)
    }

    it('sets a restored guest\'s clock from the host, however old its template\'s saved state', async () => {
      const provider = new VmSandboxProvider({ dataDir })
      const sandbox = provider.create({ sessionId: sessionId(), environmentId: 'env_vm', config })
      try {
        await sandbox.provision()
        const states = readdirSync(join(dataDir, 'templates')).filter((f) => f.endsWith('.state'))
        expect(states).toHaveLength(1)
        const age = Date.now() - statSync(join(dataDir, 'templates', states[0]!)).mtimeMs
        // Only meaningful when the saved clock is behind: the contract above ran for a while.
        expect(age).toBeGreaterThan(5000)
        const before = Date.now()
        const r = await bash(sandbox, 'date +%s%3N')
        const guest = Number(r.content)
        expect(guest).toBeGreaterThan(before - 2000)
        expect(guest).toBeLessThan(Date.now() + 2000)
      } finally {
        await sandbox.dispose({ removeWorkspace: true })
        await provider.dispose()
      }
    })

    it("tells a new sandbox's first call, in its live output, that a VM is starting and, under software emulation, why it is slow", async () => {
      const provider = new VmSandboxProvider({ dataDir })
      const sandbox = provider.create({ sessionId: sessionId(), environmentId: 'env_vm', config })
      const lines: string[] = []
      try {
        const r = await sandbox.execute({ toolUseId: 'toolu_notes', name: 'bash', input: { command: 'echo hi' }, onOutput: (chunk, stream) => lines.push(`${stream}: ${chunk}`) })
        expect(r).toMatchObject({ isError: false, content: 'hi' })
        const notes = lines.filter((l) => l.startsWith('status: [corral] '))
        const accel = await (provider as unknown as { accel: () => Promise<string> }).accel()
        // (under KVM a restore takes less than the 0.3 s after which a start is shown)
        if (accel === 'kvm' && notes.length === 0) return
        expect(notes[0]).toBe('status: [corral] starting a QEMU virtual machine for this session…\n')
        if (accel === 'tcg') {
          expect(notes[1]).toMatch(/^status: \[corral\] no usable KVM on this machine: the VM runs under software emulation \(TCG\)/)
          // the template was saved by the tests above: this sandbox is a restore of it
          expect(notes[2]).toBe('status: [corral] restoring the VM from its template\n')
        }
        expect(notes.at(-1)).toMatch(/^status: \[corral\] the sandbox is ready \(\d+\.\d s\)\n$/)
        // the notes are the call's live output only: its result is the command's
        expect(r.content).not.toContain('[corral]')
      } finally {
        await sandbox.dispose({ removeWorkspace: true })
        await provider.dispose()
      }
    }, 120_000)

    it('kills a hung guest, reports its call as a tool error, and restores a fresh VM on the same workspace', async () => {
      const provider = new VmSandboxProvider({ dataDir, hangTimeoutMs: 1500 })
      const sandbox = provider.create({ sessionId: sessionId(), environmentId: 'env_vm', config })
      try {
        expect((await sandbox.execute({ toolUseId: 'toolu_keep', name: 'write', input: { file_path: 'kept.txt', content: 'kept' } })).isError).toBe(false)
        const first = live(sandbox)!
        const pending = bash(sandbox, 'sleep 20; echo never')
        await new Promise((r) => setTimeout(r, 300))
        // A hung guest: its vCPU stops (QMP stop), nothing in it answers any more.
        const qmp = await QmpClient.connect(join(first.runDir, 'qmp.sock'))
        await qmp.execute('stop')
        qmp.dispose()
        const stoppedAt = Date.now()
        const r = await pending
        const killedAt = Date.now()
        expect(r.isError).toBe(true)
        expect(r.content).toMatch(/^bash: the VM stopped answering \(no heartbeat within 1500 ms: a hung guest\) and was killed \(SIGKILL\) during the call; its outcome is lost/)
        expect(killedAt - stoppedAt).toBeLessThan(4000)
        // The replacement (started at the kill): a restore of the template, its shares mounted, its
        // runner answering. A generous bound: its speed is the bench's (vm.hung_guest_replaced).
        await sandbox.provision()
        expect(Date.now() - killedAt).toBeLessThan(15_000)
        await expectReplacedKeepingWorkspace(sandbox, first)
      } finally {
        await sandbox.dispose({ removeWorkspace: true })
        await provider.dispose()
      }
    }, 240_000)

    it('kills a VM whose runner its own shell stopped (kill -STOP), reports the call as a tool error, keeps the workspace and answers the next call from a fresh VM', async () => {
      const provider = new VmSandboxProvider({ dataDir })
      const sandbox = provider.create({ sessionId: sessionId(), environmentId: 'env_vm', config })
      try {
        expect((await sandbox.execute({ toolUseId: 'toolu_keep', name: 'write', input: { file_path: 'kept.txt', content: 'kept' } })).isError).toBe(false)
        const first = live(sandbox)!
        // The agent's shell is the runner's child and runs as the runner's user: it can stop it.
        const sent = Date.now()
        const r = await bash(sandbox, 'kill -STOP $PPID; sleep 30; echo never')
        expect(r.isError).toBe(true)
        expect(r.content).toMatch(/^bash: its runner stopped answering: the runner \(pid \d+\) is stopped and was killed \(SIGKILL\) during the call; its outcome is lost/)
        // Found by the next heartbeat (every 500 ms), not by the command's 30 s.
        expect(Date.now() - sent).toBeLessThan(15_000)
        await sandbox.provision()
        await expectReplacedKeepingWorkspace(sandbox, first)
      } finally {
        await sandbox.dispose({ removeWorkspace: true })
        await provider.dispose()
      }
    }, 120_000)

    it('mounts a host folder at a guest path with a space and a comma in it', async () => {
      const folder = mkdtempSync(join(tmpdir(), 'corral-vm-folder-'))
      chmodSync(folder, 0o755)
      writeFileSync(join(folder, 'f.txt'), 'from the host\n', { mode: 0o644 })
      const provider = new VmSandboxProvider({ dataDir })
      const sandbox = provider.create({ sessionId: sessionId(), environmentId: 'env_vm', config, folders: [{ index: 0, source: folder, target: '/workspace/my dir,2', readOnly: true }] })
      try {
        const r = await bash(sandbox, 'cat "/workspace/my dir,2/f.txt"; ls /workspace')
        expect(r).toMatchObject({ isError: false, content: 'from the host\nmy dir,2' })
      } finally {
        await sandbox.dispose({ removeWorkspace: true })
        await provider.dispose()
        rmSync(folder, { recursive: true, force: true })
      }
    })

    it('serves a new session\'s first call from a warm VM, hands it the session\'s own workspace, and refills the pool', async () => {
      const warmConfig = { ...config, corral: { ...config.corral, pool_size: 1 } }
      const provider = new VmSandboxProvider({ dataDir })
      const id = sessionId()
      const sandbox = provider.create({ sessionId: id, environmentId: 'env_vm', config: warmConfig })
      try {
        expect(await provider.warm({ config: warmConfig })).toBe(1)
        const warmDirs = readdirSync(join(dataDir, 'run')).filter((n) => n.startsWith('pool-'))
        expect(warmDirs).toHaveLength(1)
        const r = await bash(sandbox, 'echo from-warm > /workspace/w.txt; cat /workspace/w.txt')
        expect(r).toMatchObject({ isError: false, content: 'from-warm' })
        // The warm VM became the session's: its run directory, and the workspace on the host.
        expect(live(sandbox)!.runDir).toBe(join(dataDir, 'run', warmDirs[0]!))
        expect(readFileSync(join(dataDir, 'workspaces', bubblewrapKey(id), 'w.txt'), 'utf8')).toBe('from-warm\n')
        expect(await provider.warm({ config: warmConfig })).toBe(1)
        expect(readdirSync(join(dataDir, 'run')).filter((n) => n.startsWith('pool-') && n !== warmDirs[0])).toHaveLength(1)
        // release() by id from another provider finds the claimed VM by its session file.
        const other = new VmSandboxProvider({ dataDir })
        await other.release(id, { removeWorkspace: true })
        await other.dispose()
        expect(existsSync(join(dataDir, 'run', warmDirs[0]!))).toBe(false)
      } finally {
        await sandbox.dispose({ removeWorkspace: true })
        await provider.dispose()
      }
      expect(readdirSync(join(dataDir, 'run')).filter((n) => n.startsWith('pool-'))).toEqual([])
    })
  })
})
