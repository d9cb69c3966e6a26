import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, join, posix } from 'node:path'
import { promisify } from 'node:util'
import { CorralError } from '../../../shared/errors'
import { SESSION_MOUNT, WORKSPACE } from '../settings'

const run = promisify(execFile)

/**
 * Session resources placed in the workspace when a sandbox is provisioned:
 * - `github_repository` {url, mount_path?, checkout?}: a repository the session's egress proxy
 *   serves with its token (`egressRepositories`) is cloned inside the sandbox by the runner,
 *   through the proxy, so the token never enters the sandbox; any other (a public URL or a local
 *   path) is cloned on the host, sent in as a tar and unpacked by the runner as the sandbox user;
 * - `file` {file_id, mount_path?, content? | content_base64?}: placed here only with inline bytes;
 *   the engine's sessions' files are bound read-only from the file store by FileMounts
 *   (resources/file-mounts.ts) and never reach this function. Nothing here ever reads a host
 *   path: a resource that names one is refused.
 * Something already at the mount path is left alone, so a replacement sandbox does not re-clone.
 */
export interface ResourcePlacer {
  exists(path: string): Promise<boolean>
  place(params: { path: string; contentBase64?: string; tarBase64?: string }): Promise<{ existed: boolean }>
  /** Clones inside the sandbox through its egress proxy. */
  clone?(params: { url: string; path: string; branch?: string; sha?: string }): Promise<{ existed: boolean }>
}

export interface PlaceResourcesParams {
  /** The session's resources (kinds other than github_repository and file are skipped). */
  resources?: readonly Record<string, unknown>[]
  /** http(s) URLs the sandbox's egress proxy serves with their token: cloned inside the sandbox. */
  egressRepositories?: readonly string[]
}

const MAX_REPO_TAR_BYTES = 512 * 1024 * 1024

export async function placeResources(runner: ResourcePlacer, options: PlaceResourcesParams): Promise<void> {
  for (const res of options.resources ?? []) {
    if (res.type === 'github_repository') await placeRepository(runner, res, options)
    else if (res.type === 'file') await placeFile(runner, res)
    // memory_store and unknown kinds are not the hands' business
  }
}

/** The in-sandbox path a resource goes to; relative paths are under /workspace. */
export function mountPath(res: Record<string, unknown>, fallback: string): string {
  const p = typeof res.mount_path === 'string' && res.mount_path ? res.mount_path : fallback
  const abs = posix.resolve(WORKSPACE, p)
  const inside = [WORKSPACE, SESSION_MOUNT].some((root) => abs === root || abs.startsWith(root + '/'))
  if (!inside || abs === WORKSPACE || abs === SESSION_MOUNT) {
    throw new CorralError('invalid_request_error', `resource mount_path ${JSON.stringify(p)} must be a path inside ${WORKSPACE} or ${SESSION_MOUNT}`)
  }
  return abs
}

/** Accepts https/http/git/file URLs and absolute local paths; refuses option-like and `ext::` URLs. */
export function checkRepositoryUrl(url: unknown): string {
  if (typeof url !== 'string' || url === '') throw new CorralError('invalid_request_error', 'github_repository resource: url is required')
  if (/^(https?|git|file):\/\//.test(url) || (url.startsWith('/') && !url.includes('\0'))) return url
  throw new CorralError('invalid_request_error', `github_repository resource: url ${JSON.stringify(url)} must be an https://, http://, git://, file:// URL or an absolute local path`)
}

async function placeRepository(runner: ResourcePlacer, res: Record<string, unknown>, options: PlaceResourcesParams): Promise<void> {
  const url = checkRepositoryUrl(res.url)
  const name = basename(url.replace(/\/+$/, '')).replace(/\.git$/, '') || 'repository'
  const target = mountPath(res, `${WORKSPACE}/${name}`)
  if (await runner.exists(target)) return
  const checkout = res.checkout as { type?: string; name?: string; sha?: string } | null | undefined
  if (runner.clone && /^https?:\/\//.test(url) && options.egressRepositories?.includes(url)) {
    try {
      await runner.clone({ url, path: target, branch: checkout?.type === 'branch' ? checkout.name : undefined, sha: checkout?.type === 'commit' ? checkout.sha : undefined })
      return
    } catch (err) {
      throw new CorralError('sandbox_error', `could not clone ${url} into ${target} through the egress proxy: ${(err as Error).message.replace(/^the sandbox runner refused a request: /, '')}`, { cause: err })
    }
  }
  const dir = await mkdtemp(join(tmpdir(), 'corral-clone-'))
  const git = (args: string[], cwd?: string) =>
    run('git', ['-c', 'protocol.ext.allow=never', '-c', 'core.hooksPath=/dev/null', ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1' },
      timeout: 300_000,
      maxBuffer: 16 * 1024 * 1024,
    })
  try {
    const branch = checkout?.type === 'branch' && checkout.name ? ['--branch', checkout.name] : []
    await git(['clone', '--quiet', '--no-hardlinks', ...branch, '--', url, join(dir, 'repo')])
    if (checkout?.type === 'commit' && checkout.sha) await git(['checkout', '--quiet', '--detach', checkout.sha], join(dir, 'repo'))
    const { stdout } = await run('tar', ['-C', join(dir, 'repo'), '-c', '.'], { encoding: 'buffer', maxBuffer: MAX_REPO_TAR_BYTES })
    await runner.place({ path: target, tarBase64: stdout.toString('base64') })
  } catch (err) {
    if (err instanceof CorralError) throw err
    const detail = (err as { stderr?: Buffer | string }).stderr?.toString().trim() || (err as Error).message
    throw new CorralError('sandbox_error', `could not clone ${url} into ${target}: ${detail}`, { cause: err })
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

async function placeFile(runner: ResourcePlacer, res: Record<string, unknown>): Promise<void> {
  const target = mountPath(res, `${SESSION_MOUNT}/uploads/${String(res.file_id ?? 'file')}`)
  if ('source_path' in res) throw new CorralError('invalid_request_error', `file resource ${String(res.file_id)}: source_path is not accepted; a file's bytes come from Corral's file store, never from a host path`)
  let bytes: Buffer
  if (typeof res.content_base64 === 'string') bytes = Buffer.from(res.content_base64, 'base64')
  else if (typeof res.content === 'string') bytes = Buffer.from(res.content, 'utf8')
  else throw new CorralError('invalid_request_error', `file resource ${String(res.file_id)}: no content to place (the file was not found in Corral's file store)`)
  await runner.place({ path: target, contentBase64: bytes.toString('base64') })
}
