/**
 * Boundary validation: zod schemas for every request body and query the API accepts. The HTTP
 * routes, the IPC adapter and the CLI all validate with these, once, at the boundary
 * (DESIGN invariant 6). Shapes follow the SDK's *Params types; unknown keys are refused so a
 * typo is an error, not a silently ignored field.
 */
import { z } from 'zod'
import { parsePlainHttpHosts, PLAIN_HTTP_HOSTS_KEY } from './plain-http-hosts'
import { OUTCOME_MAX_ITERATIONS, OUTCOME_MAX_RUBRIC_CHARS } from './outcomes'
import { MAX_DREAM_TIME_LIMIT_MINUTES } from './dreams'

const MAX_TEXT = 1_000_000
export const metadataSchema = z
  .record(z.string().max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 metadata keys')
export const metadataPatchSchema = z
  .record(z.string().max(64), z.string().max(512).nullable())
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 metadata keys')

// ---------- agents ----------
const policySchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('always_allow') }),
  z.strictObject({ type: z.literal('always_ask') }),
  z.strictObject({ type: z.literal('auto') }),
])
export const TOOLSET_TOOLS = ['bash', 'edit', 'read', 'write', 'glob', 'grep', 'web_fetch', 'web_search'] as const
const toolConfigSchema = z
  .strictObject({
    name: z.enum(TOOLSET_TOOLS),
    type: z.enum(TOOLSET_TOOLS).optional(),
    enabled: z.boolean().nullable().optional(),
    permission_policy: policySchema.nullable().optional(),
  })
  .refine((c) => c.type === undefined || c.type === c.name, { path: ['type'], message: 'must equal name when given' })
const toolsetSchema = z.strictObject({
  type: z.literal('agent_toolset_20260401'),
  configs: z.array(toolConfigSchema).max(TOOLSET_TOOLS.length).optional(),
  default_config: z
    .strictObject({ enabled: z.boolean().nullable().optional(), permission_policy: policySchema.nullable().optional() })
    .nullable()
    .optional(),
})
const mcpToolsetSchema = z.strictObject({
  type: z.literal('mcp_toolset'),
  mcp_server_name: z.string().min(1).max(128),
  configs: z
    .array(
      z.strictObject({
        name: z.string().min(1).max(256),
        enabled: z.boolean().nullable().optional(),
        permission_policy: policySchema.nullable().optional(),
      }),
    )
    .optional(),
  default_config: z
    .strictObject({ enabled: z.boolean().nullable().optional(), permission_policy: policySchema.nullable().optional() })
    .nullable()
    .optional(),
})
const customToolSchema = z.strictObject({
  type: z.literal('custom'),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,128}$/, 'letters, digits, _ and -, 1 to 128 characters'),
  description: z.string().max(10_000),
  input_schema: z.looseObject({ type: z.literal('object') }),
})
export const agentToolSchema = z.discriminatedUnion('type', [toolsetSchema, mcpToolsetSchema, customToolSchema])
const modelSchema = z.union([
  z.string().min(1).max(256),
  z.strictObject({
    id: z.string().min(1).max(256),
    effort: z.unknown().optional(),
    inference_geo: z.string().nullable().optional(),
    speed: z.enum(['standard', 'fast']).nullable().optional(),
  }),
])
const mcpServerSchema = z.strictObject({
  type: z.literal('url'),
  name: z.string().min(1).max(128),
  url: z.url({ protocol: /^https?$/ }),
})

