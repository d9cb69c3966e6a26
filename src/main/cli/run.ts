import { upgradeProgressLines } from '../session/stores'
import type { Command } from 'commander'
import { createInterface } from 'node:readline/promises'
import { resolveDataDir } from '../config'
import { Engine } from '../engine'
import type { LoggedEvent } from '../session/event-log'
import { CorralError } from '../../shared/errors'

export const DEFAULT_AGENT_NAME = 'corral-default'
export const DEFAULT_ENVIRONMENT_NAME = 'corral-default'

export interface RunTaskParams {
  engine: Engine
  task: string
  agentId?: string
  environmentId?: string
  /** Model for the default agent when it has to be created. */
  model?: string
  /** Where the transcript goes. */
  out: { write(s: string): unknown }
  /** Asks the person a question and resolves with the answer (readline in the CLI). */
  ask: (question: string) => Promise<string>
  /** Answer every confirmation with allow without asking. */
  autoApprove?: boolean
}

export interface RunTaskResult {
  sessionId: string
  stopReason: string
}

/** The default agent and environment, created on first use. */
export function ensureDefaults(engine: Engine, model?: string): { agentId: string; environmentId: string } {
  const s = engine.services
  let agent = s.agents.list({ limit: 100 } as never).data.find((a) => a.name === DEFAULT_AGENT_NAME && !a.archived_at)
  if (!agent) {
    agent = s.agents.create({
      name: DEFAULT_AGENT_NAME,
      model: model ?? engine.settings.model?.defaultModel ?? 'claude-sonnet-5-5',
      system: 'You are a careful software engineer working in a sandboxed workspace. Use the tools to inspect before you change anything.',
      tools: [
        {
          type: 'agent_toolset_20260401',
          default_config: { permission_policy: { type: 'always_ask' } },
          configs: ['read', 'glob', 'grep'].map((name) => ({ name: name as 'read', permission_policy: { type: 'always_allow' as const } })),
        },
      ],
    })
  }
  let env = s.environments.list({ limit: 100 } as never).data.find((e) => e.name === DEFAULT_ENVIRONMENT_NAME && !e.archived_at)
  if (!env) env = s.environments.create({ name: DEFAULT_ENVIRONMENT_NAME, config: { type: 'cloud' } })
  return { agentId: agent.id, environmentId: env.id }
}

/**
 * Starts a session on an agent and environment with `task` as its first message, prints its
 * events as they happen (model text streamed from previews), asks for confirmations and custom
 * tool results, and resolves when the session idles for good (end_turn, retries_exhausted,
 * budget_reached, refusal).
 */
export async function runTask(p: RunTaskParams): Promise<RunTaskResult> {
  const s = p.engine.services
  const defaults = p.agentId && p.environmentId ? undefined : ensureDefaults(p.engine, p.model)
  const session = await s.sessions.create({ agent: p.agentId ?? defaults!.agentId, environment_id: p.environmentId ?? defaults!.environmentId, title: p.task.slice(0, 80) })
  p.out.write(`session ${session.id}\n`)
  const streamed = new Set<string>()
  let lineOpen = false
  const endLine = () => {
    if (lineOpen) p.out.write('\n')
    lineOpen = false
  }
  const stopPreviews = s.previews.subscribe(session.id, (e) => {
    if (e.type === 'event_start' && (e.event as { type: string }).type === 'agent.message') {
      endLine()
      streamed.add((e.event as { id: string }).id)
    } else if (e.type === 'event_delta') {
      p.out.write((e.delta as { content: { text: string } }).content.text)
      lineOpen = true
    }
  })
  let settle!: (r: RunTaskResult) => void
  let fail!: (e: unknown) => void
  const done = new Promise<RunTaskResult>((res, rej) => {
    settle = res
    fail = rej
  })
  let busy = Promise.resolve()
  const stopTail = s.log.tail(session.id, 0, ({ event }) => {
    busy = busy.then(() => onEvent(event)).catch(fail)
  })
  const onEvent = async (e: LoggedEvent): Promise<void> => {
    const x = e as LoggedEvent & Record<string, unknown>
    switch (e.type) {
      case 'agent.message':
        if (!streamed.has(e.id)) p.out.write(((x.content as { text?: string }[]) ?? []).map((b) => b.text ?? '').join(''))
        lineOpen = true
        endLine()
        break
      case 'agent.thinking':
        endLine()
        p.out.write('(thinking)\n')
        break
      case 'agent.tool_use':
      case 'agent.custom_tool_use':
      case 'agent.mcp_tool_use':
        endLine()
        p.out.write(
          `> ${x.mcp_server_name ? `${String(x.mcp_server_name)}/` : ''}${String(x.name)} ${JSON.stringify(x.input)}${x.evaluated_permission === 'ask' ? '  [needs confirmation]' : ''}\n`,
        )
        break
      case 'agent.tool_result':
      case 'agent.mcp_tool_result': {
        const text = ((x.content as { text?: string }[]) ?? []).map((b) => b.text ?? '').join('')
        p.out.write(`${x.is_error ? '! ' : '< '}${text.length > 2000 ? text.slice(0, 2000) + ` … (${text.length} chars)` : text}\n`)
        break
      }
      case 'session.error': {
        const err = x.error as { type: string; message: string; retry_status: { type: string } }
        endLine()
        p.out.write(`error (${err.retry_status.type}): ${err.type}: ${err.message}\n`)
        break
      }
      case 'session.status_idle': {
        const reason = x.stop_reason as { type: string; event_ids?: string[] }
        if (reason.type === 'requires_action') {
          await answerPending(p, session.id, reason.event_ids ?? [])
          return
        }
        endLine()
        p.out.write(`[${reason.type}]\n`)
        settle({ sessionId: session.id, stopReason: reason.type })
        break
      }
    }
  }
  await s.sessions.sendEvents(session.id, [{ type: 'user.message', content: [{ type: 'text', text: p.task }] }])
  try {
    return await done
  } finally {
    stopTail()
    stopPreviews()
  }
}

