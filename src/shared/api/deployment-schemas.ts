/**
 * Boundary validation for deployments and deployment runs (spec resources.md §10, the SDK's
 * DeploymentCreateParams / DeploymentUpdateParams / DeploymentListParams / DeploymentRunListParams).
 * Strict like every schema of the API: an unknown key is refused, naming it.
 */
import { z } from 'zod'
import { cronExpressionProblem, timezoneProblem } from './cron'
import {
  boolString,
  budgetSchema,
  isoDate,
  metadataPatchSchema,
  metadataSchema,
  pageQuerySchema,
  sessionResourceSchema,
  userDefineOutcomeSchema,
  userMessageSchema,
} from './schemas'

export const MAX_DEPLOYMENT_INITIAL_EVENTS = 50
export const MAX_DEPLOYMENT_RESOURCES = 500
export const MAX_DEPLOYMENT_VAULTS = 50

/** `{type:'cron', expression, timezone}`: both required, each checked with the rule it breaks. */
export const cronScheduleParamsSchema = z
  .strictObject({ type: z.literal('cron'), expression: z.string().max(256), timezone: z.string().max(128) })
  .superRefine((s, ctx) => {
    const e = cronExpressionProblem(s.expression)
    if (e) ctx.addIssue({ code: 'custom', path: ['expression'], message: e })
    const t = timezoneProblem(s.timezone)
    if (t) ctx.addIssue({ code: 'custom', path: ['timezone'], message: t })
  })

const systemMessageSchema = z.strictObject({ type: z.literal('system.message'), content: z.array(z.strictObject({ type: z.literal('text'), text: z.string().max(1_000_000) })).min(1).max(100) })
const initialEventSchema = z.discriminatedUnion('type', [userMessageSchema, userDefineOutcomeSchema, systemMessageSchema], {
  error: 'must be a user.message, user.define_outcome or system.message event',
})
const initialEventsSchema = z
  .array(initialEventSchema)
  .min(1, 'at least 1 event (what each session is asked to do)')
  .max(MAX_DEPLOYMENT_INITIAL_EVENTS, `at most ${MAX_DEPLOYMENT_INITIAL_EVENTS} events`)
  .refine((events) => events.filter((e) => e.type === 'user.define_outcome').length <= 1, 'at most one user.define_outcome event')

/**
 * A deployment's resources: the session resources, except that a repository's
 * `authorization_token` cannot be kept for later sessions yet (it would have to live in the
 * keychain under the deployment; refused naming the field rather than silently dropped).
 */
const deploymentResourcesSchema = z
  .array(sessionResourceSchema)
  .max(MAX_DEPLOYMENT_RESOURCES, `at most ${MAX_DEPLOYMENT_RESOURCES} resources`)
  .superRefine((resources, ctx) => {
    resources.forEach((r, i) => {
      if (r.type === 'github_repository' && r.authorization_token !== undefined) {
        ctx.addIssue({ code: 'custom', path: [i, 'authorization_token'], message: 'Corral cannot keep a repository token for a deployment\'s future sessions yet; leave it out (public repositories) or start sessions directly' })
      }
    })
  })
const agentParamSchema = z.union(
  [z.string().min(1).max(128), z.strictObject({ type: z.literal('agent'), id: z.string().min(1).max(128), version: z.number().int().positive().optional() })],
  { error: 'an agent id, or {type:"agent", id, version}' },
)
const vaultIdsSchema = z.array(z.string().min(1).max(128)).max(MAX_DEPLOYMENT_VAULTS, `at most ${MAX_DEPLOYMENT_VAULTS} vaults`)

export const deploymentCreateSchema = z.strictObject({
  agent: agentParamSchema,
  environment_id: z.string().min(1).max(128),
  initial_events: initialEventsSchema,
  name: z.string().min(1, 'must not be empty').max(256),
  budget: budgetSchema.nullable().optional(),
  description: z.string().max(2048).nullable().optional(),
  metadata: metadataSchema.optional(),
  resources: deploymentResourcesSchema.optional(),
  schedule: cronScheduleParamsSchema.nullable().optional(),
  vault_ids: vaultIdsSchema.optional(),
})

/** Omitted = kept; initial_events, resources, vault_ids, schedule, budget replace; metadata patches; name, agent, environment_id cannot be cleared. */
export const deploymentUpdateSchema = z.strictObject({
  agent: agentParamSchema.optional(),
  budget: budgetSchema.nullable().optional(),
  description: z.string().max(2048).nullable().optional(),
  environment_id: z.string().min(1).max(128).optional(),
  initial_events: initialEventsSchema.optional(),
  metadata: metadataPatchSchema.nullable().optional(),
  name: z.string().min(1, 'must not be empty').max(256).optional(),
  resources: deploymentResourcesSchema.nullable().optional(),
  schedule: cronScheduleParamsSchema.nullable().optional(),
  vault_ids: vaultIdsSchema.nullable().optional(),
})

export const deploymentListQuerySchema = pageQuerySchema
  .extend({
    agent_id: z.string().min(1).max(128).optional(),
    'created_at[gte]': isoDate.optional(),
    'created_at[lte]': isoDate.optional(),
    include_archived: boolString.optional(),
    status: z.enum(['active', 'paused']).optional(),
  })
  .refine((q) => !(q.status !== undefined && q.include_archived === true), {
    path: ['status'],
    message: 'cannot be combined with include_archived=true (archived deployments report status active; list them with include_archived alone)',
  })

export const deploymentRunListQuerySchema = pageQuerySchema.extend({
  deployment_id: z.string().min(1).max(128).optional(),
  has_error: boolString.optional(),
  trigger_type: z.enum(['schedule', 'manual']).optional(),
  'created_at[gt]': isoDate.optional(),
  'created_at[gte]': isoDate.optional(),
  'created_at[lt]': isoDate.optional(),
  'created_at[lte]': isoDate.optional(),
})