// The `multiagent` block (spec/multiagent.md §2): shapes only. The rules that need the other
// agents (V2–V11: limits, existence, depth, pairing, names) are session/agent-roster.ts's.
const agentIdSchema = z.string().min(1).max(128)
const agentParamsSchema = z.strictObject({ type: z.literal('agent'), id: agentIdSchema, version: z.number().int().positive().optional() })
const selfEntrySchema = z.strictObject({ type: z.literal('self') })
/** The advisor as a roster entry: the legacy `coordinator` form only (V9 refuses it in a predefined list, naming the rule). */
const advisorEntrySchema = z.strictObject({ type: z.literal('advisor'), model: z.string().min(1).max(256) })
const enabledOrDisabled = z.discriminatedUnion('type', [z.strictObject({ type: z.literal('enabled') }), z.strictObject({ type: z.literal('disabled') })], {
  error: 'must be enabled or disabled',
})
/** Lists are capped here only against abuse; the API's limit of 20 is V2's, with its own message. */
const predefinedAgentsSchema = z.array(z.union([agentIdSchema, agentParamsSchema, selfEntrySchema, advisorEntrySchema], { error: 'an agent id, {type:"agent", id, version?}, {type:"self"} or (coordinator only) {type:"advisor", model}' })).max(200)
const delegationSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('disabled') }),
    z.strictObject({ type: z.literal('enabled'), inline_agents: enabledOrDisabled.nullable().optional(), predefined_agents: predefinedAgentsSchema.nullable().optional() }),
  ],
  { error: 'must be enabled or disabled' },
)
const advisorSchema = z.discriminatedUnion(
  'type',
  [z.strictObject({ type: z.literal('disabled') }), z.strictObject({ type: z.literal('enabled'), model: z.string().min(1).max(256) })],
  { error: 'must be enabled (with model) or disabled' },
)
export const multiagentSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('multiagent_20261001'),
      subagents: delegationSchema.nullable().optional(),
      workflows: delegationSchema.nullable().optional(),
      advisor: advisorSchema.nullable().optional(),
    }),
    z.strictObject({ type: z.literal('coordinator'), agents: predefinedAgentsSchema }),
  ],
  { error: 'must be multiagent_20261001 or coordinator (V1)' },
)
const executionIdentitySchema = z.discriminatedUnion(
  'type',
  [z.strictObject({ type: z.literal('service_account') }), z.strictObject({ type: z.literal('aws_role'), role_arn: z.string().min(1).max(2048) })],
  { error: 'must be service_account or aws_role' },
)
/**
 * An agent's skill (the SDK's BetaManagedAgentsSkillParams): a custom skill by id, pinned to a
 * version or (version absent or null) following `latest`. Anthropic-built skills pass the shape
 * check and are refused at save with their own message (not available offline).
 */
const skillSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('custom'), skill_id: z.string().min(1).max(128), version: z.string().min(1).max(64).nullable().optional() }),
    z.strictObject({ type: z.literal('anthropic'), skill_id: z.string().min(1).max(128), version: z.string().min(1).max(64).nullable().optional() }),
  ],
  { error: 'must be a custom skill ({type: "custom", skill_id, version?}) or an anthropic one' },
)

export const agentCreateSchema = z.strictObject({
  name: z.string().min(1).max(256),
  model: modelSchema,
  description: z.string().max(2048).nullable().optional(),
  system: z.string().max(MAX_TEXT).nullable().optional(),
  tools: z.array(agentToolSchema).max(128).optional(),
  mcp_servers: z.array(mcpServerSchema).max(32).optional(),
  metadata: metadataSchema.optional(),
  multiagent: multiagentSchema.nullable().optional(),
  skills: z.array(skillSchema).max(64).optional(),
  execution_identity: executionIdentitySchema.nullable().optional(),
})
export const agentUpdateSchema = z.strictObject({
  version: z.number().int().positive().optional(),
  name: z.string().min(1).max(256).optional(),
  model: modelSchema.optional(),
  description: z.string().max(2048).nullable().optional(),
  system: z.string().max(MAX_TEXT).nullable().optional(),
  tools: z.array(agentToolSchema).max(128).nullable().optional(),
  mcp_servers: z.array(mcpServerSchema).max(32).nullable().optional(),
  metadata: metadataPatchSchema.nullable().optional(),
  multiagent: multiagentSchema.nullable().optional(),
  skills: z.array(skillSchema).max(64).nullable().optional(),
  execution_identity: executionIdentitySchema.nullable().optional(),
})

