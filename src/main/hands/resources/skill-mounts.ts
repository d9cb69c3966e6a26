import { createHash } from 'node:crypto'
import { constants } from 'node:fs'
import { chmod, copyFile, mkdir, readdir, rm } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { SKILLS_DIR } from '../../../shared/api/skills'
import type { FolderMount } from '../sandbox'

/** What SkillMounts reads a session's skills from (the SessionStore and the SkillStore). */
export interface SkillSource {
  /** The session's skills as its snapshot pinned them (name: the folder each goes in). */
  skillsOf(sessionId: string): readonly { skill_id: string; version: string; name: string }[]
  /** A version's files: their paths inside the skill's folder and the host paths of their bytes. */
  files(skillId: string, version: string): { files: readonly { path: string; blobPath: string }[] }
}

export interface SkillMountsOptions {
  skills: () => SkillSource | undefined
  /** Host directory under which each session's skills folder is made (<dataDir>/skill-mounts). */
  root: string
  log?: (message: string) => void
}

/**
 * A session's skills as one read-only folder: each pinned version's files are copied (a reflink
 * where the filesystem has them) from the skill store into `<root>/<session>/<name>/`, files 0444
 * and folders 0555, and the folder is bound read-only at /mnt/skills in Docker and in bubblewrap
 * (a FolderMount, like file resources and memory stores), before the sandbox's first tool call
 * runs. A skill that cannot be placed (its version was deleted since) is left out and logged; the
 * model is told only of the skills the session's snapshot still resolves (SessionStore.skillsOf).
 */
export class SkillMounts {
  constructor(private readonly o: SkillMountsOptions) {}

  /** The folder to bind for a session's skills (none when it has none). */
  async prepare(sessionId: string): Promise<FolderMount[]> {
    const source = this.o.skills()
    const skills = source?.skillsOf(sessionId) ?? []
    if (!source || skills.length === 0) return []
    const dir = this.dirOf(sessionId)
    // placed afresh at each provision, emptying the folder rather than replacing it: a container
    // re-attached after a restart keeps its bind of this very folder
    await mkdir(dir, { recursive: true, mode: 0o755 })
    await chmodTree(dir)
    for (const e of await readdir(dir)) await rm(join(dir, e), { recursive: true, force: true })
    for (const skill of skills) {
      try {
        await this.place(join(dir, skill.name), source.files(skill.skill_id, skill.version).files)
      } catch (err) {
        ;(this.o.log ?? console.warn)(`[corral] session ${sessionId}: skill ${skill.skill_id} version ${skill.version} is not placed in the sandbox: ${(err as Error).message}`)
        await rm(join(dir, skill.name), { recursive: true, force: true })
      }
    }
    await sealDirs(dir)
    return [{ index: -1, source: dir, target: SKILLS_DIR, readOnly: true }]
  }

  private async place(folder: string, files: readonly { path: string; blobPath: string }[]): Promise<void> {
    for (const f of files) {
      const target = join(folder, f.path)
      if (!target.startsWith(folder + '/')) throw new Error(`the path ${JSON.stringify(f.path)} leaves the skill's folder`)
      await mkdir(dirname(target), { recursive: true, mode: 0o755 })
      await copyFile(f.blobPath, target, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE)
      await chmod(target, 0o444)
    }
  }

  dirOf(sessionId: string): string {
    const key = /^[A-Za-z0-9_-]{1,100}$/.test(sessionId) ? sessionId : 'h' + createHash('sha256').update(sessionId).digest('hex').slice(0, 32)
    return join(this.o.root, key)
  }

  async release(sessionId: string): Promise<void> {
    await chmodTree(this.dirOf(sessionId))
    await rm(this.dirOf(sessionId), { recursive: true, force: true })
  }
}

/** Folders 0555 below the session's root (which stays 0755 so release can empty it). */
async function sealDirs(root: string): Promise<void> {
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (!e.isDirectory()) continue
      await walk(join(d, e.name))
      await chmod(join(d, e.name), 0o555)
    }
  }
  await walk(root)
}

/** Makes a placed tree's folders writable again, so it can be removed (a non-root owner cannot unlink in a 0555 folder). */
async function chmodTree(root: string): Promise<void> {
  const walk = async (d: string): Promise<void> => {
    let entries
    try {
      entries = await readdir(d, { withFileTypes: true })
    } catch {
      return
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue
      await chmod(join(d, e.name), 0o755).catch(() => undefined)
      await walk(join(d, e.name))
    }
  }
  await walk(root)
}
