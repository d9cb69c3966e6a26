import type { z } from 'zod'
import type { Environment } from '../../shared/api/types'
import type { environmentCreateSchema, environmentUpdateSchema } from '../../shared/api/schemas'
import { newId } from '../../shared/api/ids'
import { conflict, notFound } from '../../shared/errors'
import type { Statement } from 'better-sqlite3'
import type { Db } from './database'
import type { ResourceEvents } from './webhook-store'
import { mergeMetadata, type ListQuery } from './agent-store'
import { createdAtFilters, keysetList, type Page } from './pagination'
import { StoreChanges } from './store-changes'

export type EnvironmentCreateInput = z.infer<typeof environmentCreateSchema>
export type EnvironmentUpdateInput = z.infer<typeof environmentUpdateSchema>

/** The API's defaults for a `cloud` config: no egress unless asked for, no packages. */
function normalizeConfig(config: EnvironmentCreateInput['config']): Environment['config'] {
  if (config?.type === 'self_hosted') return { type: 'self_hosted' } as Environment['config']
  const networking = config?.networking ?? { type: 'limited', allowed_hosts: [], allow_mcp_servers: false, allow_package_managers: false }
  const net =
    networking.type === 'limited'
      ? {
          type: 'limited' as const,
          allowed_hosts: networking.allowed_hosts ?? [],
          allow_mcp_servers: networking.allow_mcp_servers ?? false,
          allow_package_managers: networking.allow_package_managers ?? false,
        }
      : networking
  const p = config?.packages ?? {}
  const packages = { type: 'packages', apt: p.apt ?? [], cargo: p.cargo ?? [], gem: p.gem ?? [], go: p.go ?? [], npm: p.npm ?? [], pip: p.pip ?? [] }
  return { type: 'cloud', networking: net, packages, ...(config?.corral ? { corral: config.corral } : {}) } as Environment['config']
}

export class EnvironmentStore {
  private byId?: Statement
  /** Prepared once: every brain that starts asks its session's environment's type (answeredByWorker). */
  private typeById?: Statement
  /** Notified after every committed update, archive or delete (running sessions' egress follows it). */
  readonly changes = new StoreChanges()

  constructor(
    private readonly db: Db,
    private readonly clock: () => Date = () => new Date(),
    /** Told of each creation, update, archive and deletion inside its transaction (the webhooks' outbox). */
    private readonly events: ResourceEvents = () => {},
  ) {}

  create(input: EnvironmentCreateInput): Environment {
    const now = this.clock().toISOString()
    const env: Environment = {
      type: 'environment',
      id: newId('environment'),
      name: input.name,
      description: input.description ?? null,
      config: normalizeConfig(input.config),
      metadata: input.metadata ?? {},
      scope: input.scope ?? 'account',
      created_at: now,
      updated_at: now,
      archived_at: null,
    }
    this.db.transaction(() => {
      this.db
        .prepare('INSERT INTO environments (id, name, created_at, updated_at, archived_at, data) VALUES (?, ?, ?, ?, NULL, ?)')
        .run(env.id, env.name, now, now, JSON.stringify(env))
      this.events('environment.created', env.id)
    })()
    return env
  }

  /**
   * The environment's `config.type` ('cloud' or 'self_hosted') without parsing the rest of it:
   * every brain that starts asks (answeredByWorker), and a workflow run starts a thousand.
   */
  configType(id: string): string {
    this.typeById ??= this.db.prepare("SELECT json_extract(data, '$.config.type') AS type FROM environments WHERE id = ?")
    const row = this.typeById.get(id) as { type: string | null } | undefined
    if (!row) throw notFound('environment', id)
    return row.type ?? ''
  }

  retrieve(id: string): Environment {
    this.byId ??= this.db.prepare('SELECT data FROM environments WHERE id = ?')
    const row = this.byId.get(id) as { data: string } | undefined
    if (!row) throw notFound('environment', id)
    return JSON.parse(row.data) as Environment
  }

  update(id: string, input: EnvironmentUpdateInput): Environment {
    const updated = this.db.transaction(() => {
      const cur = this.retrieve(id)
      if (cur.archived_at) throw conflict(`environment ${id} is archived and cannot be updated`)
      const next: Environment = {
        ...cur,
        name: input.name ?? cur.name,
        description: input.description === undefined ? cur.description : input.description,
        config: input.config === undefined ? cur.config : normalizeConfig(input.config),
        metadata: input.metadata === undefined ? cur.metadata : mergeMetadata(cur.metadata, input.metadata),
        scope: input.scope ?? cur.scope,
        updated_at: this.clock().toISOString(),
      }
      this.db.prepare('UPDATE environments SET name = ?, updated_at = ?, data = ? WHERE id = ?').run(next.name, next.updated_at, JSON.stringify(next), id)
      this.events('environment.updated', id)
      return next
    })()
    this.changes.notify({ kind: 'environment', id })
    return updated
  }

  archive(id: string): Environment {
    const cur = this.retrieve(id)
    if (cur.archived_at) return cur
    const now = this.clock().toISOString()
    const next = { ...cur, archived_at: now, updated_at: now }
    this.db.transaction(() => {
      this.db.prepare('UPDATE environments SET archived_at = ?, updated_at = ?, data = ? WHERE id = ?').run(now, now, JSON.stringify(next), id)
      this.events('environment.archived', id)
    })()
    this.changes.notify({ kind: 'environment', id })
    return next
  }

  /** Deletes an environment no live session uses; 409 otherwise. */
  delete(id: string): { id: string; type: 'environment_deleted' } {
    this.retrieve(id)
    const inUse = this.db.prepare("SELECT COUNT(*) AS n FROM sessions WHERE environment_id = ? AND archived_at IS NULL AND status != 'terminated'").get(id) as { n: number }
    if (inUse.n > 0) throw conflict(`environment ${id} is used by ${inUse.n} active session(s); archive them first`)
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM environments WHERE id = ?').run(id)
      this.events('environment.deleted', id)
    })()
    this.changes.notify({ kind: 'environment', id })
    return { id, type: 'environment_deleted' }
  }

  list(q: ListQuery): Page<Environment> {
    const where: string[] = []
    const args: unknown[] = []
    if (!q.include_archived) where.push('archived_at IS NULL')
    createdAtFilters(q, where, args)
    return keysetList<Environment>(this.db, { table: 'environments', where, args, order: q.order ?? 'desc', limit: q.limit ?? 20, page: q.page })
  }
}
