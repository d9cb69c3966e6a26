import { describe, expect, it } from 'vitest'
import { RunnerSandbox, START_NOTE_AFTER_MS, type LiveRunner, type RunnerDeath } from '../../../src/main/hands/runner/runner-sandbox'
import type { RunnerConnection } from '../../../src/main/hands/runner/connection'
import type { SandboxProvisionParams, ToolOutcome } from '../../../src/main/hands/sandbox'
import { sandboxSettings } from '../../../src/main/hands/settings'

// A sandbox's first call waits for its start: when that takes a while (a VM under software
// emulation, a template's cold boot), the call's live output says what is being started, each
// step the backend reports, and when it was ready, instead of a silent "Running".

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A backend whose start takes `startMs` and reports `steps` on its way; its runner answers every call with 'ok'. */
class SlowStartSandbox extends RunnerSandbox<LiveRunner> {
  readonly backend = 'fake'
  starts = 0
  constructor(
    private readonly startMs: number,
    private readonly stepLines: string[] = [],
  ) {
    super({ sessionId: 'sesn_test', environmentId: 'env_test', config: {} } as SandboxProvisionParams, sandboxSettings({}))
  }
  protected override describeStart(): string {
    return 'a fake machine'
  }
  protected async start(): Promise<LiveRunner> {
    this.starts++
    for (const line of this.stepLines) {
      await sleep(this.startMs / (this.stepLines.length + 1))
      this.startStep(line)
    }
    await sleep(this.startMs / (this.stepLines.length + 1))
    const connection = { open: true, call: async (): Promise<ToolOutcome> => ({ content: 'ok', isError: false }), close: () => {} } as unknown as RunnerConnection
    return { connection, fresh: false }
  }
  protected async diagnose(): Promise<RunnerDeath> {
    return { message: 'gone' }
  }
  protected async stop(): Promise<void> {}
  protected async discardRunner(): Promise<void> {}
}

function collect(): { lines: string[]; onOutput: (chunk: string, stream?: string) => void } {
  const lines: string[] = []
  return { lines, onOutput: (chunk, stream) => lines.push(`${stream}: ${chunk}`) }
}

describe('a call waiting for its sandbox to start', () => {
  it("is told what is starting, each step, and when it is ready, as lines of its live output on Corral's status stream (never the command's)", async () => {
    const sandbox = new SlowStartSandbox(START_NOTE_AFTER_MS * 3, ['booting the template (once)'])
    const first = collect()
    const r = await sandbox.execute({ toolUseId: 'toolu_1', name: 'bash', input: { command: 'true' }, onOutput: first.onOutput })
    expect(r).toEqual({ content: 'ok', isError: false })
    expect(first.lines[0]).toBe('status: [corral] starting a fake machine for this session…\n')
    expect(first.lines).toContain('status: [corral] booting the template (once)\n')
    expect(first.lines.at(-1)).toMatch(/^status: \[corral\] the sandbox is ready \(\d+\.\d s\)\n$/)
    expect(first.lines).toHaveLength(3)

    // a later call finds the sandbox live: nothing is added to its output
    const second = collect()
    await sandbox.execute({ toolUseId: 'toolu_2', name: 'bash', input: { command: 'true' }, onOutput: second.onOutput })
    expect(second.lines).toEqual([])
    expect(sandbox.starts).toBe(1)
  })

  it('says nothing for a start quicker than the threshold', async () => {
    const sandbox = new SlowStartSandbox(10, ['a quick step'])
    const out = collect()
    await sandbox.execute({ toolUseId: 'toolu_1', name: 'bash', input: { command: 'true' }, onOutput: out.onOutput })
    expect(out.lines).toEqual([])
  })

  it('shows a call that begins waiting in the middle of a start the steps reported before it', async () => {
    const sandbox = new SlowStartSandbox(START_NOTE_AFTER_MS * 4, ['step one', 'step two', 'step three'])
    const a = collect()
    const first = sandbox.execute({ toolUseId: 'toolu_1', name: 'bash', input: {}, onOutput: a.onOutput })
    await sleep(START_NOTE_AFTER_MS * 2 + 50)
    const b = collect()
    await Promise.all([first, sandbox.execute({ toolUseId: 'toolu_2', name: 'read', input: {}, onOutput: b.onOutput })])
    const steps = (lines: string[]) => lines.filter((l) => l.includes('step '))
    expect(steps(a.lines)).toEqual(['status: [corral] step one\n', 'status: [corral] step two\n', 'status: [corral] step three\n'])
    expect(steps(b.lines)).toEqual(steps(a.lines))
    expect(b.lines[0]).toBe('status: [corral] starting a fake machine for this session…\n')
    expect(sandbox.starts).toBe(1)
  })
})