// ---------- environments ----------
const hostSchema = z.string().min(1).max(253).regex(/^[A-Za-z0-9.*:-]+$/, 'a host name, optionally with *. and :port')
const networkingSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('unrestricted') }),
  z.strictObject({
    type: z.literal('limited'),
    allowed_hosts: z.array(hostSchema).max(256).nullable().optional(),
    allow_mcp_servers: z.boolean().nullable().optional(),
    allow_package_managers: z.boolean().nullable().optional(),
  }),
])
/** A package spec as apt, pip, npm, gem, cargo or go take it; never an option (no leading -), never shell. */
export const PACKAGE_SPEC = /^[A-Za-z0-9@_.+=<>~^:/*,[\]!][A-Za-z0-9@_.+=<>~^:/*,[\]!-]*$/
const pkgList = z.array(z.string().min(1).max(256).regex(PACKAGE_SPEC, 'a package spec: letters, digits and @ _ . + = < > ~ ^ : / * , [ ] ! -, not starting with -')).max(256).nullable().optional()
const mirrorUrl = z.string().max(2048).regex(/^https?:\/\/[^\s'"\\@]+$/, 'an http(s) URL without credentials')
const packagesSchema = z.strictObject({
  type: z.literal('packages').optional(),
  apt: pkgList,
  cargo: pkgList,
  gem: pkgList,
  go: pkgList,
  npm: pkgList,
  pip: pkgList,
})
/** Corral's own, optional additions to a `cloud` config: never change a shared field's meaning. */
export const corralSandboxSchema = z.strictObject({
  /** Which backend runs the environment's sandboxes; default (or `auto`): docker where an engine answers, else vm where qemu and its guest image are, else bubblewrap. */
  backend: z.enum(['docker', 'vm', 'bubblewrap', 'auto']).optional(),
  /** A Docker image instead of the default corral-sandbox image (it must contain node, bash and rg). */
  image: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[a-z0-9][a-z0-9._/:-]*(@sha256:[a-f0-9]{64})?$/, 'a Docker image reference (lowercase repository[:tag], e.g. corral-sandbox:latest)')
    .optional(),
  /** Docker runtime, e.g. `runsc` for gVisor. */
  runtime: z.string().max(64).regex(/^[A-Za-z0-9_.-]+$/, 'a runtime name (letters, digits, _ . -)').optional(),
  memory_mb: z.number().int().min(32).max(1_048_576).optional(),
  cpus: z.number().positive().max(256).optional(),
  pids: z.number().int().min(16).max(1_000_000).optional(),
  /** Warm containers kept ready for this environment (0 turns the pool off). */
  pool_size: z.number().int().min(0).max(16).optional(),
  /** Another name for pool_size; pool_size wins when both are given. */
  warm_pool: z.number().int().min(0).max(16).optional(),
  /** Cap on one tool result's text, in bytes; longer output is truncated and saved in the sandbox. */
  output_cap_bytes: z.number().int().min(1024).max(64 * 1024 * 1024).optional(),
  /** Default timeout of a bash call, in ms. */
  bash_timeout_ms: z.number().int().min(100).max(3_600_000).optional(),
  /** Absolute in-sandbox directories besides /workspace that file tools may use (e.g. /tmp). */
  extra_roots: z.array(z.string().max(1024).regex(/^\/[^\0:]*$/, 'an absolute path without ":"')).max(16).optional(),
  /**
   * Registry mirrors for installing `packages` (offline or company registries): `apt` replaces the
   * image's sources.list with these lines, `npm` is a registry URL, `pip` an index URL.
   */
  package_sources: z
    .strictObject({
      apt: z.array(z.string().max(1024).regex(/^deb(\s+\[[^\]\n'"\\]*\])?\s+https?:\/\/[^\s'"\\@]+(\s+[^\s'"\\]+)+$/, 'a sources.list line: deb [options] http(s)://host/path suite [components]')).max(16).optional(),
      npm: mirrorUrl.optional(),
      pip: mirrorUrl.optional(),
    })
    .optional(),
})
export const environmentConfigSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('cloud'),
    networking: networkingSchema.nullable().optional(),
    packages: packagesSchema.nullable().optional(),
    corral: corralSandboxSchema.optional(),
  }),
  z.strictObject({ type: z.literal('self_hosted') }),
])
export const environmentCreateSchema = z.strictObject({
  name: z.string().min(1).max(256),
  config: environmentConfigSchema.nullable().optional(),
  description: z.string().max(2048).nullable().optional(),
  metadata: metadataSchema.optional(),
  scope: z.enum(['organization', 'account']).nullable().optional(),
})
export const environmentUpdateSchema = z.strictObject({
  name: z.string().min(1).max(256).nullable().optional(),
  config: environmentConfigSchema.nullable().optional(),
  description: z.string().max(2048).nullable().optional(),
  metadata: metadataPatchSchema.optional(),
  scope: z.enum(['organization', 'account']).nullable().optional(),
})

