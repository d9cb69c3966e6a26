import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Sandbox, SandboxProvider, ToolOutcome } from '../../../src/main/hands/sandbox'

/**
 * The contract every Sandbox backend passes (the way Hono's routers share one case file).
 * `docker.test.ts` and `bubblewrap.test.ts` run it against the real backend.
 */
export interface ContractHarness {
  provider: () => SandboxProvider
  /** Environment config for the sandboxes under test. */
  config: Record<string, unknown>
  /** Kills the runner of a live sandbox from the outside (the container or the bwrap process). */
  killRunner: (sandbox: Sandbox) => Promise<void>
  /** Whether anything of the session is left on the backend (containers, volumes, directories). */
  leftovers: (sessionId: string) => Promise<string[]>
}

/**
 * Writes /tmp/forged.json as a line to the runner's output: through /proc/1/fd/1 (the sandbox's
 * init holds the same stdout; a FIFO under Docker), else by taking the descriptor with
 * pidfd_getfd (a socket under bubblewrap cannot be opened through /proc). Prints how, or that
 * the sandbox allowed neither.
 */
const FORGE_PY = `import ctypes, os
data = open('/tmp/forged.json', 'rb').read()
fd = -1
try:
    fd = os.open('/proc/1/fd/1', os.O_WRONLY)
except OSError:
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        fd = libc.syscall(438, os.pidfd_open(1), 1, 0)
    except OSError:
        fd = -1
if fd >= 0:
    os.write(fd, data)
    print('forged')
else:
    print('could not forge')`

let seq = 0
const newSessionId = (prefix: string) => `sesn_${prefix}${Date.now().toString(36)}${(seq++).toString(36)}`

