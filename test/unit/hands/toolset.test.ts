import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { SANDBOX_TOOLS, TOOLSET_DEFINITIONS } from '../../../src/main/hands/toolset'
import { modelTools } from '../../../src/main/harness/tools'
import { parseToolsetInput, TOOLSET, toolsetFields } from '../../../src/shared/tools/toolset'
import { toolUseViolations } from '../../support/model-server'

// The runner is plain JavaScript copied into the sandbox image; its source is the thing under test.
const RUNNER = readFileSync(new URL('../../../resources/sandbox/runner.js', import.meta.url), 'utf8')

/** The runner's TOOL_INPUTS table, read from its source. */
function runnerToolInputs(): Record<string, string[]> {
  const m = /const TOOL_INPUTS = (\{[\s\S]*?\n\})/.exec(RUNNER)
  if (!m) throw new Error('runner.js has no TOOL_INPUTS table')
  return new Function(`return ${m[1]}`)() as Record<string, string[]>
}

/** The body of the function (or method) whose declaration starts with `signature`. */
function bodyOf(signature: string): string {
  const at = RUNNER.indexOf(signature)
  if (at === -1) throw new Error(`runner.js has no ${signature}`)
  const open = RUNNER.indexOf('{', RUNNER.indexOf(')', at))
  let depth = 0
  for (let i = open; i < RUNNER.length; i++) {
    if (RUNNER[i] === '{') depth++
    else if (RUNNER[i] === '}' && --depth === 0) return RUNNER.slice(open + 1, i)
  }
  throw new Error(`unbalanced braces after ${signature}`)
}

const TOOL_FUNCTIONS: Record<string, string> = {
  bash: 'async runNow(id, input,',
  read: 'async function readTool(input)',
  write: 'function writeTool(input)',
  edit: 'function editTool(input)',
  glob: 'async function globTool(input)',
  grep: 'function grepTool(id, input,',
}

describe('the toolset table', () => {
  it('offers every toolset tool with Claude Code field names and a description', () => {
    expect(Object.keys(TOOLSET_DEFINITIONS)).toEqual(['bash', 'read', 'write', 'edit', 'glob', 'grep', 'web_fetch'])
    expect(toolsetFields('read')).toEqual(['file_path', 'offset', 'limit'])
    expect(toolsetFields('write')).toEqual(['file_path', 'content'])
    expect(toolsetFields('edit')).toEqual(['file_path', 'old_string', 'new_string', 'replace_all'])
    expect(toolsetFields('grep')).toEqual(['pattern', 'path', 'glob', '-i'])
    expect(toolsetFields('bash')).toEqual(['command', 'timeout', 'restart'])
    for (const d of Object.values(TOOLSET_DEFINITIONS)) {
      expect(d.description.length).toBeGreaterThan(80)
      expect(d.input_schema).toMatchObject({ type: 'object', additionalProperties: false })
      for (const p of Object.values(d.input_schema.properties)) expect((p as { description?: string }).description).toBeTruthy()
    }
    expect(TOOLSET_DEFINITIONS.read.description).toMatch(/\/workspace/)
    expect(TOOLSET_DEFINITIONS.bash.description).toMatch(/saved in the sandbox/)
  })

  it('is what the harness offers the model for an agent with the toolset', () => {
    const offered = modelTools([{ type: 'agent_toolset_20260401' }])
    for (const t of TOOLSET) expect(offered.find((o) => o.name === t.name)).toEqual(TOOLSET_DEFINITIONS[t.name])
  })

  it('offers schemas whose JSON Schema accepts exactly what the host accepts', () => {
    const samples: [string, Record<string, unknown>][] = [
      ['read', { file_path: 'a.txt', offset: 2, limit: 3 }],
      ['read', { path: 'a.txt' }],
      ['read', { file_path: 'a.txt', view_range: [1, 2] }],
      ['read', { file_path: 'a.txt', offset: 0 }],
      ['write', { file_path: 'a', content: 'x' }],
      ['write', { file_path: 'a' }],
      ['edit', { file_path: 'a', old_string: 'x', new_string: 'y', replace_all: 'yes' }],
      ['grep', { pattern: 'x', '-i': true, glob: '*.ts' }],
      ['bash', { command: 'ls', timeout: 1000 }],
      ['bash', { command: 'ls', timeout_ms: 1000 }],
      ['web_fetch', { url: 'http://example.com/' }],
    ]
    for (const [name, input] of samples) {
      const schemaOk = z.fromJSONSchema(TOOLSET_DEFINITIONS[name].input_schema as Parameters<typeof z.fromJSONSchema>[0]).safeParse(input).success
      expect({ name, input, ok: parseToolsetInput(name, input).ok }).toEqual({ name, input, ok: schemaOk })
    }
  })

  it('names the field and the rule when a call breaks its schema', () => {
    expect(parseToolsetInput('read', { path: 'a.txt' })).toEqual({ ok: false, message: 'read: file_path is required (a non-empty string); unknown field "path" (read takes file_path, offset, limit)' })
    expect(parseToolsetInput('write', { file_path: 'a', content: 3 })).toEqual({ ok: false, message: 'write: content must be a string, got 3' })
    expect(parseToolsetInput('bash', { command: 'ls', timeout: 0 })).toEqual({ ok: false, message: 'bash: timeout must be an integer of at least 1 and at most 3600000, got 0' })
    expect(parseToolsetInput('bash', {})).toEqual({ ok: false, message: 'bash: command is required (a non-empty string) unless restart is true' })
    expect(parseToolsetInput('web_fetch', { url: 'file:///etc/passwd' })).toEqual({ ok: false, message: 'web_fetch: url must be an http:// or https:// URL' })
  })

  it('returns only the declared fields of a valid call', () => {
    expect(parseToolsetInput('edit', { file_path: 'a', old_string: 'x', new_string: 'y' })).toEqual({ ok: true, input: { file_path: 'a', old_string: 'x', new_string: 'y' } })
  })
})

