/**
 * The hands: how fast a sandbox is ready and how much a tool call costs.
 *   cold provision → first command (Docker, no pool), warm-pool hit, `bash true` through the
 *   runner vs a `docker exec` on the same container (same run), gVisor, bubblewrap per call, and
 *   the vm backend (cold boot, snapshot restore → first command, a hung guest and a stopped runner
 *   detected and replaced, `bash true`, 100 small files). CORRAL_BENCH_HANDS=vm: only those rows.
 * Targets (issue #4): cold p50 ≤ 400 ms, pool hit ≤ 20 ms, runner p50 ≤ 5 ms with ≥ 10× over
 * docker exec, bubblewrap ≤ 20 ms per call. Runs in well under two minutes.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import Docker from 'dockerode'
import { BubblewrapSandboxProvider } from '../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { DockerSandboxProvider } from '../src/main/hands/docker/provider'
import { QmpClient } from '../src/main/hands/vm/qmp'
import { VmSandboxProvider } from '../src/main/hands/vm/vm-sandbox'
import type { Sandbox } from '../src/main/hands/sandbox'
import { summary } from './stats'

const execFileP = promisify(execFile)
let seq = 0
const sid = (p: string) => `sesn_bench${p}${Date.now().toString(36)}${(seq++).toString(36)}`
const ms = (t0: number) => performance.now() - t0

async function bashTrue(sandbox: Sandbox, n: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const r = await sandbox.execute({ toolUseId: `toolu_b${seq++}`, name: 'bash', input: { command: 'true' } })
    out.push(ms(t0))
    if (r.isError) throw new Error(`bash true failed: ${r.content}`)
  }
  return out
}

async function dockerBench(log: (m: string) => void): Promise<Record<string, unknown>> {
  const docker = new Docker()
  const provider = new DockerSandboxProvider({ docker })
  const base = { type: 'cloud', corral: { pool_size: 0, memory_mb: 512, pids: 256, cpus: 1 } }
  try {
    const available = await provider.available()
    if (!available.ok) return { skipped: available.reason }

    log('cold provision → first command (12 sessions, no pool)')
    const cold: number[] = []
    for (let i = 0; i < 12; i++) {
      const t0 = performance.now()
      const s = provider.create({ sessionId: sid('c'), environmentId: 'env_bench_cold', config: base })
      const r = await s.execute({ toolUseId: 'toolu_first', name: 'bash', input: { command: 'true' } })
      cold.push(ms(t0))
      if (r.isError) throw new Error(r.content)
      await s.dispose({ removeWorkspace: true })
    }

    log('warm-pool hits (8 sessions, pool of 1, refilled between hits)')
    const poolCfg = { type: 'cloud', corral: { ...base.corral, pool_size: 1 } }
    const hits: number[] = []
    const hitToFirst: number[] = []
    for (let i = 0; i < 8; i++) {
      await provider.warm({ environmentId: 'env_bench_pool', config: poolCfg })
      const s = provider.create({ sessionId: sid('p'), environmentId: 'env_bench_pool', config: poolCfg })
      const t0 = performance.now()
      await s.provision()
      hits.push(ms(t0))
      await s.execute({ toolUseId: 'toolu_first', name: 'bash', input: { command: 'true' } })
      hitToFirst.push(ms(t0))
      await s.dispose({ removeWorkspace: true })
    }

    log('`bash true` through the runner (300 calls) vs docker exec (30 calls), same container')
    const s = provider.create({ sessionId: sid('r'), environmentId: 'env_bench_rt', config: base })
    await s.provision()
    await bashTrue(s, 20)
    const runner = await bashTrue(s, 300)
    const container = (s as unknown as { live: { container: Docker.Container } }).live.container
    const exec: number[] = []
    for (let i = 0; i < 30; i++) {
      const t0 = performance.now()
      const e = await container.exec({ Cmd: ['bash', '-c', 'true'], AttachStdout: true, AttachStderr: true })
      const stream = await e.start({ hijack: true, stdin: false })
      await new Promise((resolve) => {
        stream.on('end', resolve)
        stream.resume()
      })
      exec.push(ms(t0))
    }
    await s.dispose({ removeWorkspace: true })
    const runnerS = summary(runner)
    const execS = summary(exec)

    let gvisor: Record<string, unknown> = { skipped: 'runsc is not registered with dockerd' }
    if ((await provider.runtimes()).includes('runsc')) {
      log('gVisor (runsc): cold provision → first command (4) and `bash true` (100)')
      const cfg = { type: 'cloud', corral: { ...base.corral, runtime: 'runsc' } }
      const gcold: number[] = []
      let rt: number[] = []
      for (let i = 0; i < 4; i++) {
        const t0 = performance.now()
        const g = provider.create({ sessionId: sid('g'), environmentId: 'env_bench_gv', config: cfg })
        await g.execute({ toolUseId: 'toolu_first', name: 'bash', input: { command: 'true' } })
        gcold.push(ms(t0))
        if (i === 0) rt = await bashTrue(g, 100)
        await g.dispose({ removeWorkspace: true })
      }
      gvisor = { cold_provision_to_first_command: summary(gcold), bash_true_roundtrip: summary(rt) }
    }

    return {
      cold_provision_to_first_command: summary(cold),
      warm_pool_hit_provision: summary(hits),
      warm_pool_hit_to_first_command: summary(hitToFirst),
      bash_true_roundtrip_runner: runnerS,
      bash_true_docker_exec: execS,
      runner_vs_exec_ratio_p50: Math.round((execS.p50_ms / runnerS.p50_ms) * 10) / 10,
      gvisor,
      targets: { cold_p50_le_400ms: summary(cold).p50_ms <= 400, pool_hit_le_20ms: summary(hits).p50_ms <= 20, runner_p50_le_5ms: runnerS.p50_ms <= 5, ratio_ge_10x: execS.p50_ms / runnerS.p50_ms >= 10 },
    }
  } finally {
    await provider.dispose()
  }
}

async function bubblewrapBench(log: (m: string) => void): Promise<Record<string, unknown>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-bench-bwrap-'))
  const provider = new BubblewrapSandboxProvider({ dataDir })
  try {
    const available = await provider.available()
    if (!available.ok) return { skipped: available.reason }
    log('bubblewrap: start → first command (8), `bash true` per call (300), one bwrap process per command (30)')
    const cold: number[] = []
    for (let i = 0; i < 8; i++) {
      const t0 = performance.now()
      const s = provider.create({ sessionId: sid('w'), environmentId: 'env_bench_bw', config: { type: 'cloud' } })
      await s.execute({ toolUseId: 'toolu_first', name: 'bash', input: { command: 'true' } })
      cold.push(ms(t0))
      await s.dispose({ removeWorkspace: true })
    }
    const s = provider.create({ sessionId: sid('w'), environmentId: 'env_bench_bw', config: { type: 'cloud' } })
    await bashTrue(s, 20)
    const perCall = await bashTrue(s, 300)
    await s.dispose({ removeWorkspace: true })
    const spawnEach: number[] = []
    for (let i = 0; i < 30; i++) {
      const t0 = performance.now()
      await execFileP('bwrap', ['--unshare-all', '--uid', '1000', '--gid', '1000', '--cap-drop', 'ALL', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', 'bash', '-c', 'true'])
      spawnEach.push(ms(t0))
    }
    return { start_to_first_command: summary(cold), bash_true_per_call_runner: summary(perCall), bwrap_process_per_command: summary(spawnEach), targets: { per_call_le_20ms: summary(perCall).p50_ms <= 20 } }
  } finally {
    await provider.dispose()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/**
 * The vm backend (QEMU; TCG here): the first sandbox of a fresh data directory (the template's
 * cold boot and save, then its restore), later sandboxes (a restore each, no pool), `bash true`
 * per call, and 100 small files written by one bash call and by 100 write calls, on the 9p workspace.
 */