// ---------- content blocks and events ----------
const textBlock = z.strictObject({ type: z.literal('text'), text: z.string().max(MAX_TEXT) })
const imageBlock = z.strictObject({
  type: z.literal('image'),
  source: z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('base64'), media_type: z.string().max(64), data: z.string().max(20_000_000) }),
    z.strictObject({ type: z.literal('url'), url: z.url() }),
    z.strictObject({ type: z.literal('file'), file_id: z.string().max(256) }),
  ]),
})
const documentBlock = z.looseObject({ type: z.literal('document'), source: z.looseObject({ type: z.string() }) })
const searchResultBlock = z.looseObject({ type: z.literal('search_result') })
const userContent = z.array(z.discriminatedUnion('type', [textBlock, imageBlock, documentBlock])).min(1).max(100)
const resultContent = z.array(z.discriminatedUnion('type', [textBlock, imageBlock, documentBlock, searchResultBlock])).max(100)
const eventIdSchema = z.string().min(1).max(128)
const threadIdSchema = z.string().min(1).max(128).nullable().optional()

export const userMessageSchema = z.strictObject({ type: z.literal('user.message'), content: userContent })
export const userDefineOutcomeSchema = z.strictObject({
  type: z.literal('user.define_outcome'),
  description: z.string().min(1).max(MAX_TEXT),
  rubric: z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('text'), content: z.string().min(1).max(OUTCOME_MAX_RUBRIC_CHARS) }),
    z.strictObject({ type: z.literal('file'), file_id: z.string().min(1).max(256) }),
  ]),
  max_iterations: z.number().int().min(1).max(OUTCOME_MAX_ITERATIONS).nullable().optional(),
})
export const eventParamsSchema = z.discriminatedUnion('type', [
  userMessageSchema,
  z.strictObject({ type: z.literal('user.interrupt'), session_thread_id: threadIdSchema }),
  z.strictObject({
    type: z.literal('user.tool_confirmation'),
    tool_use_id: eventIdSchema,
    result: z.enum(['allow', 'deny']),
    deny_message: z.string().max(10_000).nullable().optional(),
    session_thread_id: threadIdSchema,
    /**
     * Corral addition: with `allow` on a bash call, later bash calls of this session with exactly
     * the same command are evaluated `allow` instead of asking (the confirmation is the fact the
     * harness reads back from the log). Clients that never send it see the API's behaviour.
     */
    corral_allow_for_session: z.literal(true).optional(),
  }),
  z.strictObject({
    type: z.literal('user.custom_tool_result'),
    custom_tool_use_id: eventIdSchema,
    content: resultContent.optional(),
    is_error: z.boolean().nullable().optional(),
    session_thread_id: threadIdSchema,
  }),
  userDefineOutcomeSchema,
  z.strictObject({
    type: z.literal('user.tool_result'),
    tool_use_id: eventIdSchema,
    content: resultContent.optional(),
    is_error: z.boolean().nullable().optional(),
    session_thread_id: threadIdSchema,
  }),
  z.strictObject({ type: z.literal('system.message'), content: z.array(textBlock).min(1).max(100) }),
])
export const eventSendSchema = z.strictObject({ events: z.array(eventParamsSchema).min(1).max(100) })

