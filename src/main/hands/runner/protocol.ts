import { z } from 'zod'

/**
 * The runner protocol (resources/sandbox/runner.js, whose header is the prose of it) as the host
 * speaks it: one request variant per op the runner serves, and the replies as the host accepts
 * them. Requests and replies are JSON lines; a reply carries its request's `rid` (a call's is
 * the call's tool_use_id, which its `output` lines carry too).
 */
export type RunnerRequest =
  | { rid: string; op: 'hello'; nonce: string }
  | { rid: string; op: 'call'; id: string; name: string; input: unknown; cap?: number; stream: boolean }
  | { rid: string; op: 'cancel'; id: string }
  | { rid: string; op: 'recover'; id: string }
  | { rid: string; op: 'place'; path: string; content_base64?: string; tar_base64?: string }
  | { rid: string; op: 'exists'; path: string }
  | { rid: string; op: 'reset' }
  | { rid: string; op: 'egress'; env: Readonly<Record<string, string>>; socket: string; port: number }
  | { rid: string; op: 'clone'; url: string; path: string; branch?: string; sha?: string }
  | { rid: string; op: 'list_files'; path: string; max?: number }
  | { rid: string; op: 'read_file'; path: string; offset: number; length: number }

export type RunnerOp = RunnerRequest['op']

/** Every op of the protocol, as a value (test/unit/hands/runner-protocol.test.ts holds it to runner.js's dispatch). */
export const RUNNER_OPS = ['hello', 'call', 'cancel', 'recover', 'place', 'exists', 'reset', 'egress', 'clone', 'list_files', 'read_file'] as const satisfies readonly RunnerOp[]
// A compile error when the union has an op the list lacks (`satisfies` above catches the converse).
export type UnlistedOps = Exclude<RunnerOp, (typeof RUNNER_OPS)[number]>
const everyOpListed: [UnlistedOps] extends [never] ? true : never = true
void everyOpListed

// The replies, as the host accepts them. Unknown fields are dropped: nothing but these reaches
// the caller, and so the session log.
const rid = z.string().max(512)
/** Most stderr ranges one result may name (the runner's MAX_STDERR_RANGES). */
export const MAX_STDERR_RANGES = 10000
const resultSchema = z
  .object({
    content: z.string(),
    isError: z.boolean(),
    exitCode: z.number().int().nullable().optional(),
    durationMs: z.number().nonnegative().finite().optional(),
    /** The parts of `content` a bash command wrote to stderr: [from, to) in UTF-16 code units, ascending, not overlapping. */
    stderr: z.array(z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()])).max(MAX_STDERR_RANGES).optional(),
  })
  .superRefine((r, ctx) => {
    let end = 0
    for (const [i, [from, to]] of (r.stderr ?? []).entries()) {
      if (from < end || to <= from || to > r.content.length) {
        ctx.addIssue({ code: 'custom', path: ['stderr', i], message: 'stderr ranges must be ascending, non-empty and inside content' })
        return
      }
      end = to
    }
  })
export const replySchema = z.discriminatedUnion('type', [
  z.object({ rid, type: z.literal('hello'), nonce: z.string(), pid: z.number().int(), version: z.number().int(), workspace: z.string() }),
  // `stream` only on stderr's chunks (a chunk without it is stdout, or a tool that has one stream).
  z.object({ rid, type: z.literal('output'), data: z.string(), stream: z.literal('stderr').optional() }),
  z.object({ rid, type: z.literal('result'), result: resultSchema }),
  z.object({ rid, type: z.literal('recovery'), state: z.enum(['finished', 'running', 'unknown']), result: resultSchema.optional() }),
  z.object({ rid, type: z.literal('placed'), existed: z.boolean() }),
  z.object({ rid, type: z.literal('exists'), exists: z.boolean() }),
  z.object({ rid, type: z.literal('reset') }),
  z.object({ rid, type: z.literal('egress'), listening: z.boolean() }),
  z.object({ rid, type: z.literal('cloned'), existed: z.boolean() }),
  z.object({
    rid,
    type: z.literal('files'),
    files: z.array(z.object({ path: z.string().max(4096), size: z.number().int().nonnegative(), sig: z.string().max(200) })).max(10_000),
    skipped: z.array(z.object({ path: z.string().max(4096), reason: z.string().max(200) })).max(10_000),
    truncated: z.boolean(),
  }),
  z.object({ rid, type: z.literal('file_chunk'), content_base64: z.string(), size: z.number().int().nonnegative(), sig: z.string().max(200) }),
  z.object({ rid: rid.nullable(), type: z.literal('error'), message: z.string().max(64 * 1024) }),
])
export type RunnerReply = z.infer<typeof replySchema>
export type ReplyType = RunnerReply['type']

/**
 * The reply type that answers each op (a call's `output` lines come before its `result`; an
 * `error` may answer any request; `cancel` has no reply of its own: the call's result answers).
 */
export const REPLY_TO = {
  hello: 'hello',
  call: 'result',
  recover: 'recovery',
  place: 'placed',
  exists: 'exists',
  reset: 'reset',
  egress: 'egress',
  clone: 'cloned',
  list_files: 'files',
  read_file: 'file_chunk',
} as const satisfies Record<Exclude<RunnerOp, 'cancel'>, ReplyType>

/** An op that has a reply of its own. */
export type AnsweredOp = keyof typeof REPLY_TO
/** The request of `op`, without its rid (the connection numbers requests). */
export type RequestOf<Op extends RunnerOp> = Omit<Extract<RunnerRequest, { op: Op }>, 'rid'>
/** The reply that answers `op`. */
export type ReplyTo<Op extends AnsweredOp> = Extract<RunnerReply, { type: (typeof REPLY_TO)[Op] }>

/** Whether `reply` is the kind that answers `op` (an `error` or `output` is not). */
export function answers<Op extends AnsweredOp>(op: Op, reply: RunnerReply): reply is ReplyTo<Op> {
  return reply.type === REPLY_TO[op]
}
