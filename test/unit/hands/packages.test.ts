import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { packageCacheKey, packagePlan } from '../../../src/main/hands/packages/plan'
import { installScript } from '../../../src/main/hands/packages/script'
import { InstallFlights, installFailure, runInstall } from '../../../src/main/hands/packages/install'
import { parseToolsetInput } from '../../../src/shared/tools/toolset'
import { environmentCreateSchema } from '../../../src/shared/api/schemas'

describe('packagePlan: an environment config → what to install', () => {
  it('is undefined when no package is listed', () => {
    expect(packagePlan({ type: 'cloud' })).toBeUndefined()
    expect(packagePlan({ type: 'cloud', packages: { type: 'packages', apt: [], npm: [], pip: null } })).toBeUndefined()
  })

  it('deduplicates and sorts each list, keeps the managers apart, and summarises', () => {
    const plan = packagePlan({ type: 'cloud', packages: { npm: ['typescript@5', 'left-pad', 'typescript@5'], apt: ['jq'] } })!
    expect(plan.packages.npm).toEqual(['left-pad', 'typescript@5'])
    expect(plan.packages.apt).toEqual(['jq'])
    expect(plan.packages.pip).toEqual([])
    expect(plan.summary).toBe('apt: jq; npm: left-pad typescript@5')
    expect(plan.mirrorHosts).toEqual([])
  })

  it('refuses a spec that a package manager would read as an option, or that carries shell', () => {
    for (const bad of ['--index-url=http://evil', '-e', 'a b', "x'y", 'a;b', '$(id)']) {
      expect(() => packagePlan({ packages: { pip: ['ok', bad] } }), bad).toThrow(/config\.packages\.pip\[1\]/)
    }
    // …and the API boundary refuses the same specs with a 400 naming the field.
    const r = environmentCreateSchema.safeParse({ name: 'e', config: { type: 'cloud', packages: { npm: ['--registry=http://evil'] } } })
    expect(r.success).toBe(false)
    expect(r.error!.issues[0]!.path.join('.')).toBe('config.packages.npm.0')
  })

  it('reads mirrors from config.corral.package_sources and allows their hosts', () => {
    const plan = packagePlan({
      packages: { pip: ['requests>=2'] },
      corral: { package_sources: { pip: 'https://pypi.corp.example/simple/', npm: 'http://npm.corp.example:8080/', apt: ['deb [trusted=yes] http://apt.corp.example/debian bookworm main'] } },
    })!
    expect(plan.mirrorHosts).toEqual(['apt.corp.example', 'npm.corp.example', 'pypi.corp.example'])
    expect(() => packagePlan({ packages: { pip: ['x'] }, corral: { package_sources: { pip: 'https://user:pw@pypi.corp.example/simple/' } } })).toThrow(/no credentials in a mirror URL/)
    expect(() => packagePlan({ packages: { pip: ['x'] }, corral: { package_sources: { apt: ['not a line'] } } })).toThrow(/package_sources\.apt\[0\]/)
    expect(environmentCreateSchema.safeParse({ name: 'e', config: { type: 'cloud', corral: { package_sources: { npm: 'ftp://x' } } } }).success).toBe(false)
  })
})

describe('packageCacheKey', () => {
  const plan = (c: Record<string, unknown>) => packagePlan(c)!
  it('ignores order and duplicates, and changes with the base, the packages and the mirrors', () => {
    const a = packageCacheKey(plan({ packages: { npm: ['a', 'b'] } }), 'sha256:1')
    expect(packageCacheKey(plan({ packages: { npm: ['b', 'a', 'a'] } }), 'sha256:1')).toBe(a)
    expect(packageCacheKey(plan({ packages: { npm: ['a', 'b'] } }), 'sha256:2')).not.toBe(a)
    expect(packageCacheKey(plan({ packages: { npm: ['a', 'b', 'c'] } }), 'sha256:1')).not.toBe(a)
    expect(packageCacheKey(plan({ packages: { pip: ['a', 'b'] } }), 'sha256:1')).not.toBe(a)
    expect(packageCacheKey(plan({ packages: { npm: ['a', 'b'] }, corral: { package_sources: { npm: 'http://m/' } } }), 'sha256:1')).not.toBe(a)
    expect(a).toMatch(/^[0-9a-f]{16}$/)
  })
})