// ---------- sessions ----------
export const budgetSchema = z.strictObject({
  type: z.literal('limit'),
  max_list_cost: z.strictObject({
    amount: z.string().regex(/^[1-9]\d{0,11}$/, 'whole US cents as a string of digits, greater than 0 and without leading zeros (e.g. "500" for $5.00)'),
    currency: z.literal('USD'),
  }),
})
const agentRefSchema = z.union([
  z.string().min(1).max(128),
  z.strictObject({ type: z.literal('agent'), id: z.string().min(1).max(128), version: z.number().int().positive().optional() }),
  z.strictObject({
    type: z.literal('agent_with_overrides'),
    id: z.string().min(1).max(128),
    version: z.number().int().positive().optional(),
    model: modelSchema.optional(),
    system: z.string().max(MAX_TEXT).nullable().optional(),
    tools: z.array(agentToolSchema).max(128).optional(),
    mcp_servers: z.array(mcpServerSchema).max(32).optional(),
    skills: z.array(skillSchema).max(64).optional(),
  }),
])
/**
 * Corral's addition (not in the Managed Agents API): a folder of the user's machine mounted into
 * the sandbox, read-write (changes are recorded and can be reverted) or read-only. `host_path` is
 * resolved with realpath and refused for system directories, the home directory itself, `/`, and
 * Corral's data and keychain files (see hands/folders.ts); `mount_path` defaults to /workspace.
 */
export const hostFolderResourceSchema = z.strictObject({
  type: z.literal('host_folder'),
  host_path: z.string().min(1).max(4096).refine((p) => p.startsWith('/') && !p.includes('\0'), 'must be an absolute path'),
  mount_path: z.string().min(1).max(1024).refine((p) => p.startsWith('/'), 'must be an absolute path in the sandbox').nullable().optional(),
  read_only: z.boolean().optional(),
})
/**
 * Session resources exactly as the SDK's `*ResourceParams` define them, strict: an unknown key
 * is refused (naming it), so no Corral-internal field (a host `source_path`, inline bytes) can
 * come in through any transport. A `file` is named by `file_id` only: its bytes come from
 * Corral's own file store. `host_folder` is Corral's addition (above).
 */
export const sessionResourceSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('github_repository'),
    url: z.string().min(1).max(2048),
    authorization_token: z.string().max(4096).optional(),
    mount_path: z.string().max(1024).nullable().optional(),
    checkout: z
      .discriminatedUnion('type', [
        z.strictObject({ type: z.literal('branch'), name: z.string().min(1).max(256) }),
        z.strictObject({ type: z.literal('commit'), sha: z.string().regex(/^[0-9a-fA-F]{4,64}$/, 'a hexadecimal commit id') }),
      ])
      .nullable()
      .optional(),
  }),
  z.strictObject({ type: z.literal('file'), file_id: z.string().min(1).max(256), mount_path: z.string().max(1024).nullable().optional() }),
  z.strictObject({
    type: z.literal('memory_store'),
    memory_store_id: z.string().min(1).max(128),
    access: z.enum(['read_write', 'read_only']).nullable().optional(),
    instructions: z.string().max(4096).nullable().optional(),
  }),
  hostFolderResourceSchema,
])
export const sessionCreateSchema = z.strictObject({
  agent: agentRefSchema,
  environment_id: z.string().min(1).max(128),
  budget: budgetSchema.optional(),
  initial_events: z.array(z.discriminatedUnion('type', [userMessageSchema, userDefineOutcomeSchema])).max(100).optional(),
  metadata: metadataSchema.optional(),
  resources: z.array(sessionResourceSchema).max(32).optional(),
  title: z.string().max(512).nullable().optional(),
  vault_ids: z.array(z.string().min(1).max(128)).max(16).optional(),
})
export const sessionUpdateSchema = z.strictObject({
  /** Mid-session agent update: only tools and mcp_servers, each a full replacement. */
  agent: z.strictObject({ tools: z.array(agentToolSchema).max(128).optional(), mcp_servers: z.array(mcpServerSchema).max(32).optional() }).optional(),
  budget: budgetSchema.nullable().optional(),
  metadata: metadataPatchSchema.nullable().optional(),
  title: z.string().max(512).nullable().optional(),
  vault_ids: z.array(z.string().min(1).max(128)).max(16).optional(),
})

