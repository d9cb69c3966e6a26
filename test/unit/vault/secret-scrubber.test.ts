import { Readable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { SecretScrubber } from '../../../src/main/vault/egress-proxy'

async function through(chunks: string[], secrets: string[], mode: 'redact' | 'mask' = 'redact'): Promise<string> {
  const out: Buffer[] = []
  const s = Readable.from(chunks.map((c) => Buffer.from(c))).pipe(new SecretScrubber(secrets, mode))
  for await (const c of s) out.push(c as Buffer)
  return Buffer.concat(out).toString()
}

describe('SecretScrubber', () => {
  it('redacts a secret inside one chunk', async () => {
    expect(await through(['a sk-SECRET-1 b'], ['sk-SECRET-1'])).toBe('a [redacted by corral] b')
  })

  it('redacts a secret split across chunk boundaries, byte by byte', async () => {
    const text = 'xx sk-SECRET-1 yy sk-SECRET-1'
    expect(await through(text.split(''), ['sk-SECRET-1'])).toBe('xx [redacted by corral] yy [redacted by corral]')
  })

  it('redacts several secrets and leaves other text intact', async () => {
    expect(await through(['token=', 'AAA', '&other=B', 'BB&keep=CC'], ['AAA', 'BBB'])).toBe('token=[redacted by corral]&other=[redacted by corral]&keep=CC')
  })

  it('masks with the same number of bytes in mask mode, so framed streams keep their lengths', async () => {
    const out = await through(['frame: sk-', 'SECRET-1 end'], ['sk-SECRET-1'], 'mask')
    expect(out).toBe('frame: *********** end')
    expect(out.length).toBe('frame: sk-SECRET-1 end'.length)
  })

  it('passes text through unchanged when nothing matches', async () => {
    expect(await through(['hello ', 'world'], ['sk-none'])).toBe('hello world')
  })
})