describe('installScript', () => {
  it('is valid bash that installs apt first, then pip and npm, each with a progress line', () => {
    const script = installScript(packagePlan({ packages: { npm: ['@scope/pkg@^1.2'], pip: ['pkg[extra]>=1,<2'], apt: ['jq=1.6*'] } })!)
    execFileSync('bash', ['-n'], { input: script })
    const at = (s: string) => script.indexOf(s)
    expect(at('apt-get -q -y')).toBeGreaterThan(0)
    expect(at('apt-get -q -y')).toBeLessThan(at('python3 -m pip install'))
    expect(at('python3 -m pip install')).toBeLessThan(at('npm install --global'))
    expect(script).toContain("'pkg[extra]>=1,<2'")
    expect(script).toContain("'@scope/pkg@^1.2'")
    expect(script).toContain('say "npm: installing 1 package(s)"')
  })

  it('installs under a prefix for a backend without a root of its own, and refuses apt there', () => {
    const script = installScript(packagePlan({ packages: { npm: ['a'], pip: ['b'] } })!, { prefix: '/opt/corral/env' })
    expect(script).toContain("--prefix '/opt/corral/env/npm'")
    expect(script).toContain("--target '/opt/corral/env/python'")
    expect(script).not.toContain('--break-system-packages')
    const withApt = installScript(packagePlan({ packages: { apt: ['jq'] } })!, { prefix: '/p' })
    expect(withApt).toContain('packages.apt needs a root filesystem of its own')
  })

  it('uses the mirrors, trusting a plain-http pip index by host', () => {
    const script = installScript(packagePlan({ packages: { pip: ['x'], npm: ['y'], apt: ['z'] }, corral: { package_sources: { pip: 'http://pypi.m:8080/simple/', npm: 'https://npm.m/', apt: ['deb [trusted=yes] http://apt.m/ ./'] } } })!)
    expect(script).toContain("--index-url 'http://pypi.m:8080/simple/' --trusted-host 'pypi.m:8080'")
    expect(script).toContain("--registry 'https://npm.m/'")
    expect(script).toContain("printf '%s\\n' 'deb [trusted=yes] http://apt.m/ ./' > /etc/apt/sources.list")
  })

  it('stops at the first failing manager and says which one, in the output installFailure reads', () => {
    const script = installScript(packagePlan({ packages: { npm: ['a'] } })!).replace(/^npm install .*$/m, 'echo "npm ERR! 404 Not Found - GET http://m/a" && false || fail "packages.npm: npm install failed"')
    let out = ''
    try {
      execFileSync('bash', ['-c', script], { encoding: 'utf8', env: { PATH: process.env.PATH, HOME: '/tmp' } })
    } catch (err) {
      out = (err as { stdout: string }).stdout
    }
    expect(installFailure(out)).toBe('packages.npm: npm install failed; its output ended with:\nnpm ERR! 404 Not Found - GET http://m/a')
  })
})

describe('InstallFlights', () => {
  it('runs one install per key at a time and forgets it once done (a failure can be retried)', async () => {
    const flights = new InstallFlights()
    let runs = 0
    const install = () => new Promise<string>((r) => setTimeout(() => r(`image${++runs}`), 10))
    const [a, b] = await Promise.all([flights.run('k', install), flights.run('k', install)])
    expect([a, b, runs]).toEqual(['image1', 'image1', 1])
    await expect(flights.run('k', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom')
    expect(await flights.run('k', install)).toBe('image2')
    expect(flights.size).toBe(0)
  })
})

describe('runInstall', () => {
  it("calls the runner's bash with fields the toolset table accepts (the runner refuses any other)", async () => {
    const calls: { name: string; input: Record<string, unknown> }[] = []
    const connection = { call: async (c: { name: string; input: Record<string, unknown> }) => (calls.push(c), { content: 'ok', isError: false, exitCode: 0 }) }
    await runInstall(connection as unknown as Parameters<typeof runInstall>[0], { script: 'echo install', idPrefix: 'pkg', environmentId: 'env_1', progress: () => {} })
    expect(calls).toHaveLength(1)
    expect(parseToolsetInput(calls[0]!.name, calls[0]!.input)).toEqual({ ok: true, input: calls[0]!.input })
  })
})
