import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic, { toFile } from '@anthropic-ai/sdk'
import { extractSkillArchive } from '@anthropic-ai/sdk/tools/agent-toolset/skills'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, createReadStream, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startApiServer, type TestApiServer } from '../support/api-server'

let t: TestApiServer
let client: Anthropic
const scratch = mkdtempSync(join(tmpdir(), 'corral-skills-'))

beforeAll(async () => {
  t = await startApiServer({ harness: { enabled: false } })
  client = t.client
})
afterAll(async () => {
  await t.close()
  rmSync(scratch, { recursive: true, force: true })
})

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

const errorOf = async (p: Promise<unknown>) => {
  const err = (await p.catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>
  expect(err).toBeInstanceOf(Anthropic.APIError)
  return { status: err.status, ...(err.error as { error: { type: string; message: string } }).error }
}

const manifest = (fm: string, body = 'Read scripts/run.py first.\n') => `---\n${fm}\n---\n\n# Instructions\n\n${body}`
const file = (path: string, text: string) => toFile(Buffer.from(text), path)

/** Uploads a skill folder `name` whose SKILL.md has the given frontmatter, plus `extra` files. */
async function skillFiles(folder: string, fm: string, extra: Record<string, string> = {}) {
  return Promise.all([file(`${folder}/SKILL.md`, manifest(fm)), ...Object.entries(extra).map(([p, text]) => file(`${folder}/${p}`, text))])
}

/** Every blob under <dataDir>/skills (the skills' content-addressed store), without its staging folder. */
function blobs(): string[] {
  const root = join(t.dataDir, 'skills')
  if (!existsSync(root)) return []
  return readdirSync(root, { withFileTypes: true })
    .filter((d) => d.isDirectory() && d.name !== 'tmp')
    .flatMap((d) => readdirSync(join(root, d.name)).map((f) => d.name + f))
    .sort()
}

describe('skills through the official SDK', () => {
  it('has a test here for every method the SDK has on skills and skill versions', () => {
    const methods = (o: object) => Object.getOwnPropertyNames(Object.getPrototypeOf(o)).filter((n) => n !== 'constructor').sort()
    // When the SDK grows a method, this fails until a test for it is added below.
    expect(methods(client.beta.skills)).toEqual(['create', 'delete', 'list', 'retrieve'])
    expect(methods(client.beta.skills.versions)).toEqual(['create', 'delete', 'download', 'list', 'retrieve'])
  })

  it('creates a skill from a folder upload, naming it from the frontmatter, and retrieves it and its latest version', async () => {
    const files = await skillFiles('pdf-tools', 'name: pdf-tools\ndescription: Fill and merge PDF forms. Use when the user gives you a PDF.', { 'scripts/run.py': 'print("hi")\n', 'reference/forms.md': '# Forms\n' })
    const skill = await client.beta.skills.create({ files })
    expect(skill).toMatchObject({ type: 'skill', display_name: 'pdf-tools', source: { type: 'custom' } })
    expect(skill.id).toMatch(/^skill_/)
    expect(skill.latest_version_id).toMatch(/^\d{16}$/)
    expect(Date.parse(skill.created_at)).not.toBeNaN()
    expect(skill.updated_at).toBe(skill.created_at)
    expect(await client.beta.skills.retrieve(skill.id)).toEqual(skill)
    const latest = await client.beta.skills.versions.retrieve('latest', { skill_id: skill.id })
    expect(latest).toEqual({
      id: skill.latest_version_id,
      type: 'skill_version',
      skill_id: skill.id,
      name: 'pdf-tools',
      description: 'Fill and merge PDF forms. Use when the user gives you a PDF.',
      created_at: skill.created_at,
    })
    expect(await client.beta.skills.versions.retrieve(latest.id, { skill_id: skill.id })).toEqual(latest)
  })

  it('takes display_name when given, else the frontmatter name, else the folder name', async () => {
    const named = await client.beta.skills.create({ files: await skillFiles('csv-helper', 'name: csv-helper\ndescription: CSV work'), display_name: 'CSV helper (team)' })
    expect(named.display_name).toBe('CSV helper (team)')
    const fromFolder = await client.beta.skills.create({ files: await skillFiles('folder-named', 'description: no name key here') })
    expect(fromFolder.display_name).toBe('folder-named')
    expect((await client.beta.skills.versions.retrieve('latest', { skill_id: fromFolder.id })).name).toBe('folder-named')
    const e = await errorOf(client.beta.skills.create({ files: await skillFiles('two-lines', 'description: x'), display_name: 'a\nb' }))
    expect(e).toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringMatching(/display_name: a single line/) })
  })

  it('accepts files opened from disk, whose names are absolute paths, taking the folder of SKILL.md', async () => {
    const dir = join(scratch, 'disk', 'from-disk')
    mkdirSync(join(dir, 'scripts'), { recursive: true })
    writeFileSync(join(dir, 'SKILL.md'), manifest('name: from-disk\ndescription: read from disk'))
    writeFileSync(join(dir, 'scripts', 'a.sh'), 'echo a\n')
    const skill = await client.beta.skills.create({ files: [createReadStream(join(dir, 'SKILL.md')), createReadStream(join(dir, 'scripts', 'a.sh'))] })
    const res = await client.beta.skills.versions.download(skill.latest_version_id, { skill_id: skill.id })
    const dest = join(scratch, 'out-disk')
    mkdirSync(dest)
    await extractSkillArchive(res, dest)
    expect(readFileSync(join(dest, 'scripts', 'a.sh'), 'utf8')).toBe('echo a\n')
  })

  it('downloads a version as a zip that the SDK worker extracts into the skill folder, byte for byte', async () => {
    const script = 'import sys\nprint(sys.argv)\n'
    const binary = Buffer.from([0, 1, 2, 255, 254, 10, 13])
    const files = [...(await skillFiles('zip-check', 'name: zip-check\ndescription: zip', { 'scripts/run.py': script, 'a/b/c/deep.txt': 'deep\n' })), await toFile(binary, 'zip-check/data.bin')]
    const skill = await client.beta.skills.create({ files })
    const res = await client.beta.skills.versions.download('latest', { skill_id: skill.id })
    expect(res.headers.get('content-type')).toBe('application/zip')
    expect(res.headers.get('content-disposition')).toContain('zip-check.zip')
    const bytes = Buffer.from(await res.clone().arrayBuffer())
    expect(bytes.subarray(0, 4)).toEqual(Buffer.from('PK\x03\x04', 'latin1'))
    const dest = join(scratch, 'zip-check')
    mkdirSync(dest)
    await extractSkillArchive(res, dest)
    expect(readFileSync(join(dest, 'SKILL.md'), 'utf8')).toContain('name: zip-check')
    expect(readFileSync(join(dest, 'scripts', 'run.py'), 'utf8')).toBe(script)
    expect(readFileSync(join(dest, 'a', 'b', 'c', 'deep.txt'), 'utf8')).toBe('deep\n')
    expect(readFileSync(join(dest, 'data.bin'))).toEqual(binary)
    expect(statSync(join(dest, 'scripts', 'run.py')).mode & 0o777).toBe(0o644)
    // the same version downloads as the same bytes
    const again = Buffer.from(await (await client.beta.skills.versions.download(skill.latest_version_id, { skill_id: skill.id })).arrayBuffer())
    expect(again).toEqual(bytes)
  })

  it('adds versions that become latest, keeps the name of the first, lists them newest first page by page', async () => {
    const skill = await client.beta.skills.create({ files: await skillFiles('versioned', 'name: versioned\ndescription: v1') })
    const v2 = await client.beta.skills.versions.create(skill.id, { files: await skillFiles('versioned', 'name: versioned\ndescription: v2') })
    const v3 = await client.beta.skills.versions.create(skill.id, { files: await skillFiles('any-folder', 'name: versioned\ndescription: v3') })
    expect(v2).toMatchObject({ type: 'skill_version', skill_id: skill.id, name: 'versioned', description: 'v2' })
    expect(BigInt(v3.id)).toBeGreaterThan(BigInt(v2.id))
    expect(BigInt(v2.id)).toBeGreaterThan(BigInt(skill.latest_version_id))
    const now = await client.beta.skills.retrieve(skill.id)
    expect(now.latest_version_id).toBe(v3.id)
    expect(Date.parse(now.updated_at)).toBeGreaterThanOrEqual(Date.parse(skill.updated_at))
    expect((await client.beta.skills.versions.retrieve('latest', { skill_id: skill.id })).description).toBe('v3')
    const first = await client.beta.skills.versions.list(skill.id, { limit: 2 })
    expect(first.data.map((v) => v.description)).toEqual(['v3', 'v2'])
    expect(first.hasNextPage()).toBe(true)
    expect((await all(client.beta.skills.versions.list(skill.id, { limit: 1 }))).map((v) => v.description)).toEqual(['v3', 'v2', 'v1'])
    const renamed = await errorOf(client.beta.skills.versions.create(skill.id, { files: await skillFiles('other', 'name: other-name\ndescription: v4') }))
    expect(renamed).toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringMatching(/"other-name" but skill .* is "versioned"/) })
  })

  it('lists skills newest first with limit and page, by source: custom lists them, anthropic none', async () => {
    const a = await client.beta.skills.create({ files: await skillFiles('list-a', 'description: a') })
    const b = await client.beta.skills.create({ files: await skillFiles('list-b', 'description: b') })
    const page = await client.beta.skills.list({ limit: 2 })
    expect(page.data.map((s) => s.id)).toEqual([b.id, a.id])
    const everything = (await all(client.beta.skills.list({ limit: 3 }))).map((s) => s.id)
    expect(everything.slice(0, 2)).toEqual([b.id, a.id])
    expect(new Set(everything).size).toBe(everything.length)
    expect((await all(client.beta.skills.list({ source: 'custom' }))).map((s) => s.id)).toEqual(everything)
    expect((await client.beta.skills.list({ source: 'anthropic' })).data).toEqual([])
    const bad = await errorOf(client.beta.skills.list({ source: 'plugin' }))
    expect(bad).toMatchObject({ status: 400, message: expect.stringMatching(/source/) })
    const badPage = await errorOf(client.beta.skills.list({ page: 'nope' }))
    expect(badPage).toMatchObject({ status: 400, message: expect.stringMatching(/page/) })
  })

  it('deletes a skill only after its versions, moving latest to the newest version left, and collects unshared bytes', async () => {
    const start = blobs()
    const skill = await client.beta.skills.create({ files: await skillFiles('deletable', 'name: deletable\ndescription: one', { 'shared.txt': 'same in both' }) })
    const v2 = await client.beta.skills.versions.create(skill.id, { files: await skillFiles('deletable', 'name: deletable\ndescription: two', { 'shared.txt': 'same in both' }) })
    // two SKILL.md contents and one shared file
    expect(blobs().filter((x) => !start.includes(x))).toHaveLength(3)
    const refused = await errorOf(client.beta.skills.delete(skill.id))
    expect(refused).toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringMatching(/still has 2 versions; delete them first/) })
    expect(await client.beta.skills.versions.delete(v2.id, { skill_id: skill.id })).toEqual({ id: v2.id, type: 'skill_version_deleted' })
    expect((await client.beta.skills.retrieve(skill.id)).latest_version_id).toBe(skill.latest_version_id)
    expect(blobs().filter((x) => !start.includes(x))).toHaveLength(2)
    expect(await errorOf(client.beta.skills.versions.retrieve(v2.id, { skill_id: skill.id }))).toMatchObject({ status: 404, type: 'not_found_error' })
    expect(await client.beta.skills.versions.delete('latest', { skill_id: skill.id })).toEqual({ id: skill.latest_version_id, type: 'skill_version_deleted' })
    expect(blobs()).toEqual(start)
    expect(await errorOf(client.beta.skills.versions.retrieve('latest', { skill_id: skill.id }))).toMatchObject({ status: 404, message: expect.stringMatching(/no versions/) })
    expect(await client.beta.skills.delete(skill.id)).toEqual({ id: skill.id, type: 'skill_deleted' })
    expect(await errorOf(client.beta.skills.retrieve(skill.id))).toMatchObject({ status: 404, type: 'not_found_error' })
  })

  it('answers 404 not_found_error for an unknown skill or version on every method', async () => {
    const skill = await client.beta.skills.create({ files: await skillFiles('known', 'description: known') })
    const files = await skillFiles('known', 'description: known')
    const calls: (() => Promise<unknown>)[] = [
      () => client.beta.skills.retrieve('skill_nope'),
      () => client.beta.skills.delete('skill_nope'),
      () => client.beta.skills.versions.create('skill_nope', { files }),
      () => client.beta.skills.versions.list('skill_nope'),
      () => client.beta.skills.versions.retrieve('latest', { skill_id: 'skill_nope' }),
      () => client.beta.skills.versions.retrieve('123', { skill_id: skill.id }),
      () => client.beta.skills.versions.delete('123', { skill_id: skill.id }),
      () => client.beta.skills.versions.download('123', { skill_id: skill.id }),
    ]
    for (const call of calls) {
      expect(await errorOf(call())).toMatchObject({ status: 404, type: 'not_found_error' })
    }
  })

  it('refuses an upload without SKILL.md, with two top-level folders, loose files or unsafe paths, naming the rule, and keeps nothing', async () => {
    const before = (await all(client.beta.skills.list())).length
    const blobsBefore = blobs()
    const cases: [() => Promise<unknown>, RegExp][] = [
      [async () => client.beta.skills.create({ files: [await file('no-manifest/README.md', 'x')] }), /no no-manifest\/SKILL\.md/],
      [async () => client.beta.skills.create({ files: [await file('a/SKILL.md', manifest('description: a')), await file('b/other.md', 'x')] }), /one top-level folder; this upload has 2 \("a", "b"\)/],
      [async () => client.beta.skills.create({ files: [await file('SKILL.md', manifest('description: a'))] }), /not inside a folder/],
      [async () => client.beta.skills.create({ files: [await file('a/SKILL.md', manifest('description: a')), await file('a/../../etc/passwd', 'x')] }), /'\.\.' segment/],
      [async () => client.beta.skills.create({ files: [await file('deep/nested/SKILL.md', manifest('description: a'))] }), /no deep\/SKILL\.md/],
      [async () => client.beta.skills.create({ files: [await file('dup/SKILL.md', manifest('description: a')), await file('dup/SKILL.md', manifest('description: b'))] }), /sent twice/],
    ]
    for (const [call, message] of cases) expect(await errorOf(call())).toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringMatching(message) })
    expect((await all(client.beta.skills.list())).length).toBe(before)
    expect(blobs()).toEqual(blobsBefore)
  })

  it('refuses a SKILL.md without frontmatter, with broken YAML, without a description, or with a bad name, naming the rule', async () => {
    const cases: [string, RegExp][] = [
      ['# no frontmatter\n', /must start with YAML frontmatter/],
      ['---\nname: never-closed\n', /never closed/],
      ['---\nname: [unclosed\ndescription: x\n---\n', /not valid YAML/],
      ['---\nname: no-description\n---\n', /description is required/],
      ['---\nname: Bad_Name\ndescription: x\n---\n', /frontmatter name "Bad_Name" must be kebab-case/],
      ['---\nname: my-claude-skill\ndescription: x\n---\n', /reserved word "claude"/],
      ['---\n- a list\n---\n', /must be a YAML mapping/],
      [`---\nname: long\ndescription: ${'d'.repeat(1025)}\n---\n`, /at most 1024 characters/],
    ]
    for (const [text, message] of cases) {
      const e = await errorOf(client.beta.skills.create({ files: [await file('bad-skill/SKILL.md', text)] }))
      expect(e).toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringMatching(/files: bad-skill\/SKILL\.md/) })
      expect(e.message).toMatch(message)
    }
    const folder = await errorOf(client.beta.skills.create({ files: [await file('Not Kebab/SKILL.md', manifest('description: x'))] }))
    expect(folder).toMatchObject({ status: 400, message: expect.stringMatching(/folder name "Not Kebab" is the skill's name, and it must be kebab-case/) })
  })

  it('refuses an upload over the 8 MiB cap with a 413 naming the cap, and an upload that is not multipart', async () => {
    const big = await errorOf(client.beta.skills.create({ files: [await file('big/SKILL.md', manifest('description: big')), await toFile(Buffer.alloc(8 * 1024 * 1024), 'big/blob.bin')] }))
    expect(big).toMatchObject({ status: 413, type: 'request_too_large', message: expect.stringMatching(/8388608 bytes/) })
    const json = await t.fetch('/v1/skills', { method: 'POST', body: JSON.stringify({ files: [] }) })
    expect(json.status).toBe(400)
    expect(((await json.json()) as { error: { message: string } }).error.message).toMatch(/multipart\/form-data/)
    const form = new FormData()
    form.append('file', new Blob(['x']), 'a/SKILL.md')
    const wrongPart = await fetch(`${t.url}/v1/skills`, { method: 'POST', headers: { authorization: `Bearer ${t.token}` }, body: form })
    expect(wrongPart.status).toBe(400)
    expect(((await wrongPart.json()) as { error: { message: string } }).error.message).toMatch(/unknown part "file"/)
  })

  it('takes no anthropic-beta header and accepts one the caller adds', async () => {
    const res = await fetch(`${t.url}/v1/skills?beta=true`, { headers: { authorization: `Bearer ${t.token}` } })
    expect(res.status).toBe(200)
    const withBeta = await client.beta.skills.list({ betas: ['skills-2025-10-02'] })
    expect(Array.isArray(withBeta.data)).toBe(true)
    const skill = await client.beta.skills.create({ files: await skillFiles('with-beta', 'description: beta'), betas: ['skills-2025-10-02'] })
    expect((await client.beta.skills.retrieve(skill.id, { betas: ['skills-2025-10-02'] })).id).toBe(skill.id)
  })
})

