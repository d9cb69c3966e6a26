import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { outputsNote, SessionOutputs, type OutputSink } from '../../../src/main/hands/resources/session-outputs'
import type { Sandbox, SandboxFileList } from '../../../src/main/hands/sandbox'

/** A sandbox's outputs folder in memory: files by path, each with a signature bumped on write. */
function folder(files: Record<string, string>) {
  const state = new Map(Object.entries(files).map(([p, c]) => [p, { bytes: Buffer.from(c), sig: 1 }]))
  const skipped: SandboxFileList['skipped'] = []
  let changeWhileReading: string | undefined
  const sandbox: Sandbox = {
    backend: 'memory',
    provision: async () => {},
    execute: async () => ({ content: '', isError: false }),
    dispose: async () => {},
    listFiles: async () => ({ files: [...state].map(([path, f]) => ({ path, size: f.bytes.length, sig: String(f.sig) })), skipped, truncated: false }),
    readFile: async (path, { maxBytes }) => {
      const f = state.get(path.replace('/mnt/session/outputs/', ''))
      if (!f || f.bytes.length > maxBytes) return undefined
      if (changeWhileReading === path) {
        changeWhileReading = undefined
        f.sig++
        return undefined
      }
      return { bytes: f.bytes, sig: String(f.sig) }
    },
  }
  return {
    sandbox,
    skipped,
    write(path: string, content: string) {
      const f = state.get(path)
      state.set(path, { bytes: Buffer.from(content), sig: (f?.sig ?? 0) + 1 })
    },
    changeWhileReading(path: string) {
      changeWhileReading = `/mnt/session/outputs/${path}`
    },
  }
}

function sink() {
  const kept = new Map<string, string>()
  const records: string[] = []
  const s: OutputSink = {
    outputs: () => [...kept].map(([path, content]) => ({ path, sha256: createHash('sha256').update(content).digest('hex') })),
    recordOutput: async (_session, path, bytes) => {
      const unchanged = kept.get(path) === bytes.toString()
      kept.set(path, bytes.toString())
      records.push(path)
      return { unchanged }
    },
  }
  return { sink: s, kept, records }
}

describe('SessionOutputs', () => {
  it('keeps new and rewritten files and reads nothing again while their signature holds', async () => {
    const f = folder({ 'a.txt': 'one', 'dir/b.csv': 'x,y' })
    const k = sink()
    const outputs = new SessionOutputs({ sink: () => k.sink, maxFileBytes: () => 1000 })
    expect((await outputs.collect('sesn_1', f.sandbox)).kept).toEqual(['a.txt', 'dir/b.csv'])
    expect((await outputs.collect('sesn_1', f.sandbox)).kept).toEqual([])
    f.write('a.txt', 'two')
    expect((await outputs.collect('sesn_1', f.sandbox)).kept).toEqual(['a.txt'])
    expect(k.kept.get('a.txt')).toBe('two')
    expect(k.records).toEqual(['a.txt', 'dir/b.csv', 'a.txt'])
  })

  it('names a file over the size limit once per version and keeps it once it fits', async () => {
    const f = folder({ 'big.bin': 'x'.repeat(20) })
    const k = sink()
    const outputs = new SessionOutputs({ sink: () => k.sink, maxFileBytes: () => 10 })
    const first = await outputs.collect('sesn_1', f.sandbox)
    expect(first.refused).toEqual([{ path: 'big.bin', reason: 'over the file size limit of 10 bytes' }])
    expect(outputsNote(first)).toBe('\n[corral: outputs not kept: /mnt/session/outputs/big.bin (over the file size limit of 10 bytes)]')
    expect((await outputs.collect('sesn_1', f.sandbox)).refused).toEqual([])
    f.write('big.bin', 'small')
    expect((await outputs.collect('sesn_1', f.sandbox)).kept).toEqual(['big.bin'])
  })

  it('takes a file that changed while it was read at the next collection', async () => {
    const f = folder({ 'log.txt': 'partial' })
    const k = sink()
    const outputs = new SessionOutputs({ sink: () => k.sink, maxFileBytes: () => 1000 })
    f.changeWhileReading('log.txt')
    expect((await outputs.collect('sesn_1', f.sandbox)).kept).toEqual([])
    expect((await outputs.collect('sesn_1', f.sandbox)).kept).toEqual(['log.txt'])
  })

  it('recognises outputs kept by an earlier process by their content and records them again only when they differ', async () => {
    const f = folder({ 'same.txt': 'kept', 'new.txt': 'fresh' })
    const k = sink()
    k.kept.set('same.txt', 'kept')
    const outputs = new SessionOutputs({ sink: () => k.sink, maxFileBytes: () => 1000 })
    expect((await outputs.collect('sesn_1', f.sandbox)).kept).toEqual(['new.txt'])
    expect(k.records).toEqual(['new.txt'])
  })

  it('names symlinks and special files the runner left out, once', async () => {
    const f = folder({})
    f.skipped.push({ path: 'link', reason: 'a symlink' })
    const outputs = new SessionOutputs({ sink: () => sink().sink, maxFileBytes: () => 1000 })
    expect((await outputs.collect('sesn_1', f.sandbox)).refused).toEqual([{ path: 'link', reason: 'a symlink' }])
    expect((await outputs.collect('sesn_1', f.sandbox)).refused).toEqual([])
  })
})
