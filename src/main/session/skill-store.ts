import { newId } from '../../shared/api/ids'
import { MAX_SKILL_BYTES, skillNameProblem, skillUploadLayout } from '../../shared/api/skills'
import { CorralError, invalid, notFound } from '../../shared/errors'
import type { BlobStore, PendingBlob } from './blob-store'
import type { Db } from './database'
import { keysetList, type Page } from './pagination'
import { writeZip } from './skill-archive'
import { parseSkillManifest } from './skill-manifest'

/** A skill as the API returns it (the SDK's BetaSkill). */
export interface Skill {
  id: string
  type: 'skill'
  display_name: string
  /** What `latest` resolves to; null only once every version was deleted (the skill can then be deleted). */
  latest_version_id: string | null
  source: { type: 'custom' }
  created_at: string
  updated_at: string
}

/** A skill version as the API returns it (the SDK's BetaSkillVersion). */
export interface SkillVersion {
  id: string
  type: 'skill_version'
  skill_id: string
  /** The skill's kebab-case slug (fixed by its first upload); the folder it is placed in. */
  name: string
  description: string
  created_at: string
}

/** One part of an upload: its filename (the path inside the skill, not stripped) and bytes. */
export interface SkillUploadPart {
  filename: string
  bytes: Buffer
}

export interface SkillCreateParams {
  files: readonly SkillUploadPart[]
  /** ≤ 255 characters, one line; absent: the SKILL.md frontmatter's name (else the folder's). */
  display_name?: string | null
}

export interface SkillListParams {
  limit?: number
  page?: string
  /** `custom` (every skill here) or `anthropic` (none: Anthropic-built skills are not available offline). */
  source?: 'custom' | 'anthropic'
}

/** A file of a version as placed in a sandbox: its path inside the skill's folder and its stored bytes. */
export interface SkillVersionFile {
  path: string
  /** Host path of the content-addressed bytes (copy from it; never write through it). */
  blobPath: string
  size: number
}

export interface SkillStoreOptions {
  blobs: BlobStore
  clock?: () => Date
}

interface SkillRow {
  id: string
  created_at: string
  updated_at: string
  display_name: string
  name: string
  latest_version_id: string | null
}

interface VersionRow {
  skill_id: string
  id: string
  created_at: string
  name: string
  description: string
  size_bytes: number
}

/** The alias a version path or an agent's pin may use for a skill's newest version. */
export const LATEST = 'latest'

/** A skill on an agent as sent (the SDK's BetaManagedAgentsSkillParams). */
export interface SkillRefParams {
  type: 'custom' | 'anthropic'
  skill_id: string
  version?: string | null
}

/** A skill on an agent or a session as the API shows it: always with a version (`latest` on an agent that follows it). */
export interface SkillRef {
  type: 'custom'
  skill_id: string
  version: string
}

/** A session's skill, resolved: where it is placed and what the model is told. */
export interface SessionSkill {
  skill_id: string
  version: string
  name: string
  description: string
}

/**
 * Skills and their versions (spec resources.md §7): a row per skill and per version in corral.db,
 * each version's files as rows over the BlobStore (each content once), so a new version that
 * changes one file stores one new blob. A version's archive (`/content`) is a zip written from
 * them on demand: `<name>/SKILL.md`, `<name>/…`, stamped with the version's creation time, so it
 * is the same bytes at every download.
 *
 * Version ids are decimal microsecond timestamps (the form the hosted API uses for custom skill
 * versions), increasing within a skill; `latest` resolves to `latest_version_id`. A skill is
 * deleted only once it has no version left (400 otherwise, naming how many).
 */
export class SkillStore {
  private readonly blobs: BlobStore
  private readonly clock: () => Date

  constructor(
    private readonly db: Db,
    options: SkillStoreOptions,
  ) {
    this.blobs = options.blobs
    this.clock = options.clock ?? (() => new Date())
  }

