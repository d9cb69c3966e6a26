/**
 * Outcomes (spec multiagent §8): after `user.define_outcome` the primary agent works toward the
 * description; each time its turn ends a grader scores the deliverable against the rubric, and
 * either feeds the gaps back (`needs_revision`, another iteration) or ends the outcome.
 *
 * The grader is a separate model request with its own context (not the agent's conversation)
 * and no tools but one it must call, `record_verdict` (`tool_choice` forces it), whose input is the
 * verdict: `{result, explanation, gaps[]}`. It reads the description, the rubric, the agent's final
 * message and the files the agent named as its deliverable with `ant__name_deliverables` (read
 * from the sandbox through the ToolRouter's `read`). It is not a thread: the API documents no
 * thread events for it (spec §8.4); its usage is on `span.outcome_evaluation_end` and counts
 * toward the session's usage and budget.
 *
 * The pure parts (texts, request, verdict reading) are exported for unit tests; `evaluate` runs
 * one evaluation against the model client.
 */
import { z } from 'zod'
import { DELIVERABLES_TOOL, GRADER_RESULTS, MAX_DELIVERABLES, deliverablePaths, type GraderResult, type OutcomeGap } from '../../shared/api/outcomes'
import type { ToolRouter } from '../hands/tool-router'
import { ModelRequestError, type ModelClient, type ModelRequest, type ModelResponse, type ModelUsage } from './model-client'
import type { PlatformTool } from './platform-tools'
import type { ModelToolDefinition } from './tools'
import { pause } from './pause'

export { evaluationFeedbackText, outcomeBriefText } from './context/outcome'

export { DELIVERABLES_TOOL }
/** The grader's one tool, forced with tool_choice: its input is the verdict. */
export const VERDICT_TOOL = 'record_verdict'
/** Each deliverable file is cut at this many characters for the grader. */
export const MAX_DELIVERABLE_CHARS = 100_000

export const DELIVERABLES_DEFINITION: ModelToolDefinition = {
  name: DELIVERABLES_TOOL,
  description:
    'Name the files in the sandbox that make up your deliverable for the outcome you are working toward. When your turn ends, a grader reads these files ' +
    'and your final message (nothing else of this conversation) and checks them against the rubric. Call it again to replace the list.',
  input_schema: {
    type: 'object',
    properties: {
      paths: {
        type: 'array',
        items: { type: 'string' },
        minItems: 1,
        maxItems: MAX_DELIVERABLES,
        description: 'Paths of the deliverable files in the sandbox (absolute, or relative to /workspace)',
      },
    },
    required: ['paths'],
  },
}

export const VERDICT_DEFINITION: ModelToolDefinition = {
  name: VERDICT_TOOL,
  description: 'Record your verdict on the deliverable. Call it exactly once.',
  input_schema: {
    type: 'object',
    properties: {
      result: {
        type: 'string',
        enum: [...GRADER_RESULTS],
        description:
          'satisfied: every criterion of the rubric is met. needs_revision: some criterion is not met yet and the agent can fix it. ' +
          'failed: the rubric does not apply to this deliverable (e.g. it contradicts the task description), so no revision can satisfy it.',
      },
      explanation: { type: 'string', description: 'Why: for needs_revision, which criteria are not met and why; for satisfied, why they are met; for failed, why the rubric does not apply.' },
      gaps: {
        type: 'array',
        description: 'One entry per criterion that is not met (empty when satisfied)',
        items: {
          type: 'object',
          properties: { criterion: { type: 'string', description: 'The criterion of the rubric' }, gap: { type: 'string', description: 'What the deliverable lacks for it' } },
          required: ['criterion', 'gap'],
        },
      },
    },
    required: ['result', 'explanation', 'gaps'],
  },
}

/** What the grader is told (its system prompt). */
export const GRADER_SYSTEM =
  'You are a grader. An AI agent was given a task and a rubric; you check its deliverable against the rubric, criterion by criterion, and nothing else. ' +
  'You see the task description, the rubric, the files the agent named as its deliverable and its final message. Judge only what is there: ' +
  'a claim in the final message that a file does not back up does not meet a criterion. Answer by calling record_verdict once.'

