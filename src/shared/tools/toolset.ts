/**
 * The toolset (agent_toolset_20260401): ONE definition per tool, from which everything else is
 * derived (DESIGN invariant 7, "what Corral offers is what it runs"):
 *
 * - the schema and description offered to the model (`toolsetModelDefinition`, used by the harness
 *   through the hands' index),
 * - the host's validation of every call before it reaches a sandbox (`parseToolsetInput`, in the
 *   hands' router): an unknown or missing field is a tool error naming the field and the rule,
 * - the fields the sandbox runner reads (`toolsetFields`; resources/sandbox/runner.js declares the
 *   same lists in TOOL_INPUTS and a unit test checks that they and the runner's reads agree),
 * - the renderer's agent editor (its tool rows, which tools a new agent lets run unasked: `readOnly`)
 *   and tool cards (each call's one-line `summary`), through `TOOLSET_ENTRIES` (which adds web_search).
 *
 * Field names are the ones a Claude model knows from Claude Code (`file_path`, `old_string`,
 * `new_string`, `replace_all`, `offset`, `limit`, `pattern`, `path`, `glob`, `-i`, `command`,
 * `timeout`). It lives in src/shared because the renderer may not import src/main; the hands own
 * how a call runs (src/main/hands/toolset/).
 *
 * `web_search` is not here: it is the model endpoint's own server tool (see the harness).
 */
import { z } from 'zod'

/** Default cap on one result's text (the environment's `config.corral.output_cap_bytes`). */
export const DEFAULT_OUTPUT_CAP_BYTES = 256 * 1024
/** Longest bash timeout a call may ask for (the runner's limit), in ms. */
export const MAX_BASH_TIMEOUT_MS = 60 * 60 * 1000
/** Largest response body web_fetch downloads before it refuses the page. */
export const WEB_FETCH_MAX_BODY_BYTES = 5 * 1024 * 1024

const CAP_NOTE =
  'Output longer than the output cap (256 KiB unless the environment sets output_cap_bytes) is cut to its first and last parts; the whole output is saved in the sandbox and the result names the file, which you can then read with offset/limit or search with grep.'
const PATHS = 'Paths are absolute (inside /workspace or another sandbox root) or relative to /workspace.'

const filePath = z.string().min(1).describe(`The file to operate on. ${PATHS}`)
const lineNumber = (max: number) => z.number().int().min(1).max(max)

const bash = z.strictObject({
  command: z.string().min(1).optional().describe('The bash command to run. Required unless restart is true.'),
  timeout: lineNumber(MAX_BASH_TIMEOUT_MS)
    .optional()
    .describe(`Timeout in milliseconds (default 120000, or the environment's bash_timeout_ms; at most ${MAX_BASH_TIMEOUT_MS}). The command's processes are killed when it passes.`),
  restart: z.boolean().optional().describe('Restart the shell (a fresh shell in /workspace: cwd and environment reset) instead of running a command.'),
})

const read = z.strictObject({
  file_path: filePath,
  offset: lineNumber(Number.MAX_SAFE_INTEGER).optional().describe('The line number to start reading from (1-based). Use with limit for a large file.'),
  limit: lineNumber(Number.MAX_SAFE_INTEGER).optional().describe('How many lines to read (default: to the end of the file).'),
})

const write = z.strictObject({
  file_path: filePath,
  content: z.string().describe('The full content of the file.'),
})

const edit = z.strictObject({
  file_path: filePath,
  old_string: z.string().min(1).describe('The exact text to replace, whitespace and indentation included. It must occur exactly once unless replace_all is true.'),
  new_string: z.string().describe('The text to put in its place (must differ from old_string).'),
  replace_all: z.boolean().optional().describe('Replace every occurrence of old_string (default false).'),
})

const glob = z.strictObject({
  pattern: z.string().min(1).describe('The glob pattern to match file paths against, relative to path, e.g. "**/*.ts" or "src/*.{js,json}".'),
  path: z.string().min(1).optional().describe(`The directory to search in (default /workspace). ${PATHS}`),
})

const grep = z.strictObject({
  pattern: z.string().min(1).describe('The regular expression to search file contents for (ripgrep syntax).'),
  path: z.string().min(1).optional().describe(`The file or directory to search in (default /workspace). ${PATHS}`),
  glob: z.string().min(1).optional().describe('Only search files whose path matches this glob, e.g. "*.ts" or "src/**/*.py".'),
  '-i': z.boolean().optional().describe('Case-insensitive search (default false).'),
})

const webFetch = z.strictObject({
  url: z
    .string()
    .min(1)
    .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL')
    .describe('The http(s) URL to fetch.'),
})