describe("skills through Corral's JSON upload (the desktop's)", () => {
  it('creates a skill and a version from base64 files, with the same rules as the multipart upload', async () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64')
    const res = await t.fetch('/v1/corral/skills', {
      method: 'POST',
      body: JSON.stringify({ files: [{ path: 'json-skill/SKILL.md', content_base64: b64(manifest('name: json-skill\ndescription: from JSON')) }] }),
    })
    expect(res.status).toBe(200)
    const skill = (await res.json()) as { id: string; display_name: string }
    expect(skill.display_name).toBe('json-skill')
    const v = await t.fetch(`/v1/corral/skills/${skill.id}/versions`, {
      method: 'POST',
      body: JSON.stringify({ files: [{ path: 'json-skill/SKILL.md', content_base64: b64(manifest('name: json-skill\ndescription: second')) }] }),
    })
    expect(((await v.json()) as { description: string }).description).toBe('second')
    const bad = await t.fetch('/v1/corral/skills', { method: 'POST', body: JSON.stringify({ files: [{ path: 'x/README.md', content_base64: b64('x') }] }) })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/no x\/SKILL\.md/)
  })
})

describe("agents' skills through the official SDK", () => {
  const newEnv = () => client.beta.environments.create({ name: `skills-${Math.random()}`, config: { type: 'cloud' } })

  it('keeps a custom skill on an agent at latest unless pinned, and refuses an unknown skill or version naming skills[i]', async () => {
    const skill = await client.beta.skills.create({ files: await skillFiles('agent-skill', 'description: for agents') })
    const agent = await client.beta.agents.create({ name: 'skilled', model: 'claude-sonnet-5-5', skills: [{ type: 'custom', skill_id: skill.id }] })
    expect(agent.skills).toEqual([{ type: 'custom', skill_id: skill.id, version: 'latest' }])
    const pinned = await client.beta.agents.create({ name: 'pinned', model: 'claude-sonnet-5-5', skills: [{ type: 'custom', skill_id: skill.id, version: skill.latest_version_id }] })
    expect(pinned.skills).toEqual([{ type: 'custom', skill_id: skill.id, version: skill.latest_version_id }])
    expect(await client.beta.agents.retrieve(pinned.id)).toMatchObject({ skills: pinned.skills })

    const unknown = await errorOf(client.beta.agents.create({ name: 'x', model: 'claude-sonnet-5-5', skills: [{ type: 'custom', skill_id: skill.id }, { type: 'custom', skill_id: 'skill_missing' }] }))
    expect(unknown).toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringMatching(/^skills\[1\]\.skill_id: skill "skill_missing" was not found/) })
    const badVersion = await errorOf(client.beta.agents.create({ name: 'x', model: 'claude-sonnet-5-5', skills: [{ type: 'custom', skill_id: skill.id, version: '42' }] }))
    expect(badVersion).toMatchObject({ status: 400, message: expect.stringMatching(/^skills\[0\]\.version: skill .* has no version "42"/) })
    const twice = await errorOf(client.beta.agents.create({ name: 'x', model: 'claude-sonnet-5-5', skills: [{ type: 'custom', skill_id: skill.id }, { type: 'custom', skill_id: skill.id }] }))
    expect(twice).toMatchObject({ status: 400, message: expect.stringMatching(/^skills\[1\]\.skill_id: .* listed twice/) })
    const shape = await errorOf(client.beta.agents.create({ name: 'x', model: 'claude-sonnet-5-5', skills: [{ type: 'plugin', skill_id: 'x' } as unknown as Anthropic.Beta.BetaManagedAgentsSkillParams] }))
    expect(shape).toMatchObject({ status: 400, message: expect.stringMatching(/skills\[0\]\.type: must be a custom skill/) })
  })

  it('refuses an Anthropic-built skill with a 400 saying it is not available offline', async () => {
    const e = await errorOf(client.beta.agents.create({ name: 'x', model: 'claude-sonnet-5-5', skills: [{ type: 'anthropic', skill_id: 'xlsx' }] }))
    expect(e).toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringMatching(/^skills\[0\]: "xlsx" is an Anthropic-built skill, and those are not available offline/) })
  })

  it('replaces, keeps and clears skills on update, checking the new list', async () => {
    const a = await client.beta.skills.create({ files: await skillFiles('update-a', 'description: a') })
    const b = await client.beta.skills.create({ files: await skillFiles('update-b', 'description: b') })
    const agent = await client.beta.agents.create({ name: 'updating', model: 'claude-sonnet-5-5', skills: [{ type: 'custom', skill_id: a.id }] })
    const renamed = await client.beta.agents.update(agent.id, { version: agent.version, name: 'updated' })
    expect(renamed.skills).toEqual(agent.skills)
    const replaced = await client.beta.agents.update(agent.id, { version: renamed.version, skills: [{ type: 'custom', skill_id: b.id, version: null }] })
    expect(replaced.skills).toEqual([{ type: 'custom', skill_id: b.id, version: 'latest' }])
    const refused = await errorOf(client.beta.agents.update(agent.id, { version: replaced.version, skills: [{ type: 'anthropic', skill_id: 'pdf' }] }))
    expect(refused).toMatchObject({ status: 400, message: expect.stringMatching(/^skills\[0\]: "pdf" is an Anthropic-built skill/) })
    const cleared = await client.beta.agents.update(agent.id, { version: replaced.version, skills: null })
    expect(cleared.skills).toEqual([])
  })

  it("pins each skill's version in a session's snapshot at creation, so a later upload reaches only later sessions", async () => {
    const skill = await client.beta.skills.create({ files: await skillFiles('pinning', 'name: pinning\ndescription: v1') })
    const agent = await client.beta.agents.create({ name: 'pinning', model: 'claude-sonnet-5-5', skills: [{ type: 'custom', skill_id: skill.id }] })
    const env = await newEnv()
    const early = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    expect(early.agent.skills).toEqual([{ type: 'custom', skill_id: skill.id, version: skill.latest_version_id }])
    const v2 = await client.beta.skills.versions.create(skill.id, { files: await skillFiles('pinning', 'name: pinning\ndescription: v2') })
    const late = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id })
    expect(late.agent.skills).toEqual([{ type: 'custom', skill_id: skill.id, version: v2.id }])
    expect((await client.beta.sessions.retrieve(early.id)).agent.skills).toEqual(early.agent.skills)

    const override = await errorOf(
      client.beta.sessions.create({ agent: { type: 'agent_with_overrides', id: agent.id, skills: [{ type: 'anthropic', skill_id: 'docx' }] }, environment_id: env.id }),
    )
    expect(override).toMatchObject({ status: 400, message: expect.stringMatching(/^agent\.skills\[0\]: "docx" is an Anthropic-built skill/) })
    await client.beta.skills.versions.delete(v2.id, { skill_id: skill.id })
    await client.beta.skills.versions.delete(skill.latest_version_id, { skill_id: skill.id })
    const gone = await errorOf(client.beta.sessions.create({ agent: agent.id, environment_id: env.id }))
    expect(gone).toMatchObject({ status: 400, message: expect.stringMatching(/^agent\.skills\[0\]: skill .* has no versions left/) })
  })

  it("places a session's skills where the SDK's own worker puts them (setupSkills: retrieve the pinned version, download, extract)", async () => {
    const { setupSkills } = await import('@anthropic-ai/sdk/tools/agent-toolset/skills')
    const skill = await client.beta.skills.create({ files: await skillFiles('worker-read', 'name: worker-read\ndescription: for the worker', { 'scripts/x.sh': 'echo x\n' }) })
    const agent = await client.beta.agents.create({ name: 'worker', model: 'claude-sonnet-5-5', skills: [{ type: 'custom', skill_id: skill.id }] })
    const session = await client.beta.sessions.create({ agent: agent.id, environment_id: (await newEnv()).id })
    const workdir = join(scratch, 'worker')
    mkdirSync(workdir)
    const cleanup = await setupSkills({ client, session: await client.beta.sessions.retrieve(session.id), workdir } as Parameters<typeof setupSkills>[0])
    expect(readFileSync(join(workdir, 'skills', 'worker-read', 'SKILL.md'), 'utf8')).toContain('description: for the worker')
    expect(readFileSync(join(workdir, 'skills', 'worker-read', 'scripts', 'x.sh'), 'utf8')).toBe('echo x\n')
    await cleanup()
    expect(existsSync(join(workdir, 'skills', 'worker-read'))).toBe(false)
  })
})