// ---------- list queries ----------
export const boolString = z.enum(['true', 'false']).transform((v) => v === 'true')
export const limitSchema = z.coerce.number().int().min(1).max(1000)
export const isoDate = z.iso.datetime({ offset: true })
export const pageQuerySchema = z.strictObject({
  limit: limitSchema.optional(),
  page: z.string().max(512).optional(),
})
export const listQuerySchema = pageQuerySchema.extend({
  include_archived: boolString.optional(),
  'created_at[gt]': isoDate.optional(),
  'created_at[gte]': isoDate.optional(),
  'created_at[lt]': isoDate.optional(),
  'created_at[lte]': isoDate.optional(),
  order: z.enum(['asc', 'desc']).optional(),
})
export const SESSION_STATUSES = ['rescheduling', 'running', 'idle', 'terminated'] as const
export const sessionListQuerySchema = listQuerySchema.extend({
  agent_id: z.string().max(128).optional(),
  agent_version: z.coerce.number().int().positive().optional(),
  statuses: z.array(z.enum(SESSION_STATUSES)).optional(),
  deployment_id: z.string().max(128).optional(),
  memory_store_id: z.string().max(128).optional(),
})
export const eventListQuerySchema = pageQuerySchema.extend({
  order: z.enum(['asc', 'desc']).optional(),
  types: z.array(z.string().min(1).max(64)).max(64).optional(),
  'created_at[gt]': isoDate.optional(),
  'created_at[gte]': isoDate.optional(),
  'created_at[lt]': isoDate.optional(),
  'created_at[lte]': isoDate.optional(),
})
export const agentRetrieveQuerySchema = z.strictObject({ version: z.coerce.number().int().positive().optional() })
/** For routes that take no query parameters: an unknown one is an error, not silently ignored. */
export const emptyQuerySchema = z.strictObject({})

/** Turns a zod error into one message naming each field and the rule it broke. */
export function describeZodError(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const path = i.path.length ? i.path.map((p) => (typeof p === 'number' ? `[${p}]` : String(p))).join('.').replace(/\.\[/g, '[') : '(top level)'
      return `${path}: ${i.message}`
    })
    .join('; ')
}

// ---------- vaults and credentials ----------
// Secret fields (token, access_token, refresh_token, client_secret, secret_value) are validated
// here and then handed to a SecretSink; they never reach the database or a response.
const SECRET_MAX = 16_384
const secretSchema = z.string().min(1, 'must not be empty').max(SECRET_MAX, `at most ${SECRET_MAX} characters`)
const httpsUrl = z.url({ protocol: /^https?$/ }).max(2048)
const futureDate = z.iso
  .datetime({ offset: true })
  .refine((v) => Date.parse(v) > Date.now(), 'must be in the future')
const credentialHostSchema = z
  .string()
  .min(1)
  .max(253)
  .regex(
    /^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/,
    'a bare host name, an IPv4 address or a *. wildcard (no URL, port, path or IPv6)',
  )
const credentialNetworkingSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('unrestricted') }),
  z.strictObject({ type: z.literal('limited'), allowed_hosts: z.array(credentialHostSchema).min(1).max(16) }),
])
const tokenEndpointAuthSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('none') }),
  z.strictObject({ type: z.literal('client_secret_basic'), client_secret: secretSchema }),
  z.strictObject({ type: z.literal('client_secret_post'), client_secret: secretSchema }),
])
const envVarName = z.string().min(1).max(256).regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name: letters, digits and _, not starting with a digit')
const injectionLocationSchema = z.strictObject({ body: z.boolean().optional(), header: z.boolean().optional() })