async function vmBench(log: (m: string) => void): Promise<Record<string, unknown>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-bench-vm-'))
  const provider = new VmSandboxProvider({ dataDir })
  const config = { type: 'cloud', corral: { pool_size: 0, memory_mb: 512, cpus: 1 } }
  try {
    const available = await provider.available()
    if (!available.ok) return { skipped: available.reason }
    const loadStart = Math.round(loadavg()[0]! * 100) / 100
    log('vm: cold boot (template boot + save + restore) → first command')
    let t0 = performance.now()
    const first = provider.create({ sessionId: sid('v'), environmentId: 'env_bench_vm', config })
    const r = await first.execute({ toolUseId: 'toolu_first', name: 'bash', input: { command: 'true' } })
    const cold = ms(t0)
    if (r.isError) throw new Error(r.content)
    await first.dispose({ removeWorkspace: true })
    log('vm: snapshot restore → first command (5 sessions)')
    const restore: number[] = []
    for (let i = 0; i < 5; i++) {
      t0 = performance.now()
      const s = provider.create({ sessionId: sid('v'), environmentId: 'env_bench_vm', config })
      const x = await s.execute({ toolUseId: 'toolu_first', name: 'bash', input: { command: 'true' } })
      restore.push(ms(t0))
      if (x.isError) throw new Error(x.content)
      await s.dispose({ removeWorkspace: true })
    }
    log('vm: a hung guest (QMP stop during a call) and a stopped runner (kill -STOP from its shell), 3 each: detection, replacement')
    const hung = { detected: [] as number[], replaced: [] as number[], total: [] as number[] }
    const stopped = { detected: [] as number[], replaced: [] as number[], total: [] as number[] }
    for (const [kind, into] of [['guest', hung], ['runner', stopped]] as const) {
      for (let i = 0; i < 3; i++) {
        const h = provider.create({ sessionId: sid('v'), environmentId: 'env_bench_vm', config })
        const w = await h.execute({ toolUseId: `toolu_w${seq++}`, name: 'write', input: { file_path: 'kept.txt', content: 'kept' } })
        if (w.isError) throw new Error(w.content)
        let hungAt: number
        let pending: Promise<{ isError: boolean; content: string }>
        if (kind === 'guest') {
          const runDir = (h as unknown as { live: { vm: { runDir: string } } }).live.vm.runDir
          pending = h.execute({ toolUseId: `toolu_h${seq++}`, name: 'bash', input: { command: 'sleep 60' } })
          await new Promise((r) => setTimeout(r, 300))
          const qmp = await QmpClient.connect(join(runDir, 'qmp.sock'))
          hungAt = performance.now()
          await qmp.execute('stop')
          qmp.dispose()
        } else {
          // The stop is the command's first act: the hang starts about when the call was sent.
          hungAt = performance.now()
          pending = h.execute({ toolUseId: `toolu_h${seq++}`, name: 'bash', input: { command: 'kill -STOP $PPID; sleep 60' } })
        }
        const r = await pending
        const errorAt = performance.now()
        if (!r.isError) throw new Error(`the hung call was not a tool error: ${r.content}`)
        const next = await h.execute({ toolUseId: `toolu_n${seq++}`, name: 'read', input: { file_path: 'kept.txt' } })
        if (next.isError || !next.content.includes('kept')) throw new Error(`the replacement did not answer with the workspace: ${next.content}`)
        into.detected.push(errorAt - hungAt)
        into.replaced.push(ms(errorAt))
        into.total.push(ms(hungAt))
        await h.dispose({ removeWorkspace: true })
      }
    }
    log('vm: `bash true` (100), 100 files in one bash call (5), 100 write calls (1 × 100)')
    const s = provider.create({ sessionId: sid('v'), environmentId: 'env_bench_vm', config })
    await bashTrue(s, 5)
    const rt = await bashTrue(s, 100)
    const batch: number[] = []
    for (let i = 0; i < 5; i++) {
      t0 = performance.now()
      const w = await s.execute({ toolUseId: `toolu_w${seq++}`, name: 'bash', input: { command: `mkdir -p b${i} && for n in $(seq 100); do printf '%1024s' x > b${i}/f$n; done` } })
      batch.push(ms(t0))
      if (w.isError) throw new Error(w.content)
    }
    const writes: number[] = []
    for (let i = 0; i < 100; i++) {
      t0 = performance.now()
      const w = await s.execute({ toolUseId: `toolu_w${seq++}`, name: 'write', input: { file_path: `w/f${i}`, content: 'x'.repeat(1024) } })
      writes.push(ms(t0))
      if (w.isError) throw new Error(w.content)
    }
    await s.dispose({ removeWorkspace: true })
    return {
      accelerator: (await provider.guarantees()).accelerator,
      load_average_1m: { start: loadStart, end: Math.round(loadavg()[0]! * 100) / 100 },
      cold_boot_to_first_command_ms: Math.round(cold),
      snapshot_restore_to_first_command: summary(restore),
      hung_guest_detected: summary(hung.detected),
      hung_guest_replaced: summary(hung.replaced),
      hung_guest_total: summary(hung.total),
      stopped_runner_detected: summary(stopped.detected),
      stopped_runner_replaced: summary(stopped.replaced),
      definitions: {
        snapshot_restore_to_first_command: 'a new session (no pool) → provider.create + its first `bash true` answered: qemu -incoming on the template state, the runner\'s hello, the start line (clock + 9p mounts), the shell\'s cd into the workspace, the call',
        hung_guest_detected: 'QMP stop of the guest during a `sleep 60` call (nothing in it answers any more) → the call\'s tool error: the heartbeat (a ping every hangTimeoutMs / 4 = 500 ms, hung when unanswered for hangTimeoutMs = 2000 ms) and the SIGKILL',
        hung_guest_replaced: 'the hung call\'s tool error → the replacement VM\'s first reply (a read of a file written before the hang): the replacement restore starts at the kill',
        hung_guest_total: 'QMP stop → the replacement\'s first reply (detected + replaced)',
        stopped_runner_detected: 'a `kill -STOP $PPID; sleep 60` call sent (the agent\'s shell stops the runner) → its tool error: the next ping reports the runner stopped (state T in /proc)',
        stopped_runner_replaced: 'that tool error → the replacement VM\'s first reply (a read of the file written before)',
      },
      bash_true_roundtrip: summary(rt),
      hundred_1kib_files_one_bash_call: summary(batch),
      write_call_1kib: summary(writes),
    }
  } finally {
    await provider.dispose()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** CORRAL_BENCH_HANDS=vm (or docker,bubblewrap,…) runs only those backends' rows; default all. */
export async function run(log: (message: string) => void): Promise<Record<string, unknown>> {
  const only = process.env.CORRAL_BENCH_HANDS?.split(',').map((s) => s.trim())
  const want = (name: string) => !only || only.includes(name)
  const out: Record<string, unknown> = {}
  if (want('docker')) out.docker = await dockerBench(log).catch((err: Error) => ({ error: err.message }))
  if (want('bubblewrap')) out.bubblewrap = await bubblewrapBench(log).catch((err: Error) => ({ error: err.message }))
  if (want('vm')) out.vm = await vmBench(log).catch((err: Error) => ({ error: err.message }))
  return out
}