async function answerPending(p: RunTaskParams, sessionId: string, eventIds: string[]): Promise<void> {
  const s = p.engine.services
  const answers: Parameters<typeof s.sessions.sendEvents>[1] = []
  for (const id of eventIds) {
    const stored = s.log.get(id)
    if (!stored) continue
    const e = stored.event as unknown as { type: string; name: string; input: unknown }
    if (e.type === 'agent.custom_tool_use') {
      const text = await p.ask(`Result for custom tool ${e.name} ${JSON.stringify(e.input)}: `)
      answers.push({ type: 'user.custom_tool_result', custom_tool_use_id: id, content: [{ type: 'text', text }] })
      continue
    }
    let allow = p.autoApprove === true
    let why: string | undefined
    if (!allow) {
      const a = (await p.ask(`Allow ${e.name} ${JSON.stringify(e.input)}? [y/N/reason to deny] `)).trim()
      allow = /^y(es)?$/i.test(a)
      if (!allow && a && !/^n(o)?$/i.test(a)) why = a
    }
    answers.push({ type: 'user.tool_confirmation', tool_use_id: id, result: allow ? 'allow' : 'deny', ...(why ? { deny_message: why } : {}) })
  }
  if (answers.length) await s.sessions.sendEvents(sessionId, answers)
}

/** Registers `corral run "<task>"`. */
export function registerRunCommand(program: Command): void {
  program
    .command('run')
    .description('start a session on an agent and environment (defaults created if needed), stream its events, ask for confirmations')
    .argument('<task>', 'the first user message')
    .option('--agent <id>', 'agent id (default: the corral-default agent)')
    .option('--environment <id>', 'environment id (default: the corral-default environment)')
    .option('--model <model>', 'model for the default agent when it is created')
    .option('-y, --yes', 'allow every tool call without asking')
    .option('--data-dir <dir>', 'data directory (default: $CORRAL_DATA_DIR or the XDG data home)')
    .action(async (task: string, opts: { agent?: string; environment?: string; model?: string; yes?: boolean; dataDir?: string }) => {
      if (!task.trim()) throw new CorralError('invalid_request_error', 'task: must not be empty')
      const dataDir = opts.dataDir ?? resolveDataDir()
      const log = (m: string) => process.stderr.write(m + '\n')
      // The engine's default hands: Docker first, then bubblewrap (disposed by engine.close()).
      const engine = await Engine.openWithKeychain({ dataDir, log, onUpgrade: upgradeProgressLines(log) })
      const rl = createInterface({ input: process.stdin, output: process.stderr })
      let interrupted = false
      let sessionId: string | undefined
      process.on('SIGINT', () => {
        if (interrupted || !sessionId) process.exit(130)
        interrupted = true
        process.stderr.write('\ninterrupting (Ctrl-C again to quit)\n')
        void engine.services.sessions.sendEvents(sessionId, [{ type: 'user.interrupt' }])
      })
      const out = {
        write: (t: string) => {
          const m = /^session (sesn_\w+)/.exec(t)
          if (m) sessionId = m[1]
          return process.stdout.write(t)
        },
      }
      try {
        const r = await runTask({ engine, task, agentId: opts.agent, environmentId: opts.environment, model: opts.model, autoApprove: opts.yes, out, ask: (q) => rl.question(q) })
        process.exitCode = r.stopReason === 'end_turn' ? 0 : 1
      } finally {
        rl.close()
        await engine.close()
      }
      process.exit()
    })
}