export const credentialAuthCreateSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('static_bearer'), token: secretSchema, mcp_server_url: httpsUrl }),
  z.strictObject({
    type: z.literal('mcp_oauth'),
    access_token: secretSchema,
    mcp_server_url: httpsUrl,
    expires_at: futureDate.nullable().optional(),
    refresh: z
      .strictObject({
        client_id: z.string().min(1).max(1024),
        refresh_token: secretSchema,
        token_endpoint: httpsUrl,
        token_endpoint_auth: tokenEndpointAuthSchema,
        resource: z.string().max(2048).nullable().optional(),
        scope: z.string().max(4096).nullable().optional(),
      })
      .nullable()
      .optional(),
  }),
  z.strictObject({
    type: z.literal('environment_variable'),
    secret_name: envVarName,
    secret_value: secretSchema,
    networking: credentialNetworkingSchema,
    injection_location: injectionLocationSchema
      .refine((l) => l.body !== false || l.header !== false, 'at least one of body and header must be enabled')
      .optional(),
  }),
])
export const credentialAuthUpdateSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('static_bearer'), token: secretSchema.nullable().optional() }),
  z.strictObject({
    type: z.literal('mcp_oauth'),
    access_token: secretSchema.nullable().optional(),
    expires_at: futureDate.nullable().optional(),
    refresh: z
      .strictObject({
        refresh_token: secretSchema.nullable().optional(),
        scope: z.string().max(4096).nullable().optional(),
        token_endpoint_auth: z
          .discriminatedUnion('type', [
            z.strictObject({ type: z.literal('client_secret_basic'), client_secret: secretSchema.nullable().optional() }),
            z.strictObject({ type: z.literal('client_secret_post'), client_secret: secretSchema.nullable().optional() }),
          ])
          .optional(),
      })
      .nullable()
      .optional(),
  }),
  z.strictObject({
    type: z.literal('environment_variable'),
    secret_value: secretSchema.nullable().optional(),
    networking: credentialNetworkingSchema.nullable().optional(),
    injection_location: injectionLocationSchema.optional(),
  }),
])
const displayName = z.string().min(1, 'must not be empty').max(255, 'at most 255 characters')
export const vaultCreateSchema = z.strictObject({ display_name: displayName, metadata: metadataSchema.optional() })
export const vaultUpdateSchema = z.strictObject({ display_name: displayName.nullable().optional(), metadata: metadataPatchSchema.nullable().optional() })
/** A credential's metadata: free-form, except the Corral key `corral.plain_http_hosts` (see plain-http-hosts.ts). */
const plainHttpHostsRule = (m: Record<string, string | null>, ctx: z.RefinementCtx) => {
  const v = m[PLAIN_HTTP_HOSTS_KEY]
  if (typeof v !== 'string') return
  const r = parsePlainHttpHosts(v)
  if ('problem' in r) ctx.addIssue({ code: 'custom', path: [PLAIN_HTTP_HOSTS_KEY], message: `a comma-separated list of host or host:port entries where the credential may be injected over plain HTTP: ${r.problem}` })
}
export const credentialCreateSchema = z.strictObject({
  auth: credentialAuthCreateSchema,
  display_name: z.string().max(255, 'at most 255 characters').nullable().optional(),
  metadata: metadataSchema.superRefine(plainHttpHostsRule).optional(),
})
export const credentialUpdateSchema = z.strictObject({
  auth: credentialAuthUpdateSchema.optional(),
  display_name: z.string().max(255, 'at most 255 characters').nullable().optional(),
  metadata: metadataPatchSchema.superRefine(plainHttpHostsRule).nullable().optional(),
})
export const includeArchivedQuerySchema = pageQuerySchema.extend({ include_archived: boolString.optional() })

// ---------- threads ----------
export const THREAD_STATUSES = ['running', 'idle', 'rescheduling', 'terminated'] as const
export const threadListQuerySchema = pageQuerySchema.extend({ statuses: z.array(z.enum(THREAD_STATUSES)).optional() })

// ---------- Corral additions: settings ----------
/**
 * `POST /v1/corral/settings`. `api_key` is write-only: it goes to the OS keychain and is never
 * returned; null removes it. Other fields go to settings.json.
 */
