import { createHash } from 'node:crypto'
import { OUTPUTS_DIR } from '../../../shared/api/file-paths'
import type { Sandbox } from '../sandbox'

/** Where SessionOutputs keeps what it collects (the FileStore). */
export interface OutputSink {
  /** The outputs already kept for a session (path relative to the outputs folder, content hash). */
  outputs(sessionId: string): readonly { path: string; sha256: string }[]
  /** Keeps `bytes` as the session's output at `path`, replacing the one kept for the path before. */
  recordOutput(sessionId: string, path: string, bytes: Buffer): Promise<{ unchanged: boolean }>
}

export interface SessionOutputsOptions {
  sink: () => OutputSink | undefined
  /** Largest output kept, in bytes (the files API's upload cap); a larger file is left out and named. */
  maxFileBytes: () => number
  /** Most files collected from one session's folder; default 500 (the API's files per session). */
  maxFiles?: number
  log?: (message: string) => void
}

/** What one collection did: files kept (new or rewritten), and what it left out and why. */
export interface OutputsCollected {
  kept: string[]
  refused: { path: string; reason: string }[]
}

/**
 * A session's outputs folder (/mnt/session/outputs in the sandbox) collected into session-scoped
 * files: after each sandbox call (and before the sandbox is released) the folder is listed
 * through the sandbox's runner and every regular file that is new or was written since the last
 * look is read and kept in the file store (`scope: {type:'session', id}`); a rewritten file
 * replaces the one kept for its path. The folder lives in the sandbox itself (no host folder is
 * bound, so sessions keep the Docker warm pool); files removed from it stay kept. Symlinks and
 * special files are never followed or read.
 */
export class SessionOutputs {
  /** Per session: path → the signature of the file last kept (or found already kept) there. */
  private readonly seen = new Map<string, Map<string, string>>()
  /** Per session: path → the reason last given for leaving it out (said once per signature). */
  private readonly refusedSigs = new Map<string, Map<string, string>>()
  private readonly maxFiles: number

  constructor(private readonly o: SessionOutputsOptions) {
    this.maxFiles = o.maxFiles ?? 500
  }

  /**
   * Lists the session's outputs folder and keeps what changed. Never throws for the sandbox's
   * content: a file over the size cap, a symlink or a special file is named in `refused` (once
   * per version of it); a file that changed while being read is taken at the next collection.
   */
  async collect(sessionId: string, sandbox: Sandbox): Promise<OutputsCollected> {
    const sink = this.o.sink()
    const done: OutputsCollected = { kept: [], refused: [] }
    if (!sink || !sandbox.listFiles || !sandbox.readFile) return done
    const list = await sandbox.listFiles(OUTPUTS_DIR, { max: this.maxFiles })
    let seen = this.seen.get(sessionId)
    const firstLook = !seen
    if (!seen) this.seen.set(sessionId, (seen = new Map()))
    let refusedSigs = this.refusedSigs.get(sessionId)
    if (!refusedSigs) this.refusedSigs.set(sessionId, (refusedSigs = new Map()))
    // After a restart the signatures are unknown: content already kept is recognised by its hash.
    const kept = firstLook ? new Map(sink.outputs(sessionId).map((o) => [o.path, o.sha256])) : undefined
    const refuse = (path: string, sig: string, reason: string) => {
      if (refusedSigs.get(path) === sig) return
      refusedSigs.set(path, sig)
      done.refused.push({ path, reason })
    }
    const cap = this.o.maxFileBytes()
    for (const f of list.files) {
      if (seen.get(f.path) === f.sig) continue
      if (f.size > cap) {
        refuse(f.path, f.sig, `over the file size limit of ${cap} bytes`)
        continue
      }
      const read = await sandbox.readFile(`${OUTPUTS_DIR}/${f.path}`, { maxBytes: cap }).catch((err: Error) => {
        this.o.log?.(`outputs of ${sessionId}: ${f.path} could not be read: ${err.message}`)
        return undefined
      })
      if (!read) continue // changed meanwhile (or gone): the next collection takes it
      const known = kept?.get(f.path)
      if (known !== undefined && known === createHash('sha256').update(read.bytes).digest('hex')) {
        seen.set(f.path, read.sig)
        continue
      }
      const r = await sink.recordOutput(sessionId, f.path, read.bytes)
      seen.set(f.path, read.sig)
      refusedSigs.delete(f.path)
      if (!r.unchanged) done.kept.push(f.path)
    }
    for (const s of list.skipped) refuse(s.path, s.reason, s.reason)
    if (list.truncated) refuse('', `truncated:${this.maxFiles}`, `more than ${this.maxFiles} files: the rest were not collected`)
    return done
  }

  /** Forgets a session's signatures (its sandbox is released; a new one is looked at afresh). */
  forget(sessionId: string): void {
    this.seen.delete(sessionId)
    this.refusedSigs.delete(sessionId)
  }
}

/** The note a tool result carries about outputs left out (empty when every file was kept: nothing to say). */
export function outputsNote(c: OutputsCollected): string {
  const parts: string[] = []
  for (const r of c.refused) parts.push(`not kept: ${r.path ? `${OUTPUTS_DIR}/${r.path}` : OUTPUTS_DIR} (${r.reason})`)
  return parts.length ? `\n[corral: outputs ${parts.join('; ')}]` : ''
}
