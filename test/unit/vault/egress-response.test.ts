import type http from 'node:http'
import { Readable } from 'node:stream'
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { contentCodings, repositoryAuthorization, repositoryScrubValues, scrubbedBody } from '../../../src/main/vault/egress-response'

const SECRET = 'sk-unit-SECRET-42'

async function text(r: Readable): Promise<string> {
  const out: Buffer[] = []
  for await (const c of r) out.push(c as Buffer)
  return Buffer.concat(out).toString()
}

/** A response stream with the given content-encoding header, in chunks of 7 bytes. */
function response(body: Buffer, encoding?: string): http.IncomingMessage {
  const chunks: Buffer[] = []
  for (let i = 0; i < body.length; i += 7) chunks.push(body.subarray(i, i + 7))
  return Object.assign(Readable.from(chunks), { headers: encoding ? { 'content-encoding': encoding } : {} }) as unknown as http.IncomingMessage
}

describe('scrubbedBody', () => {
  it.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ] as const)('decodes a %s body and redacts the secret in it', async (coding, encode) => {
    const up = response(encode(Buffer.from(`stored: ${SECRET}!`)), coding)
    expect(await text(scrubbedBody(up, contentCodings(up, 'h'), [SECRET]))).toBe('stored: [redacted by corral]!')
  })

  it('decodes stacked codings in reverse order of listing', async () => {
    const up = response(brotliCompressSync(gzipSync(Buffer.from(SECRET))), 'gzip, br')
    expect(await text(scrubbedBody(up, contentCodings(up, 'h'), [SECRET]))).toBe('[redacted by corral]')
  })

  it('passes an identity body with no secret through unchanged', async () => {
    const up = response(Buffer.from('plain bytes'), 'identity')
    expect(contentCodings(up, 'h')).toEqual([])
    expect(await text(scrubbedBody(up, [], [SECRET]))).toBe('plain bytes')
  })
})

describe('contentCodings', () => {
  it('refuses a coding the proxy cannot decode, naming it and the host', () => {
    expect(() => contentCodings(response(Buffer.alloc(0), 'gzip, zstd'), 'store.example')).toThrow(/store\.example answered with content-encoding "zstd"/)
  })
})

describe('repositoryScrubValues', () => {
  it("covers the token and the base64 credentials of the proxy's Basic header", () => {
    const [token, basic] = repositoryScrubValues('ghp_x')
    expect(token).toBe('ghp_x')
    expect(repositoryAuthorization('ghp_x')).toBe(`Basic ${basic}`)
    expect(Buffer.from(basic!, 'base64').toString()).toBe('x-access-token:ghp_x')
  })
})