export const corralSettingsUpdateSchema = z.strictObject({
  model: z
    .strictObject({
      base_url: z.url({ protocol: /^https?$/ }).nullable().optional(),
      compatibility_mode: z.boolean().optional(),
      default_model: z.string().min(1).max(256).nullable().optional(),
    })
    .optional(),
  sandbox_backend: z.enum(['auto', 'docker', 'vm', 'bubblewrap']).optional(),
  /**
   * The user's entries of the advisor tier table (advisor-tiers.ts): model id → tier, laid over
   * the built-in table. Replaces the whole user table; null (or {}) removes it.
   */
  advisor_tiers: z.record(z.string().min(1).max(256), z.number().int('a whole tier number').min(0).max(1000)).refine((t) => Object.keys(t).length <= 256, 'at most 256 models').nullable().optional(),
  /** The files API's size cap in bytes (1 KiB – 64 GiB); null restores the default (500 MiB). */
  max_file_bytes: z.number().int('a whole number of bytes').min(1024).max(64 * 1024 ** 3).nullable().optional(),
  /** The budget the desktop's new-session dialog starts with (a session's budget shape); null removes it. API clients are not affected. */
  default_budget: budgetSchema.nullable().optional(),
  /** How long a dream may run, in minutes from its creation (up to a week); null restores the default (60). Running dreams are held to a new limit at once. */
  dream_time_limit_minutes: z.number().positive('a positive number of minutes').max(MAX_DREAM_TIME_LIMIT_MINUTES, `at most a week (${MAX_DREAM_TIME_LIMIT_MINUTES} minutes)`).nullable().optional(),
  api_key: z.string().min(8, 'an API key is at least 8 characters').max(4096).regex(/^\S+$/, 'no whitespace').nullable().optional(),
})

/**
 * `POST /v1/corral/model/test` (Test connection): one real minimal request to the endpoint. Each
 * field overrides the saved one for this test only (the form's values before saving); an absent
 * field uses what is in effect; `base_url: null` (an empty field) means no URL in the settings, so
 * ANTHROPIC_BASE_URL when the engine's environment sets it, else Anthropic's API. `api_key` is used
 * for the request and never stored or returned.
 */
export const corralModelTestSchema = z.strictObject({
  base_url: z.url({ protocol: /^https?$/ }).nullable().optional(),
  compatibility_mode: z.boolean().optional(),
  model: z.string().min(1).max(256).nullable().optional(),
  api_key: z.string().min(8, 'an API key is at least 8 characters').max(4096).regex(/^\S+$/, 'no whitespace').optional(),
})

// ---------- files and session resources (spec resources.md §8, §9) ----------
/** Uploads: the multipart fields besides the `file` part. */
export const fileUploadFieldsSchema = z.strictObject({
  expires_in_seconds: z.coerce.number().int('a whole number of seconds').min(3600).max(7_776_000).optional(),
})
/** `GET /v1/files`: `ids[]` (or repeated `ids`) is one page of those files and takes no page or limit. */
export const fileListQuerySchema = pageQuerySchema.extend({
  scope_id: z.string().min(1).max(128).optional(),
  ids: z.array(z.string().min(1).max(128)).optional(),
})
/** `POST /v1/sessions/{id}/resources`: only files can be added to a live session. */
export const sessionResourceAddSchema = z.strictObject({
  type: z.literal('file'),
  file_id: z.string().min(1).max(128),
  mount_path: z.string().min(1).max(4096).nullable().optional(),
})
/** `POST /v1/sessions/{id}/resources/{rid}`: a repository's token rotation. */
export const sessionResourceUpdateSchema = z.strictObject({
  authorization_token: z.string().min(1).max(4096),
})

// ---------- the work queue of self_hosted environments (spec resources.md §2) ----------
export const workPollQuerySchema = z.strictObject({
  block_ms: z.coerce.number().int('a whole number of milliseconds').min(1, 'must be 1 to 999 (omit it to return at once)').max(999, 'must be 1 to 999').optional(),
  reclaim_older_than_ms: z.coerce.number().int('a whole number of milliseconds').min(0).max(86_400_000).optional(),
})
export const workHeartbeatQuerySchema = z.strictObject({
  expected_last_heartbeat: z.string().max(128).optional(),
  desired_ttl_seconds: z.coerce.number().positive().max(86_400).optional(),
})
export const workStopSchema = z.strictObject({ force: z.boolean().optional() })
export const workUpdateSchema = z.strictObject({ metadata: metadataPatchSchema })
export const workListQuerySchema = z.strictObject({ limit: limitSchema.optional(), page: z.string().max(512).optional() })