describe('the sandbox runner', () => {
  it('declares for each sandbox tool exactly the fields of the toolset table', () => {
    const inputs = runnerToolInputs()
    expect(Object.keys(inputs).sort()).toEqual([...SANDBOX_TOOLS].sort())
    for (const name of SANDBOX_TOOLS) expect({ name, fields: inputs[name] }).toEqual({ name, fields: toolsetFields(name) })
  })

  it('reads in each tool exactly the fields the table declares, and the input no other way', () => {
    for (const name of SANDBOX_TOOLS) {
      const body = bodyOf(TOOL_FUNCTIONS[name]!)
      const read = new Set<string>()
      for (const m of body.matchAll(/\binput(?:\.([A-Za-z_$][\w$]*)|\[(['"])([^'"]+)\2\])/g)) read.add(m[1] ?? m[3]!)
      expect({ name, reads: [...read].sort() }).toEqual({ name, reads: toolsetFields(name).sort() })
      // No destructuring, aliasing, spreading or computed access that the scan above would miss.
      const other = [...body.matchAll(/\binput\b(?!\.[A-Za-z_$]|\[['"])/g)]
      expect({ name, otherUses: other.length }).toEqual({ name, otherUses: 0 })
    }
  })
})

describe('the scripted model server', () => {
  const tools = Object.values(TOOLSET_DEFINITIONS)

  it('accepts a call built from the offered schema', () => {
    expect(toolUseViolations(tools, 'write', { file_path: '/workspace/a.txt', content: 'x' })).toEqual([])
  })

  it('reports a call of a tool that is not offered', () => {
    expect(toolUseViolations(tools, 'computer', {})).toEqual([expect.stringContaining('tool "computer" is not offered')])
  })

  it('reports a missing required field, an unknown property and a wrong type', () => {
    expect(toolUseViolations(tools, 'read', { path: 'a.txt' })).toEqual([expect.stringMatching(/^read: file_path: .*expected string/), expect.stringMatching(/^read: \(input\): Unrecognized key: "path"/)])
    expect(toolUseViolations([{ name: 'loose', input_schema: { type: 'object', properties: { a: { type: 'string' } } } }], 'loose', { b: 1 })).toEqual([expect.stringContaining('property "b" is not in the offered schema')])
    expect(toolUseViolations(tools, 'bash', { command: 3 })).toEqual([expect.stringContaining('bash: command:')])
  })
})