  /** A new skill from its first upload (its first version). */
  async create(params: SkillCreateParams): Promise<Skill> {
    const upload = checkUpload(params.files)
    const displayName = params.display_name ?? upload.manifest.name ?? upload.folder
    if (displayName.length === 0 || displayName.length > 255) throw invalid(`display_name: 1 to 255 characters (got ${displayName.length})`)
    if (/[\r\n\u2028\u2029]/.test(displayName)) throw invalid('display_name: a single line (no line breaks)')
    const staged = await this.stage(upload.files)
    return this.commitStaged(staged, () => {
      const now = this.clock()
      const id = newId('skill', now.getTime())
      const version = this.versionId(id, now)
      this.db
        .prepare('INSERT INTO skills (id, created_at, updated_at, display_name, name, latest_version_id) VALUES (?, ?, ?, ?, ?, ?)')
        .run(id, now.toISOString(), now.toISOString(), displayName, upload.name, version)
      this.insertVersion({ skill_id: id, id: version, created_at: now.toISOString(), name: upload.name, description: upload.manifest.description, size_bytes: upload.size }, staged)
      return this.retrieve(id)
    })
  }

  /** A new version of a skill: its upload must resolve to the skill's name. It becomes `latest`. */
  async createVersion(skillId: string, files: readonly SkillUploadPart[]): Promise<SkillVersion> {
    const skill = this.row(skillId)
    const upload = checkUpload(files)
    if (upload.name !== skill.name) {
      throw invalid(`files: this upload's skill name is ${JSON.stringify(upload.name)} but skill ${skillId} is ${JSON.stringify(skill.name)}; every version keeps the name of the first (set name: ${skill.name} in SKILL.md's frontmatter, or name its folder ${skill.name})`)
    }
    const staged = await this.stage(upload.files)
    return this.commitStaged(staged, () => {
      this.row(skillId) // deleted meanwhile: 404
      const now = this.clock()
      const version = this.versionId(skillId, now)
      this.insertVersion({ skill_id: skillId, id: version, created_at: now.toISOString(), name: upload.name, description: upload.manifest.description, size_bytes: upload.size }, staged)
      this.db.prepare('UPDATE skills SET latest_version_id = ?, updated_at = ? WHERE id = ?').run(version, now.toISOString(), skillId)
      return this.retrieveVersion(skillId, version)
    })
  }

  retrieve(skillId: string): Skill {
    return toSkill(this.row(skillId))
  }

  /** Newest first. `source: 'anthropic'` is an empty page: no Anthropic-built skill is available offline. */
  list(params: SkillListParams = {}): Page<Skill> {
    if (params.source === 'anthropic') return { data: [], next_page: null }
    const page = keysetList<Skill, SkillRow>(this.db, { table: 'skills', where: [], args: [], order: 'desc', limit: params.limit ?? 20, page: params.page }, toSkill)
    return { data: page.data, next_page: page.next_page }
  }

  /** Deletes a skill that has no version left (its versions are deleted first, as the API asks). */
  delete(skillId: string): { id: string; type: 'skill_deleted' } {
    this.row(skillId)
    const n = (this.db.prepare('SELECT COUNT(*) AS n FROM skill_versions WHERE skill_id = ?').get(skillId) as { n: number }).n
    if (n > 0) throw invalid(`skill ${skillId} still has ${n} version${n === 1 ? '' : 's'}; delete ${n === 1 ? 'it' : 'them'} first (DELETE /v1/skills/${skillId}/versions/{version})`)
    this.db.prepare('DELETE FROM skills WHERE id = ?').run(skillId)
    return { id: skillId, type: 'skill_deleted' }
  }

  /** A version by id or `latest`. Throws not_found_error naming the skill or the version. */
  retrieveVersion(skillId: string, version: string): SkillVersion {
    return toVersion(this.versionRow(skillId, version))
  }