/** Where a toolset tool runs: in the session's sandbox (through the runner) or on the host. */
export type ToolsetPlace = 'sandbox' | 'host'

/**
 * A toolset tool as the renderer sees it: the agent editor's row (a new agent lets `readOnly`
 * tools run without asking) and the tool card's one-line summary of a call.
 */
export interface ToolsetEntry {
  name: string
  /** Only looks (files and searches inside the sandbox): changes nothing, runs nothing, reaches no network. */
  readOnly: boolean
  /** The one line a tool card shows for a call: the command, the file, the pattern. */
  summary: (input: Record<string, unknown>) => string
}

export interface ToolsetToolSpec extends ToolsetEntry {
  description: string
  input: z.ZodObject
  place: ToolsetPlace
}

const text = (v: unknown): string => (typeof v === 'string' ? v : '')
const fileSummary = (i: Record<string, unknown>) => text(i.file_path)
const searchSummary = (i: Record<string, unknown>) => `${text(i.pattern)}${i.path ? `  in ${text(i.path)}` : ''}`

/** The toolset tools, in the order they are offered. */
export const TOOLSET: readonly ToolsetToolSpec[] = [
  {
    name: 'bash',
    readOnly: false,
    summary: (i) => (typeof i.command === 'string' ? i.command : i.restart ? 'restart the shell' : ''),
    place: 'sandbox',
    input: bash,
    description:
      'Run a bash command in the session sandbox. The shell persists between calls (cwd, exported variables, files), starts in /workspace and has no network except the environment\'s allowed hosts through Corral\'s proxy. ' +
      'Returns stdout and stderr interleaved, and the exit code when it is not 0. Prefer the read, write, edit, glob and grep tools for files; use bash for builds, tests, git and other programs. ' +
      CAP_NOTE,
    // (a command that waits for input gets end-of-file: stdin is /dev/null)
  },
  {
    name: 'read',
    readOnly: true,
    summary: fileSummary,
    place: 'sandbox',
    input: read,
    description:
      `Read a text file from the sandbox. Lines come numbered (cat -n style, 1-based); use offset and limit to read part of a large file. ${PATHS} ` +
      'A directory or a binary file is an error (list directories with glob or bash). ' +
      CAP_NOTE,
  },
  {
    name: 'write',
    readOnly: false,
    summary: fileSummary,
    place: 'sandbox',
    input: write,
    description: `Create a file, or overwrite it entirely, with the given content; parent directories are made as needed. ${PATHS} To change part of an existing file, prefer edit.`,
  },
  {
    name: 'edit',
    readOnly: false,
    summary: fileSummary,
    place: 'sandbox',
    input: edit,
    description:
      `Replace an exact string in a text file. old_string must match the file exactly (whitespace included) and occur exactly once, unless replace_all is true; add surrounding lines to make it unique. ${PATHS} Read the file first so old_string is exact.`,
  },
  {
    name: 'glob',
    readOnly: true,
    summary: searchSummary,
    place: 'sandbox',
    input: glob,
    description:
      'Find files whose path matches a glob pattern (*, **, ?, [abc], {a,b}), newest first, at most 1000. .git and node_modules are not searched. Use it to find files by name; use grep to search their contents.',
  },
  {
    name: 'grep',
    readOnly: true,
    summary: searchSummary,
    place: 'sandbox',
    input: grep,
    description:
      'Search file contents with a regular expression (ripgrep). Returns matching lines as path:line:text. Narrow the search with path and glob. ' +
      CAP_NOTE,
  },
  {
    name: 'web_fetch',
    readOnly: false,
    summary: (i) => text(i.url),
    place: 'host',
    input: webFetch,
    description:
      "Fetch a web page or file over http(s) and return its content as text (HTML is turned into readable text). Corral fetches it through the session's egress proxy, so only the hosts the environment's networking allows are reachable, and private or local addresses never are. " +
      `Bodies over ${WEB_FETCH_MAX_BODY_BYTES / (1024 * 1024)} MiB are refused; text over the output cap is cut and the whole text saved in the sandbox at the path the result names.`,
  },
]

/**
 * `web_search`: a tool of the toolset, but the model endpoint's own server-side search (see the
 * harness), so it has no schema here and no runner; the editor and the tool cards still list it.
 */
export const WEB_SEARCH_ENTRY: ToolsetEntry = { name: 'web_search', readOnly: false, summary: (i) => text(i.query) }

/** Every tool of agent_toolset_20260401, in the order the agent editor lists them: the table, then web_search. */
export const TOOLSET_ENTRIES: readonly ToolsetEntry[] = [...TOOLSET, WEB_SEARCH_ENTRY]

