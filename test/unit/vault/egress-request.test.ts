import { describe, expect, it } from 'vitest'
import { canonicalPathSegments, hostHeaderProblem, repositoryFor, requestTarget } from '../../../src/main/vault/egress-request'

const tunnel = { host: 'git.example.test', port: 443, tls: true }

describe('canonicalPathSegments', () => {
  it('decodes a canonical path into its segments', () => {
    expect(canonicalPathSegments('/acme/%77idgets.git/info/refs?service=x')).toEqual({ segments: ['acme', 'widgets.git', 'info', 'refs'] })
  })

  it.each([
    ['/a/../b', /dot segment/],
    ['/a/%2E%2e/b', /dot segment/],
    ['/a/./b', /dot segment/],
    ['/a/..;x/b', /dot segment/],
    ['/a%2fb', /encodes a slash/],
    ['/a%5Cb', /encodes a slash, backslash/],
    ['/a%2500', /percent sign/],
    ['/a\\b', /backslash/],
    ['/a%g1', /malformed/],
    ['/a%ff', /not valid UTF-8/],
  ])('names the rule %s breaks', (path, rule) => {
    const r = canonicalPathSegments(path)
    expect('problem' in r && r.problem).toMatch(rule)
  })
})

describe('repositoryFor', () => {
  const repos = [{ url: 'https://git.example.test/acme/widgets.git' }]

  it('matches the repository exactly: name, name.git, or either followed by a slash', () => {
    for (const p of ['/acme/widgets', '/acme/widgets.git', '/acme/widgets/', '/acme/widgets.git/info/refs']) expect(repositoryFor(repos, tunnel, p)).toBe(repos[0])
    for (const p of ['/acme/widgets.git-x', '/acme/widgets-x', '/acme/widgetsgit', '/acme', '/ACME/widgets.git']) expect(repositoryFor(repos, tunnel, p)).toBeUndefined()
  })

  it('matches only the scheme and port of the repository URL', () => {
    expect(repositoryFor(repos, { ...tunnel, tls: false }, '/acme/widgets.git')).toBeUndefined()
    expect(repositoryFor(repos, { ...tunnel, port: 8443 }, '/acme/widgets.git')).toBeUndefined()
  })

  it('refuses a non-canonical path at a repository host, and ignores paths on other hosts', () => {
    expect(() => repositoryFor(repos, tunnel, '/acme/widgets.git/../secret.git')).toThrow(/dot segment.*paths must be canonical/)
    expect(repositoryFor(repos, { ...tunnel, host: 'other.example.test' }, '/a/../b')).toBeUndefined()
  })
})

describe('hostHeaderProblem', () => {
  it('accepts the target with or without its default port, in any case', () => {
    expect([hostHeaderProblem('git.example.test', tunnel), hostHeaderProblem('GIT.example.test:443', tunnel), hostHeaderProblem(undefined, tunnel)]).toEqual([undefined, undefined, undefined])
    expect(hostHeaderProblem('[2001:db8::1]:8080', { host: '2001:db8::1', port: 8080, tls: false })).toBeUndefined()
  })

  it('names a foreign host or port', () => {
    expect(hostHeaderProblem('other.example.test', tunnel)).toMatch(/does not name the request's target git\.example\.test:443/)
    expect(hostHeaderProblem('git.example.test:80', tunnel)).toMatch(/does not name/)
  })
})

describe('requestTarget', () => {
  it('keeps a plain request path exactly as sent, dot segments included', () => {
    expect(requestTarget('http://Git.Example.test:8080/a/../b?q', undefined)).toEqual({ target: { host: 'git.example.test', port: 8080, tls: false }, path: '/a/../b?q' })
    expect(requestTarget('http://x.test?q', undefined)?.path).toBe('/?q')
    expect(requestTarget('ftp://x.test/', undefined)).toBeUndefined()
  })

  it('refuses a target with a raw non-ASCII or control character', () => {
    expect(() => requestTarget('/caf\u00e9', tunnel)).toThrow(/non-ASCII character/)
    expect(() => requestTarget('http://x.test/a\u0001', undefined)).toThrow(/control/)
  })

  it('refuses an absolute-form target inside a tunnel and user information in a URL', () => {
    expect(() => requestTarget('https://other.example.test/', tunnel)).toThrow(/must be a path/)
    expect(() => requestTarget('http://user@x.test/', undefined)).toThrow(/user information/)
  })
})