  /** Newest first. */
  listVersions(skillId: string, params: { limit?: number; page?: string } = {}): Page<SkillVersion> {
    this.row(skillId)
    const page = keysetList<SkillVersion, VersionRow>(
      this.db,
      { table: 'skill_versions', where: ['skill_id = ?'], args: [skillId], order: 'desc', limit: params.limit ?? 20, page: params.page },
      toVersion,
    )
    return { data: page.data, next_page: page.next_page }
  }

  /** Deletes a version (by id or `latest`) and the blobs no other version holds; `latest` moves to the newest left. */
  deleteVersion(skillId: string, version: string): { id: string; type: 'skill_version_deleted' } {
    const v = this.versionRow(skillId, version)
    const orphaned: string[] = []
    this.db.transaction(() => {
      const shas = (this.db.prepare('SELECT sha256 FROM skill_files WHERE skill_id = ? AND version_id = ?').all(skillId, v.id) as { sha256: string }[]).map((r) => r.sha256)
      this.db.prepare('DELETE FROM skill_files WHERE skill_id = ? AND version_id = ?').run(skillId, v.id)
      this.db.prepare('DELETE FROM skill_versions WHERE skill_id = ? AND id = ?').run(skillId, v.id)
      const newest = this.db.prepare('SELECT id FROM skill_versions WHERE skill_id = ? ORDER BY created_at DESC, id DESC LIMIT 1').get(skillId) as { id: string } | undefined
      this.db.prepare('UPDATE skills SET latest_version_id = ?, updated_at = ? WHERE id = ?').run(newest?.id ?? null, this.clock().toISOString(), skillId)
      const used = this.db.prepare('SELECT 1 FROM skill_files WHERE sha256 = ? LIMIT 1')
      for (const sha of new Set(shas)) if (!used.get(sha)) orphaned.push(sha)
    })()
    for (const sha of orphaned) this.blobs.remove(sha)
    return { id: v.id, type: 'skill_version_deleted' }
  }

  /** A version's files (by id or `latest`), in path order, with where their bytes are. */
  files(skillId: string, version: string): { version: SkillVersion; files: SkillVersionFile[] } {
    const v = this.versionRow(skillId, version)
    const rows = this.db.prepare('SELECT path, sha256, size_bytes FROM skill_files WHERE skill_id = ? AND version_id = ? ORDER BY path').all(skillId, v.id) as {
      path: string
      sha256: string
      size_bytes: number
    }[]
    return { version: toVersion(v), files: rows.map((r) => ({ path: r.path, blobPath: this.blobs.path(r.sha256), size: r.size_bytes })) }
  }

  /** A version's archive: a zip of `<name>/…` (the SDK's worker strips that one folder). */
  async archive(skillId: string, version: string): Promise<{ version: SkillVersion; zip: Buffer }> {
    const { version: v, files } = this.files(skillId, version)
    const rows = this.db.prepare('SELECT path, sha256 FROM skill_files WHERE skill_id = ? AND version_id = ? ORDER BY path').all(skillId, v.id) as { path: string; sha256: string }[]
    const entries = []
    for (const r of rows) entries.push({ path: `${v.name}/${r.path}`, bytes: await this.blobs.read(r.sha256) })
    if (entries.length !== files.length) throw new CorralError('api_error', `skill ${skillId} version ${v.id} changed while it was read`)
    return { version: v, zip: writeZip(entries, new Date(v.created_at)) }
  }