/** One deliverable file as the grader gets it: its content, or why it could not be read. */
export interface DeliverableFile {
  path: string
  content?: string
  error?: string
}

export interface GraderRequestParams {
  model: string
  description: string
  rubric: string
  /** The text of the agent's final message (empty when it ended with none). */
  finalMessage: string
  /** The files the agent named (none: it named none). */
  files: readonly DeliverableFile[]
  maxTokens?: number
}

/** The grader's request: its own context (one user turn), one tool, forced. Pure. */
export function graderRequest(p: GraderRequestParams): ModelRequest {
  const files = p.files.length
    ? p.files.map((f) => (f.content !== undefined ? `<file path="${f.path}">\n${f.content}\n</file>` : `<file path="${f.path}" unreadable="true">\n${f.error ?? 'could not be read'}\n</file>`)).join('\n')
    : '(The agent named no deliverable files.)'
  const text = [
    `<task_description>\n${p.description}\n</task_description>`,
    `<rubric>\n${p.rubric}\n</rubric>`,
    `<deliverable_files>\n${files}\n</deliverable_files>`,
    `<agent_final_message>\n${p.finalMessage || '(The agent ended its turn without a message.)'}\n</agent_final_message>`,
    'Check the deliverable against every criterion of the rubric and record your verdict.',
  ].join('\n\n')
  return {
    model: p.model,
    max_tokens: p.maxTokens ?? 4096,
    system: [{ type: 'text', text: GRADER_SYSTEM }],
    messages: [{ role: 'user', content: [{ type: 'text', text }] }],
    tools: [VERDICT_DEFINITION as never],
    tool_choice: { type: 'tool', name: VERDICT_TOOL },
  }
}

export interface Verdict {
  result: GraderResult
  explanation: string
  gaps: OutcomeGap[]
}

const verdictSchema = z.object({
  result: z.enum(GRADER_RESULTS),
  explanation: z.string().min(1),
  gaps: z.array(z.object({ criterion: z.string(), gap: z.string() })),
})

/** The verdict a grader response carries (its record_verdict call), or why it has none readable. Pure. */
export function readVerdict(response: Pick<ModelResponse, 'blocks'>): { verdict: Verdict } | { problem: string } {
  const call = response.blocks.find((b) => b.type === 'tool_use' && b.name === VERDICT_TOOL)
  if (!call || call.type !== 'tool_use') return { problem: `the answer has no ${VERDICT_TOOL} call` }
  const r = verdictSchema.safeParse(call.input)
  if (!r.success) return { problem: `its ${VERDICT_TOOL} input is not a verdict (${r.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')})` }
  return { verdict: { result: r.data.result, explanation: r.data.explanation, gaps: r.data.gaps.map((g) => ({ criterion: g.criterion, gap: g.gap })) } }
}

/**
 * Reads the named files from the session's sandbox for the grader, through the ToolRouter's
 * toolset `read` (the same hands the agent wrote them with). A path that cannot be read is
 * given to the grader as such. Relative paths are taken under /workspace.
 */
export async function readDeliverables(p: { router: ToolRouter; sessionId: string; paths: readonly string[]; callId: string; signal?: AbortSignal }): Promise<DeliverableFile[]> {
  const out: DeliverableFile[] = []
  for (const [i, raw] of [...new Set(p.paths)].slice(0, MAX_DELIVERABLES).entries()) {
    const path = raw.startsWith('/') ? raw : `/workspace/${raw.replace(/^\.\//, '')}`
    try {
      const r = await p.router.execute({ sessionId: p.sessionId, toolUseId: `${p.callId}_read_${i}`, name: 'read', input: { file_path: path }, route: 'toolset', signal: p.signal })
      if (r.isError) out.push({ path, error: r.content })
      else out.push({ path, content: r.content.length > MAX_DELIVERABLE_CHARS ? `${r.content.slice(0, MAX_DELIVERABLE_CHARS)}\n[… cut at ${MAX_DELIVERABLE_CHARS} characters]` : r.content })
    } catch (err) {
      out.push({ path, error: (err as Error).message })
    }
  }
  return out
}

