import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * A package mirror on 127.0.0.1 that real apt, pip and npm inside a sandbox install from (through
 * Corral's egress proxy; the test's resolver and dialer route the mirror's names here):
 * - npm registry at `/npm/`: packument + tarball of `corral-greet` (a bin that prints a line);
 * - PEP 503 index at `/simple/`: a pure-Python wheel `corral-pyhello`;
 * - flat apt repository at `/apt/`: `corral-hello` (a /usr/bin script), unsigned (`[trusted=yes]`).
 * Everything is built here from nothing with tar, python3's zipfile and dpkg-deb. Records requests.
 */
export interface PackageMirror {
  port: number
  /** "GET /npm/corral-greet" … in order. */
  requests: string[]
  close(): Promise<void>
}

export const MIRROR_OUTPUT = {
  npm: 'hello from corral-greet 1.0.0',
  pip: 'hello from corral-pyhello 1.0',
  apt: 'hello from corral-hello 1.0',
}

export async function packageMirror(hostFor: { npm: string; pip: string; apt: string }): Promise<PackageMirror> {
  const work = mkdtempSync(join(tmpdir(), 'corral-mirror-'))
  const files = new Map<string, { type: string; body: Buffer }>()

  // npm: a package with a bin
  const pkg = join(work, 'npm', 'package')
  mkdirSync(pkg, { recursive: true })
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'corral-greet', version: '1.0.0', bin: { 'corral-greet': 'bin.js' }, license: 'MIT' }))
  writeFileSync(join(pkg, 'bin.js'), `#!/usr/bin/env node\nconsole.log(${JSON.stringify(MIRROR_OUTPUT.npm)})\n`)
  chmodSync(join(pkg, 'bin.js'), 0o755)
  execFileSync('tar', ['-czf', join(work, 'greet.tgz'), '-C', join(work, 'npm'), 'package'])
  const tgz = readFileSync(join(work, 'greet.tgz'))
  const tarball = `http://${hostFor.npm}/npm/corral-greet/-/corral-greet-1.0.0.tgz`
  const packument = {
    name: 'corral-greet',
    'dist-tags': { latest: '1.0.0' },
    versions: {
      '1.0.0': {
        name: 'corral-greet',
        version: '1.0.0',
        bin: { 'corral-greet': 'bin.js' },
        dist: { tarball, shasum: createHash('sha1').update(tgz).digest('hex'), integrity: `sha512-${createHash('sha512').update(tgz).digest('base64')}` },
      },
    },
  }
  files.set('/npm/corral-greet', { type: 'application/json', body: Buffer.from(JSON.stringify(packument)) })
  files.set('/npm/corral-greet/-/corral-greet-1.0.0.tgz', { type: 'application/octet-stream', body: tgz })

  // pip: a pure-Python wheel
  const wheel = join(work, 'corral_pyhello-1.0-py3-none-any.whl')
  execFileSync('python3', [
    '-c',
    `import zipfile, sys
z = zipfile.ZipFile(sys.argv[1], 'w')
z.writestr('corral_pyhello/__init__.py', 'def hello():\\n    return ${JSON.stringify(MIRROR_OUTPUT.pip)}\\n')
z.writestr('corral_pyhello-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: corral-pyhello\\nVersion: 1.0\\n')
z.writestr('corral_pyhello-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: corral-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')
z.writestr('corral_pyhello-1.0.dist-info/RECORD', 'corral_pyhello/__init__.py,,\\ncorral_pyhello-1.0.dist-info/METADATA,,\\ncorral_pyhello-1.0.dist-info/WHEEL,,\\ncorral_pyhello-1.0.dist-info/RECORD,,\\n')
z.close()`,
    wheel,
  ])
  const whl = readFileSync(wheel)
  const whlName = 'corral_pyhello-1.0-py3-none-any.whl'
  files.set('/simple/corral-pyhello/', { type: 'text/html', body: Buffer.from(`<!DOCTYPE html><html><body><a href="/files/${whlName}#sha256=${createHash('sha256').update(whl).digest('hex')}">${whlName}</a></body></html>`) })
  files.set(`/files/${whlName}`, { type: 'application/octet-stream', body: whl })

  // apt: a flat repository with one package
  const root = join(work, 'deb')
  mkdirSync(join(root, 'DEBIAN'), { recursive: true })
  mkdirSync(join(root, 'usr', 'bin'), { recursive: true })
  writeFileSync(join(root, 'DEBIAN', 'control'), 'Package: corral-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: Corral tests <tests@corral.invalid>\nDescription: prints a line\n')
  writeFileSync(join(root, 'usr', 'bin', 'corral-hello'), `#!/bin/sh\necho ${JSON.stringify(MIRROR_OUTPUT.apt)}\n`)
  chmodSync(join(root, 'usr', 'bin', 'corral-hello'), 0o755)
  execFileSync('dpkg-deb', ['--root-owner-group', '--build', root, join(work, 'corral-hello_1.0_all.deb')], { stdio: 'ignore' })
  const deb = readFileSync(join(work, 'corral-hello_1.0_all.deb'))
  const packages = Buffer.from(
    'Package: corral-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: Corral tests <tests@corral.invalid>\n' +
      `Filename: ./corral-hello_1.0_all.deb\nSize: ${deb.length}\nSHA256: ${createHash('sha256').update(deb).digest('hex')}\nDescription: prints a line\n\n`,
  )
  const release = Buffer.from(
    `Origin: corral-test\nLabel: corral-test\nSuite: stable\nCodename: stable\nDate: ${new Date().toUTCString()}\nArchitectures: amd64 arm64 all\n` +
      `SHA256:\n ${createHash('sha256').update(packages).digest('hex')} ${packages.length} Packages\n`,
  )
  files.set('/apt/Packages', { type: 'text/plain', body: packages })
  files.set('/apt/Release', { type: 'text/plain', body: release })
  files.set('/apt/corral-hello_1.0_all.deb', { type: 'application/vnd.debian.binary-package', body: deb })
  rmSync(work, { recursive: true, force: true })

  const requests: string[] = []
  const server = http.createServer((req, res) => {
    // Through a proxy the request line is absolute: keep the path.
    const path = new URL(req.url ?? '/', 'http://x').pathname.replace(/^\/apt\/\.\//, '/apt/')
    requests.push(`${req.method} ${path}`)
    const f = files.get(path) ?? files.get(path.replace(/\/?$/, '/'))
    if (!f || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n')
      return
    }
    res.writeHead(200, { 'content-type': f.type, 'content-length': f.body.length })
    res.end(req.method === 'HEAD' ? undefined : f.body)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}