  /**
   * Checks an agent's (or a session override's) skills at save: each a custom skill that exists
   * and has the version it pins (absent or null: `latest`, kept as `latest` unless `pin`, which
   * resolves it to the version id of now, as a session's snapshot does), each skill once, no two
   * of the same name (they would share /mnt/skills/<name>). An Anthropic-built skill is refused:
   * none is available offline. Throws invalid_request_error naming `<field>[i]`.
   */
  resolveRefs(refs: readonly SkillRefParams[], options: { field: string; pin?: boolean }): SkillRef[] {
    const seen = new Map<string, number>()
    const names = new Map<string, number>()
    return refs.map((ref, i) => {
      const at = `${options.field}[${i}]`
      if (ref.type === 'anthropic') {
        throw invalid(
          `${at}: ${JSON.stringify(ref.skill_id)} is an Anthropic-built skill, and those are not available offline in Corral; upload a skill of your own (POST /v1/skills) and reference it as {type: "custom", skill_id}`,
        )
      }
      const earlier = seen.get(ref.skill_id)
      if (earlier !== undefined) throw invalid(`${at}.skill_id: skill ${ref.skill_id} is listed twice (also ${options.field}[${earlier}])`)
      seen.set(ref.skill_id, i)
      const skill = this.db.prepare('SELECT * FROM skills WHERE id = ?').get(ref.skill_id) as SkillRow | undefined
      if (!skill) throw invalid(`${at}.skill_id: skill ${JSON.stringify(ref.skill_id)} was not found`)
      const wanted = ref.version ?? LATEST
      if (skill.latest_version_id === null) throw invalid(`${at}: skill ${skill.id} has no versions left; upload one (POST /v1/skills/${skill.id}/versions) or remove it from the list`)
      const id = wanted === LATEST ? skill.latest_version_id : wanted
      const version = this.db.prepare('SELECT * FROM skill_versions WHERE skill_id = ? AND id = ?').get(skill.id, id) as VersionRow | undefined
      if (!version) throw invalid(`${at}.version: skill ${skill.id} has no version ${JSON.stringify(wanted)}`)
      const clash = names.get(version.name)
      if (clash !== undefined) throw invalid(`${at}: skill ${skill.id} is named ${JSON.stringify(version.name)} like ${options.field}[${clash}]; two skills of one agent need different names (each is placed at /mnt/skills/<name>)`)
      names.set(version.name, i)
      return { type: 'custom' as const, skill_id: skill.id, version: options.pin ? version.id : wanted }
    })
  }

  /** The skills of a session's snapshot, as placed and announced: those whose pinned version still exists. */
  sessionSkills(refs: readonly { type?: string; skill_id: string; version: string }[]): SessionSkill[] {
    const out: SessionSkill[] = []
    for (const ref of refs) {
      if (ref.type !== 'custom') continue
      const v = this.findVersion(ref.skill_id, ref.version)
      if (v) out.push({ skill_id: v.skill_id, version: v.id, name: v.name, description: v.description })
    }
    return out
  }

  private findVersion(skillId: string, version: string): VersionRow | undefined {
    try {
      return this.versionRow(skillId, version)
    } catch (err) {
      if (err instanceof CorralError && err.code === 'not_found_error') return undefined
      throw err
    }
  }

  private row(skillId: string): SkillRow {
    const row = this.db.prepare('SELECT * FROM skills WHERE id = ?').get(skillId) as SkillRow | undefined
    if (!row) throw notFound('skill', skillId)
    return row
  }

  private versionRow(skillId: string, version: string): VersionRow {
    const skill = this.row(skillId)
    const id = version === LATEST ? skill.latest_version_id : version
    if (id === null) throw new CorralError('not_found_error', `skill ${skillId} has no versions: latest resolves to none`)
    const row = this.db.prepare('SELECT * FROM skill_versions WHERE skill_id = ? AND id = ?').get(skillId, id) as VersionRow | undefined
    if (!row) throw new CorralError('not_found_error', `skill ${skillId} has no version ${JSON.stringify(version)}`)
    return row
  }

  /** The next version id of a skill: the clock in microseconds, above every id it has. */
  private versionId(skillId: string, now: Date): string {
    const top = this.db.prepare('SELECT MAX(CAST(id AS INTEGER)) AS top FROM skill_versions WHERE skill_id = ?').get(skillId) as { top: number | null }
    return String(Math.max(now.getTime() * 1000, (top.top ?? 0) + 1))
  }