export interface EvaluateParams {
  model: ModelClient
  request: ModelRequest
  /** Aborted by an interrupt or a shutdown: the evaluation stops and says so. */
  signal: AbortSignal
  /** Called every `heartbeatMs` while the grader works (the harness appends `span.outcome_evaluation_ongoing`). */
  onHeartbeat?: () => void
  heartbeatMs?: number
  maxRetries?: number
  backoffBaseMs?: number
  backoffMaxMs?: number
  random?: () => number
}

export type EvaluationResult =
  | { kind: 'verdict'; verdict: Verdict; usage: ModelUsage }
  /** No verdict: the answer was unreadable twice, or the grader's requests failed for good. The outcome ends `failed` with `explanation`. */
  | { kind: 'no_verdict'; explanation: string; usage: ModelUsage }
  | { kind: 'aborted'; usage: ModelUsage }

/**
 * Runs one evaluation: the grader's request, retried once when its answer cannot be read (then
 * `no_verdict`), and on a failing endpoint with backoff like the agent's own requests. `usage`
 * sums every request of the evaluation. Never throws.
 */
export async function evaluate(p: EvaluateParams): Promise<EvaluationResult> {
  const usage: ModelUsage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
  const add = (u: ModelUsage) => {
    for (const k of Object.keys(usage) as (keyof ModelUsage)[]) usage[k] += u[k] ?? 0
  }
  const beat = p.onHeartbeat ? setInterval(p.onHeartbeat, p.heartbeatMs ?? 10_000) : undefined
  beat?.unref()
  const maxRetries = p.maxRetries ?? 5
  let unreadable: string | undefined
  try {
    for (let attempt = 0; ; ) {
      if (p.signal.aborted) return { kind: 'aborted', usage }
      let partial: ModelUsage | undefined
      try {
        const response = await p.model.stream(p.request, { signal: p.signal, onUsage: (u) => (partial = u) })
        add(response.usage)
        const read = readVerdict(response)
        if ('verdict' in read) return { kind: 'verdict', verdict: read.verdict, usage }
        if (unreadable !== undefined) {
          return { kind: 'no_verdict', explanation: `The grader's answer could not be read twice (first: ${unreadable}; then: ${read.problem}), so the outcome ends without a verdict.`, usage }
        }
        unreadable = read.problem
        continue // retried once, at once
      } catch (err) {
        if (partial) add(partial)
        const e = err instanceof ModelRequestError ? err : new ModelRequestError('connection', (err as Error).message, { cause: err })
        if (e.kind === 'aborted' || p.signal.aborted) return { kind: 'aborted', usage }
        if (!e.retryable || attempt + 1 > maxRetries) return { kind: 'no_verdict', explanation: `The grader's model request failed (${e.message}), so the outcome ends without a verdict.`, usage }
        const exp = Math.min(p.backoffMaxMs ?? 30_000, (p.backoffBaseMs ?? 1000) * 2 ** attempt)
        const delay = Math.max(e.retryAfterMs ?? 0, exp / 2 + (exp / 2) * (p.random ?? Math.random)())
        attempt++
        await pause(Math.min(delay, p.backoffMaxMs ?? 30_000), p.signal)
      }
    }
  } finally {
    if (beat) clearInterval(beat)
  }
}


/**
 * `ant__name_deliverables` as a platform tool: offered on the primary thread while an outcome is
 * active. Its input is what the grader reads (the fold keeps the latest call's paths); the
 * result only confirms.
 */
export function deliverablesTool(): PlatformTool {
  return {
    name: DELIVERABLES_TOOL,
    definition: DELIVERABLES_DEFINITION,
    offered: (ctx) => ctx.threadKey === null && typeof ctx.activeOutcome === 'string',
    async run(ctx) {
      const paths = deliverablePaths(ctx.call.input)
      if (paths.length === 0) return { outcome: { content: `${DELIVERABLES_TOOL}: paths must list at least one file path.`, isError: true } }
      return {
        outcome: {
          content: `The grader will read ${paths.length === 1 ? 'this file' : `these ${paths.length} files`} when your turn ends: ${paths.join(', ')}. End your turn when the deliverable is ready.`,
          isError: false,
        },
      }
    },
  }
}