export function sandboxContract(name: string, h: ContractHarness): void {
  describe(`${name} sandbox contract`, () => {
    let provider: SandboxProvider
    let sandbox: Sandbox
    let sessionId: string
    let repo: string
    let n = 0
    const run = (tool: string, input: Record<string, unknown>, extra: { signal?: AbortSignal; onOutput?: (c: string, stream?: string) => void } = {}): Promise<ToolOutcome> =>
      sandbox.execute({ toolUseId: `toolu_${sessionId}_${++n}`, name: tool, input, ...extra })

    beforeAll(async () => {
      // A secret in the host's environment must not reach the sandbox.
      process.env.ANTHROPIC_API_KEY ??= 'sk-ant-test-not-a-real-key'
      provider = h.provider()
      sessionId = newSessionId('c')
      repo = mkdtempSync(join(tmpdir(), 'corral-repo-'))
      writeFileSync(join(repo, 'hello.txt'), 'from the repository\n')
      execFileSync('sh', ['-c', 'git init -q -b main . && git -c user.email=t@t -c user.name=t add . && git -c user.email=t@t -c user.name=t commit -qm first'], { cwd: repo })
      sandbox = provider.create({
        sessionId,
        environmentId: 'env_contract',
        config: h.config,
        resources: [
          { type: 'github_repository', url: repo, mount_path: 'project' },
          { type: 'file', file_id: 'file_1', content: 'uploaded bytes' },
        ],
      })
      await sandbox.provision()
    })

    afterAll(async () => {
      await sandbox?.dispose({ removeWorkspace: true })
      await provider?.dispose()
      rmSync(repo, { recursive: true, force: true })
    })

    it('places the session repository and files in the workspace at provision', async () => {
      const r = await run('bash', { command: 'cat /workspace/project/hello.txt; git -C /workspace/project log --format=%s; cat /mnt/session/uploads/file_1' })
      expect(r).toMatchObject({ isError: false, exitCode: 0 })
      expect(r.content).toBe('from the repository\nfirst\nuploaded bytes')
    })

    it('runs bash as uid 1000 in /workspace with no network but loopback', async () => {
      const r = await run('bash', { command: 'id -u; pwd; ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1' })
      const [uid, cwd, ...nets] = r.content.split('\n').map((s) => s.trim())
      expect(uid).toBe('1000')
      expect(cwd).toBe('/workspace')
      expect(nets.filter((x) => x && x !== 'lo')).toEqual([])
    })

    it('exposes none of the host\'s environment inside the sandbox', async () => {
      const r = await run('bash', { command: 'env' })
      expect(r.content).toContain('HOME=/home/corral')
      expect(r.content).not.toMatch(/ANTHROPIC|CORRAL_|DOCKER_HOST|SSH_AUTH_SOCK|DBUS_SESSION/)
      expect((await run('bash', { command: 'ls /var/run/docker.sock 2>&1; echo $?' })).content).toMatch(/No such file|2$/)
    })

    it('says a call is still running when asked to recover it mid-call', async () => {
      const id = `toolu_${sessionId}_slow`
      const pending = sandbox.execute({ toolUseId: id, name: 'bash', input: { command: 'sleep 0.5; echo slow' } })
      await new Promise((r) => setTimeout(r, 100))
      expect(await sandbox.recover!(id)).toEqual({ state: 'running' })
      expect((await pending).content).toBe('slow')
      expect(await sandbox.recover!(id)).toMatchObject({ state: 'finished', outcome: { content: 'slow' } })
    })

    it('keeps the working directory and environment between bash calls until restart', async () => {
      await run('bash', { command: 'mkdir -p sub && cd sub && export CORRAL_T=kept' })
      expect((await run('bash', { command: 'echo "$PWD $CORRAL_T"' })).content).toBe('/workspace/sub kept')
      const restarted = await run('bash', { restart: true })
      expect(restarted.isError).toBe(false)
      expect((await run('bash', { command: 'echo "$PWD [$CORRAL_T]"' })).content).toBe('/workspace []')
    })

    it('reports a failing command as an error with its exit code and output', async () => {
      const r = await run('bash', { command: 'echo oops >&2; exit 3' })
      expect(r.isError).toBe(true)
      expect(r.exitCode).toBe(3)
      expect(r.content).toContain('oops')
      expect(r.content).toContain('exit code 3')
      expect((await run('bash', { command: 'echo still here' })).content).toBe('still here')
    })

    it('tells stderr from stdout: each streamed chunk names its stream and the result names the stderr parts of its text', async () => {
      const chunks: [string, string | undefined][] = []
      const r = await run('bash', { command: 'echo to-out; ls /no-such-path-here; sleep 0.1; echo after' }, { onOutput: (c, s) => chunks.push([c, s]) })
      const lsLine = r.content.split('\n').find((l) => l.includes('/no-such-path-here'))
      expect(lsLine).toBeDefined()
      expect(r.content.split('\n').filter((l) => l !== lsLine)).toEqual(['to-out', 'after'])
      const stderrText = (r.stderr ?? []).map(([a, b]) => r.content.slice(a, b)).join('')
      expect(stderrText.replace(/\n$/, '')).toBe(lsLine)
      expect(chunks.filter(([, s]) => s === 'stderr').map(([c]) => c).join('')).toBe(`${lsLine}\n`)
      expect(chunks.filter(([, s]) => s === 'stdout').map(([c]) => c).join('')).toBe('to-out\nafter\n')
    })

    it('gives the model every line of both streams, each stream in the order it was written, however fast they interleave', async () => {
      // Two pipes keep no order between them: lines of different streams come in the order the
      // runner read them, each stream's own lines exactly in order.
      const burst = await run('bash', { command: 'for i in $(seq 1 100); do echo o$i; echo e$i >&2; done' })
      const lines = burst.content.split('\n')
      expect(lines.filter((l) => l.startsWith('o'))).toEqual(Array.from({ length: 100 }, (_, i) => `o${i + 1}`))
      expect(lines.filter((l) => l.startsWith('e'))).toEqual(Array.from({ length: 100 }, (_, i) => `e${i + 1}`))
      const tagged = (burst.stderr ?? []).map(([a, b]) => burst.content.slice(a, b)).join('\n').split('\n').filter(Boolean)
      expect(tagged).toEqual(Array.from({ length: 100 }, (_, i) => `e${i + 1}`))
    })

    it('keeps telling the streams apart after a command redirects the shell\'s own stderr and stdout with exec', async () => {
      await run('bash', { command: 'exec 2>/dev/null; exec >/dev/null; echo swallowed' })
      const r = await run('bash', { command: 'echo out; echo err >&2' })
      expect(r.content.split('\n').sort()).toEqual(['err', 'out'])
      expect((r.stderr ?? []).map(([a, b]) => r.content.slice(a, b).trim())).toEqual(['err'])
    })

    it('kills a call that outlives its timeout, and the shell keeps its state', async () => {
      await run('bash', { command: 'cd /tmp' })
      const started = Date.now()
      const r = await run('bash', { command: 'sleep 30 & sleep 30; echo never', timeout: 300 })
      expect(Date.now() - started).toBeLessThan(3000)
      expect(r.isError).toBe(true)
      expect(r.content).toContain('timed out after 300 ms')
      expect(r.content).not.toContain('never')
      expect((await run('bash', { command: 'pwd; pgrep -x sleep | wc -l' })).content).toBe('/tmp\n0')
      await run('bash', { command: 'cd /workspace' })
    })

    it('stops a call when its AbortSignal fires', async () => {
      const ctl = new AbortController()
      const p = run('bash', { command: 'sleep 20' }, { signal: ctl.signal })
      setTimeout(() => ctl.abort(), 200)
      const r = await p
      expect(r.isError).toBe(true)
      expect(r.content).toContain('interrupted')
    })

    it('streams bash output while the command runs', async () => {
      const chunks: string[] = []
      // (Corral's own `status` lines, a start in progress, are not the command's output)
      const r = await run('bash', { command: 'echo one; sleep 0.2; echo two' }, { onOutput: (c, s) => s !== 'status' && chunks.push(c) })
      expect(r.content).toBe('one\ntwo')
      expect(chunks.join('')).toBe('one\ntwo\n')
    })

    it('reads a file with line numbers and an offset and limit, and refuses a binary file', async () => {
      await run('write', { file_path: 'notes.txt', content: 'alpha\nbeta\ngamma\n' })
      expect((await run('read', { file_path: 'notes.txt' })).content).toBe('     1\talpha\n     2\tbeta\n     3\tgamma')
      expect((await run('read', { file_path: '/workspace/notes.txt', offset: 2 })).content).toBe('     2\tbeta\n     3\tgamma')
      expect((await run('read', { file_path: 'notes.txt', offset: 2, limit: 1 })).content).toBe('     2\tbeta')
      await run('bash', { command: 'head -c 300 /dev/urandom > blob.bin; printf "a\\0b" >> blob.bin' })
      const bin = await run('read', { file_path: 'blob.bin' })
      expect(bin.isError).toBe(true)
      expect(bin.content).toContain('is a binary file')
    })

    it('edits only when old_string matches exactly once, unless replace_all', async () => {
      await run('write', { file_path: 'e.txt', content: 'x = 1\nx = 1\ny = 2\n' })
      const twice = await run('edit', { file_path: 'e.txt', old_string: 'x = 1', new_string: 'x = 3' })
      expect(twice.isError).toBe(true)
      expect(twice.content).toContain('matches 2 times')
      const none = await run('edit', { file_path: 'e.txt', old_string: 'z', new_string: 'w' })
      expect(none.content).toContain('0 matches')
      expect((await run('edit', { file_path: 'e.txt', old_string: 'y = 2', new_string: 'y = 5' })).isError).toBe(false)
      expect((await run('edit', { file_path: 'e.txt', old_string: 'x = 1', new_string: 'x = 9', replace_all: true })).content).toContain('2 replacements')
      expect((await run('bash', { command: 'cat e.txt' })).content).toBe('x = 9\nx = 9\ny = 5')
    })

    it('globs newest first and greps with ripgrep', async () => {
      await run('bash', { command: 'mkdir -p g/a && echo needle > g/old.md && sleep 0.05 && echo hay > g/a/new.md' })
      expect((await run('glob', { pattern: '**/*.md', path: 'g' })).content).toBe('/workspace/g/a/new.md\n/workspace/g/old.md')
      const grep = await run('grep', { pattern: 'need+le', path: 'g' })
      expect(grep).toMatchObject({ isError: false, content: '/workspace/g/old.md:1:needle' })
      expect((await run('grep', { pattern: 'absent-word', path: 'g' })).content).toContain('no matches')
    })

    it('keeps file tools inside the workspace: ../ paths and symlinks out are refused', async () => {
      const up = await run('read', { file_path: '../etc/passwd' })
      expect(up).toMatchObject({ isError: true })
      expect(up.content).toContain('outside the workspace')
      await run('bash', { command: 'ln -sfn /etc linked-etc && ln -sf /etc/hostname linked-file' })
      for (const [tool, input] of [
        ['read', { file_path: 'linked-etc/passwd' }],
        ['write', { file_path: 'linked-etc/evil', content: 'x' }],
        ['read', { file_path: 'linked-file' }],
        ['edit', { file_path: 'linked-file', old_string: 'a', new_string: 'b' }],
        ['grep', { pattern: 'root', path: 'linked-etc' }],
        ['glob', { pattern: '*', path: 'linked-etc' }],
      ] as const) {
        const r = await run(tool, input)
        expect(r.isError, `${tool} ${JSON.stringify(input)}`).toBe(true)
        expect(r.content).toMatch(/outside the workspace|symlink/)
      }
    })

    it('caps a flood of output with a truncation marker and keeps the full output in the sandbox', async () => {
      const r = await run('bash', { command: 'seq 1 200000' })
      expect(Buffer.byteLength(r.content)).toBeLessThan(300 * 1024)
      expect(r.content.startsWith('1\n2\n3\n')).toBe(true)
      expect(r.content.endsWith('199999\n200000')).toBe(true)
      const saved = /saved in the sandbox at (\S+)/.exec(r.content)?.[1]
      expect(saved).toMatch(/^\/workspace\/\.corral\/outputs\//)
      expect((await run('bash', { command: `wc -l < ${saved}` })).content).toBe('200000')
      const yes = await run('bash', { command: 'yes', timeout: 20_000 })
      expect(yes.isError).toBe(true)
      expect(yes.content).toMatch(/output truncated/)
      expect(yes.content).toMatch(/stopped: the command wrote more than/)
    })

    it('turns NUL bytes, invalid UTF-8 and ANSI escapes into plain text', async () => {
      const r = await run('bash', { command: String.raw`printf 'a\000b \377\376 \033[31mred\033[0m \033]0;title\007end\n'` })
      expect(r.content).toBe('ab \ufffd\ufffd red end')
    })

    it('keeps each result by tool_use_id so a restarted host can collect it', async () => {
      const id = `toolu_${sessionId}_kept`
      const first = await sandbox.execute({ toolUseId: id, name: 'bash', input: { command: 'echo once >> runs.txt; echo done' } })
      expect(first.content).toBe('done')
      const recovered = await sandbox.recover!(id)
      expect(recovered).toMatchObject({ state: 'finished', outcome: { content: 'done', isError: false } })
      // The same id again is answered from the record, never run twice.
      await sandbox.execute({ toolUseId: id, name: 'bash', input: { command: 'echo once >> runs.txt; echo done' } })
      expect((await run('bash', { command: 'cat runs.txt' })).content).toBe('once')
      expect(await sandbox.recover!(`toolu_${sessionId}_never`)).toEqual({ state: 'unknown' })
    })

    // Red-team issue #15, finding 9: a command tried to write lines onto the runner's output (through
    // /proc/1/fd/1, the sandbox's init holding the same stdout, or pidfd_getfd). Both backends now
    // refuse it (Docker: a non-dumpable runner and a root init; bubblewrap: a socket and the filter);
    // where a forgery gets through, the host believes none of it (engine/runner-trust.test.ts
    // forges as root to prove that side).
    for (const [what, forged] of [
      ['an object where the text belongs', (id: string) => ({ rid: id, type: 'result', result: { content: { forged: true }, isError: false } })],
      ['is_error "yes"', (id: string) => ({ rid: id, type: 'result', result: { content: 'forged', isError: 'yes' } })],
      ['a 3 MB result past the cap', (id: string) => ({ rid: id, type: 'result', result: { content: 'x'.repeat(3 * 1024 * 1024), isError: false } })],
    ] as const) {
      it(`replaces a runner that answers a forged reply with ${what}, and serves the next call from a fresh one`, async () => {
        await run('bash', { command: 'echo old > /tmp/runner-marker' })
        const id = `toolu_${sessionId}_forged_${++n}`
        const line = JSON.stringify(forged(id))
        const r = await sandbox.execute({
          toolUseId: id,
          name: 'bash',
          input: { command: `cat > /tmp/forged.json <<'EOF'\n${line}\nEOF\npython3 - <<'EOF'\n${FORGE_PY}\nEOF\nsleep 3; echo real` },
        })
        if (r.content.startsWith('could not forge')) {
          // This backend gives a command no way to its runner's output (bubblewrap: stdout is a
          // socket and the seccomp filter refuses pidfd_getfd); the call ran as written.
          expect(r).toMatchObject({ isError: false, content: 'could not forge\nreal' })
          return
        }
        expect(r.isError, r.content.slice(0, 300)).toBe(true)
        expect(r.content).toMatch(/^bash: the sandbox's runner answered malformed data \(.+\) and was replaced; the call's outcome is lost/)
        expect(r.content).not.toContain('forged')
        const next = await run('bash', { command: 'cat /tmp/runner-marker 2>/dev/null || echo fresh' })
        expect(next).toMatchObject({ isError: false, content: 'fresh' })
      })
    }

    it('does not take a forged record in the workspace as the recovered result of a call after a host restart', async () => {
      const id = `toolu_${sessionId}_forged_record`
      const record = JSON.stringify({ content: 'forged record', isError: false })
      const wrote = await run('bash', { command: `mkdir -p /workspace/.corral/calls && printf '%s' '${record}' > /workspace/.corral/calls/${id}.json && echo ok` })
      expect(wrote.content).toBe('ok')
      // A restarted host: a new provider and sandbox for the same session, the earlier one never disposed.
      const restarted = h.provider()
      const again = restarted.create({ sessionId, environmentId: 'env_contract', config: h.config })
      try {
        expect(await again.recover!(id)).toEqual({ state: 'unknown' })
        expect((await again.execute({ toolUseId: `toolu_${sessionId}_after_restart`, name: 'bash', input: { command: 'echo after' } })).content).toBe('after')
      } finally {
        await again.dispose()
        await restarted.dispose()
      }
    })

    it('reports a runner killed mid-call within 2 s and gives the next call a fresh runner on the same workspace', async () => {
      await run('write', { file_path: 'survivor.txt', content: 'still here' })
      const pending = run('bash', { command: 'sleep 30' })
      await new Promise((r) => setTimeout(r, 300))
      const killedAt = Date.now()
      await h.killRunner(sandbox)
      const r = await pending
      expect(Date.now() - killedAt).toBeLessThan(2000)
      expect(r.isError).toBe(true)
      expect(r.content).toMatch(/during the call/)
      expect(r.content).toMatch(/exit 137|SIGKILL|signal/)
      expect((await run('read', { file_path: 'survivor.txt' })).content).toBe('     1\tstill here')
    })

    it('leaves nothing behind after dispose with removeWorkspace', async () => {
      const other = provider.create({ sessionId: newSessionId('d'), environmentId: 'env_contract', config: h.config })
      const id = (other as unknown as { params: { sessionId: string } }).params.sessionId
      expect((await other.execute({ toolUseId: 'toolu_x', name: 'write', input: { file_path: 'f', content: 'x' } })).isError).toBe(false)
      expect((await h.leftovers(id)).length).toBeGreaterThan(0)
      await other.dispose({ removeWorkspace: true })
      expect(await h.leftovers(id)).toEqual([])
    })

    it('releases a session by its id alone from a provider that never made its sandbox (a restarted host), leaving nothing behind', async () => {
      const id = newSessionId('r')
      const before = provider.create({ sessionId: id, environmentId: 'env_contract', config: h.config })
      expect((await before.execute({ toolUseId: 'toolu_r', name: 'write', input: { file_path: 'f', content: 'x' } })).isError).toBe(false)
      expect((await h.leftovers(id)).length).toBeGreaterThan(0)
      const restarted = h.provider()
      try {
        await restarted.release(id)
        await restarted.release(id, { removeWorkspace: true })
        expect(await h.leftovers(id)).toEqual([])
        await restarted.release(id, { removeWorkspace: true }) // idempotent
      } finally {
        await before.dispose()
        await restarted.dispose()
      }
      expect(await h.leftovers(id)).toEqual([])
    })
  })
}