  private insertVersion(v: VersionRow, staged: readonly StagedFile[]): void {
    this.db.prepare('INSERT INTO skill_versions (skill_id, id, created_at, name, description, size_bytes) VALUES (?, ?, ?, ?, ?, ?)').run(v.skill_id, v.id, v.created_at, v.name, v.description, v.size_bytes)
    const file = this.db.prepare('INSERT INTO skill_files (skill_id, version_id, path, sha256, size_bytes) VALUES (?, ?, ?, ?, ?)')
    for (const f of staged) file.run(v.skill_id, v.id, f.path, f.blob.sha256, f.blob.size)
  }

  /** Writes each file aside under a temporary name (hashing it), before anything is committed. */
  private async stage(files: readonly { path: string; content: Buffer }[]): Promise<StagedFile[]> {
    const staged: StagedFile[] = []
    try {
      for (const f of files) staged.push({ path: f.path, blob: await this.blobs.putStream([f.content], { limit: MAX_SKILL_BYTES, limitName: `the skill size limit of ${MAX_SKILL_BYTES} bytes` }) })
    } catch (err) {
      for (const s of staged) this.blobs.discard(s.blob)
      throw err
    }
    return staged
  }

  /**
   * Puts the staged blobs under their names and writes the rows in one synchronous block, so a
   * version deletion can never remove a blob between the two; on failure nothing is kept (the
   * blobs another version already held stay, being theirs).
   */
  private commitStaged<T>(staged: readonly StagedFile[], write: () => T): T {
    const fresh = staged.filter((s) => !this.blobs.has(s.blob.sha256)).map((s) => s.blob.sha256)
    try {
      for (const s of staged) this.blobs.commit(s.blob)
      return this.db.transaction(write)()
    } catch (err) {
      for (const s of staged) this.blobs.discard(s.blob)
      const used = this.db.prepare('SELECT 1 FROM skill_files WHERE sha256 = ? LIMIT 1')
      for (const sha of new Set(fresh)) if (!used.get(sha)) this.blobs.remove(sha)
      throw err
    }
  }
}

interface StagedFile {
  path: string
  blob: PendingBlob
}

/** An upload checked whole: layout, size cap, SKILL.md's frontmatter, the skill's name. */
function checkUpload(parts: readonly SkillUploadPart[]): {
  folder: string
  name: string
  manifest: ReturnType<typeof parseSkillManifest>
  files: { path: string; content: Buffer }[]
  size: number
} {
  let layout
  try {
    layout = skillUploadLayout(parts.map((p) => ({ filename: p.filename, content: p.bytes })))
  } catch (err) {
    throw invalid((err as Error).message)
  }
  const size = layout.files.reduce((n, f) => n + f.content.length, 0)
  if (size > MAX_SKILL_BYTES) throw new CorralError('request_too_large', `files: the skill is ${size} bytes; a skill version is at most ${MAX_SKILL_BYTES} bytes (the sum of its files)`)
  const manifestFile = layout.files.find((f) => f.path === 'SKILL.md')!
  const manifest = parseSkillManifest(manifestFile.content, `files: ${layout.folder}/SKILL.md`)
  const name = manifest.name ?? layout.folder
  if (!manifest.name) {
    const problem = skillNameProblem(name)
    if (problem) throw invalid(`files: SKILL.md has no frontmatter name, so the folder name ${JSON.stringify(name)} is the skill's name, and it ${problem}; add name: to the frontmatter`)
  }
  return { folder: layout.folder, name, manifest, files: layout.files, size }
}

function toSkill(r: SkillRow): Skill {
  return { id: r.id, type: 'skill', display_name: r.display_name, latest_version_id: r.latest_version_id, source: { type: 'custom' }, created_at: r.created_at, updated_at: r.updated_at }
}

function toVersion(r: VersionRow): SkillVersion {
  return { id: r.id, type: 'skill_version', skill_id: r.skill_id, name: r.name, description: r.description, created_at: r.created_at }
}