const entriesByName = new Map(TOOLSET_ENTRIES.map((t) => [t.name, t]))

/** The toolset entry (the table's tool or web_search) called `name`, or undefined. */
export function toolsetEntry(name: string): ToolsetEntry | undefined {
  return entriesByName.get(name)
}

const byName = new Map(TOOLSET.map((t) => [t.name, t]))

/** The toolset tool called `name`, or undefined. */
export function toolsetTool(name: string): ToolsetToolSpec | undefined {
  return byName.get(name)
}

/** The input fields a toolset tool declares, in order. */
export function toolsetFields(name: string): string[] {
  const t = byName.get(name)
  return t ? Object.keys(t.input.shape) : []
}

/** A tool as the Messages API's `tools` array carries it. */
export interface ToolsetModelDefinition {
  name: string
  description: string
  input_schema: { type: 'object'; properties: Record<string, unknown>; required?: string[]; additionalProperties: false; [k: string]: unknown }
  [k: string]: unknown
}

/** The model-facing definition of a toolset tool: its name, description and JSON Schema, derived from the table. */
export function toolsetModelDefinition(tool: ToolsetToolSpec): ToolsetModelDefinition {
  const { $schema: _s, ...schema } = z.toJSONSchema(tool.input) as Record<string, unknown>
  const properties = schema.properties as Record<string, Record<string, unknown>>
  // zod writes Number.MAX_SAFE_INTEGER as an integer's maximum; a model needs no such bound.
  for (const p of Object.values(properties)) if (p.maximum === Number.MAX_SAFE_INTEGER) delete p.maximum
  return {
    name: tool.name,
    description: tool.description,
    input_schema: { type: 'object', properties, ...(Array.isArray(schema.required) && schema.required.length ? { required: schema.required as string[] } : {}), additionalProperties: false },
  }
}

/** What the model is offered for each toolset tool (agent_toolset_20260401), by name. */
export const TOOLSET_DEFINITIONS: Readonly<Record<string, ToolsetModelDefinition>> = Object.fromEntries(TOOLSET.map((t) => [t.name, toolsetModelDefinition(t)]))

export type ToolsetInputResult = { ok: true; input: Record<string, unknown> } | { ok: false; message: string }

/**
 * Checks a call's input against the tool's definition. Returns the validated input with only the
 * declared fields, or a message naming each bad field and the rule it breaks, e.g.
 * `read: unknown field "path" (read takes file_path, offset, limit)` or
 * `write: file_path is required (a string)`.
 */
export function parseToolsetInput(name: string, input: unknown): ToolsetInputResult {
  const tool = byName.get(name)
  if (!tool) return { ok: false, message: `unknown toolset tool "${name}" (the toolset has ${TOOLSET.map((t) => t.name).join(', ')})` }
  const fields = Object.keys(tool.input.shape)
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return { ok: false, message: `${name}: the input must be an object with the fields ${fields.join(', ')}` }
  const r = tool.input.safeParse(input)
  if (r.success) {
    if (name === 'bash' && r.data.restart !== true && r.data.command === undefined) return { ok: false, message: 'bash: command is required (a non-empty string) unless restart is true' }
    return { ok: true, input: r.data as Record<string, unknown> }
  }
  const problems: string[] = []
  for (const issue of r.error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) problems.push(`unknown field ${JSON.stringify(k)} (${name} takes ${fields.join(', ')})`)
      continue
    }
    const field = issue.path.map(String).join('.')
    const value = issue.path.length ? (input as Record<string, unknown>)[String(issue.path[0])] : input
    const expected = describeField(tool.input.shape[String(issue.path[0])] as z.ZodType | undefined)
    if (value === undefined) problems.push(`${field} is required (${expected})`)
    else if (issue.code === 'custom') problems.push(`${field} ${issue.message}`)
    else problems.push(`${field} must be ${expected}, got ${JSON.stringify(value)?.slice(0, 80)}`)
  }
  return { ok: false, message: `${name}: ${problems.join('; ')}` }
}

function describeField(t: z.ZodType | undefined): string {
  if (!t) return 'a known field'
  const s = z.toJSONSchema(t) as { type?: string; minimum?: number; maximum?: number; minLength?: number }
  if (s.type === 'string') return s.minLength ? 'a non-empty string' : 'a string'
  if (s.type === 'integer') {
    const max = s.maximum !== undefined && s.maximum < Number.MAX_SAFE_INTEGER ? ` and at most ${s.maximum}` : ''
    return `an integer${s.minimum !== undefined ? ` of at least ${s.minimum}` : ''}${max}`
  }
  if (s.type === 'boolean') return 'true or false'
  return s.type ? `a ${s.type}` : 'a valid value'
}
