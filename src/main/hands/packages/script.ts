import type { PackagePlan } from './plan'

// The bash script that installs a plan (Docker: as root in a setup container; bubblewrap: under a prefix).

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`
const words = (list: string[]) => list.map(q).join(' ')

/**
 * The bash script that installs a plan. `prefix` (bubblewrap) installs npm, pip, gem, cargo and go
 * packages under a directory instead of the system (apt needs a root filesystem of its own: Docker
 * only). Every step prints a `[packages]` progress line; a failure prints
 * `[packages] FAILED: <what>` and exits non-zero.
 */
export function installScript(plan: PackagePlan, options: { prefix?: string } = {}): string {
  const p = plan.packages
  const pre = options.prefix
  const lines = [
    'set -o pipefail',
    'export DEBIAN_FRONTEND=noninteractive',
    'say() { printf "[packages] %s\\n" "$*"; }',
    'fail() { printf "[packages] FAILED: %s\\n" "$*"; exit 3; }',
    'need() { command -v "$1" >/dev/null 2>&1 || fail "packages.$2 needs $1, which this sandbox image does not have: $3"; }',
  ]
  if (p.apt.length) {
    if (pre) lines.push('fail "packages.apt needs a root filesystem of its own: use the docker backend (config.corral.backend) for this environment"')
    lines.push('need apt-get apt "use a Debian or Ubuntu based image"')
    if (plan.sources.apt) lines.push(`printf '%s\\n' ${words(plan.sources.apt)} > /etc/apt/sources.list`, 'rm -f /etc/apt/sources.list.d/*')
    lines.push(
      'say "apt: updating the package lists"',
      'apt-get -q -o APT::Sandbox::User=root -o Acquire::Retries=2 update 2>&1 || fail "packages.apt: apt-get update failed"',
      `say "apt: installing ${p.apt.length} package(s)"`,
      `apt-get -q -y -o APT::Sandbox::User=root --no-install-recommends install ${words(p.apt)} 2>&1 || fail "packages.apt: apt-get install failed"`,
      'apt-get clean; rm -rf /var/lib/apt/lists/*',
    )
  }
  if (p.pip.length) {
    lines.push('python3 -m pip --version >/dev/null 2>&1 || fail "packages.pip needs pip, which this sandbox image does not have: add python3-pip to packages.apt"')
    const index = plan.sources.pip ? ` --index-url ${q(plan.sources.pip)}${plan.sources.pip.startsWith('http:') ? ` --trusted-host ${q(new URL(plan.sources.pip).host)}` : ''}` : ''
    const target = pre ? ` --target ${q(`${pre}/python`)}` : ' --break-system-packages'
    lines.push(
      `say "pip: installing ${p.pip.length} package(s)"`,
      `python3 -m pip install --no-cache-dir --disable-pip-version-check --no-input --root-user-action=ignore --progress-bar off${target}${index} ${words(p.pip)} 2>&1 || fail "packages.pip: pip install failed"`,
    )
  }
  if (p.npm.length) {
    lines.push('need npm npm "add npm to packages.apt"')
    const registry = plan.sources.npm ? ` --registry ${q(plan.sources.npm)}` : ''
    const target = pre ? ` --prefix ${q(`${pre}/npm`)}` : ''
    lines.push(
      `say "npm: installing ${p.npm.length} package(s)"`,
      `npm install --global --no-fund --no-audit --no-update-notifier --loglevel=warn${target}${registry} ${words(p.npm)} 2>&1 || fail "packages.npm: npm install failed"`,
      'rm -rf "$HOME/.npm/_cacache"',
    )
  }
  if (p.gem.length) {
    lines.push('need gem gem "add ruby to packages.apt"', `say "gem: installing ${p.gem.length} package(s)"`)
    lines.push(`gem install --no-document${pre ? ` --install-dir ${q(`${pre}/gem`)} --bindir ${q(`${pre}/bin`)}` : ''} ${words(p.gem)} 2>&1 || fail "packages.gem: gem install failed"`)
  }
  if (p.cargo.length) {
    lines.push('need cargo cargo "add cargo to packages.apt"', `say "cargo: installing ${p.cargo.length} package(s)"`)
    lines.push(`cargo install --root ${q(pre ? `${pre}/cargo` : '/usr/local')} ${words(p.cargo)} 2>&1 || fail "packages.cargo: cargo install failed"`, 'rm -rf "$HOME/.cargo/registry"')
  }
  if (p.go.length) {
    lines.push('need go go "add golang-go to packages.apt"', `say "go: installing ${p.go.length} package(s)"`)
    lines.push(`GOBIN=${q(pre ? `${pre}/bin` : '/usr/local/bin')} go install ${words(p.go.map((g) => (g.includes('@') ? g : `${g}@latest`)))} 2>&1 || fail "packages.go: go install failed"`, 'rm -rf "$HOME/go/pkg"')
  }
  // What an apt package (or a postinst) brought in cannot regain privileges inside a sandbox.
  if (!pre) lines.push('find / -xdev -perm /6000 -type f -exec chmod ug-s {} + 2>/dev/null', 'true')
  lines.push('say "done"')
  return lines.join('\n')
}

/** The environment variables that put a prefix install (bubblewrap) on the sandbox's paths. */
export function prefixEnv(prefix: string): Record<string, string> {
  return {
    PATH: `${prefix}/bin:${prefix}/npm/bin:${prefix}/python/bin:${prefix}/cargo/bin:/usr/local/bin:/usr/bin:/bin`,
    NODE_PATH: `${prefix}/npm/lib/node_modules`,
    GEM_PATH: `${prefix}/gem`,
    PYTHONPATH: `${prefix}/python`,
  }
}
