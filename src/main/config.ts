import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { DEFAULT_DREAM_TIME_LIMIT_MINUTES, MAX_DREAM_TIME_LIMIT_MINUTES } from '../shared/api/dreams'

export const DEFAULT_PORT = 4610

/**
 * Where the database and settings live: CORRAL_DATA_DIR, else (in the app) Electron's
 * userData, else $XDG_DATA_HOME/corral, else ~/.local/share/corral.
 */
export function resolveDataDir(env: NodeJS.ProcessEnv = process.env, electronUserData?: string): string {
  if (env.CORRAL_DATA_DIR) return env.CORRAL_DATA_DIR
  if (electronUserData) return electronUserData
  const xdg = env.XDG_DATA_HOME || join(homedir(), '.local', 'share')
  return join(xdg, 'corral')
}

/**
 * The local API token: CORRAL_TOKEN, else the one kept in `<dataDir>/token` (mode 0600),
 * generated at first start.
 */
export function resolveApiToken(dataDir: string, env: NodeJS.ProcessEnv = process.env): string {
  if (env.CORRAL_TOKEN) return env.CORRAL_TOKEN
  const file = join(dataDir, 'token')
  if (existsSync(file)) {
    const t = readFileSync(file, 'utf8').trim()
    if (t) return t
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const token = `corral_${randomBytes(32).toString('base64url')}`
  writeFileSync(file, token + '\n', { mode: 0o600 })
  chmodSync(file, 0o600)
  return token
}

export interface ModelEndpointSettings {
  /** Anthropic (or compatible) base URL; ANTHROPIC_BASE_URL overrides. */
  baseUrl?: string
  /** API key when ANTHROPIC_API_KEY is not set (moves to the keychain with the vault issue). */
  apiKey?: string
  /** Strip what a local Anthropic-compatible server does not support (cache_control, betas, ...). */
  compatibilityMode?: boolean
  /** Model used when an agent names none the endpoint knows. */
  defaultModel?: string
  /** Abort a model request when no byte arrives for this long (ms, default 120000). */
  stallTimeoutMs?: number
  /** Upper bound for one model request (ms, default 600000). */
  requestTimeoutMs?: number
  /** Retries of a failed model request before `retries_exhausted` (default 5). */
  maxRetries?: number
}

/** The model endpoint in effect: ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL when set, else the settings. */
export function resolveModelEndpoint(env: NodeJS.ProcessEnv, settings: Settings): ModelEndpointSettings {
  const m = settings.model ?? {}
  const num = (v: unknown, field: string): number | undefined => {
    if (v === undefined) return undefined
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new Error(`settings.json: model.${field} must be a positive number of milliseconds`)
    return v
  }
  return {
    ...m,
    apiKey: env.ANTHROPIC_API_KEY || m.apiKey,
    baseUrl: env.ANTHROPIC_BASE_URL || m.baseUrl,
    compatibilityMode: env.CORRAL_MODEL_COMPAT === '1' || m.compatibilityMode === true,
    stallTimeoutMs: num(m.stallTimeoutMs, 'stallTimeoutMs'),
    requestTimeoutMs: num(m.requestTimeoutMs, 'requestTimeoutMs'),
  }
}

/** The files API's upload cap when the settings name none: 500 MiB, the API's own limit. */
export const DEFAULT_MAX_FILE_BYTES = 500 * 1024 * 1024

export interface Settings {
  model?: ModelEndpointSettings
  /** Default sandbox backend: docker | vm | bubblewrap | auto (docker, then vm, then bubblewrap). */
  sandboxBackend?: 'docker' | 'vm' | 'bubblewrap' | 'auto'
  /**
   * Extra entries for the advisor pairing table (model id → tier, on the scale of
   * src/shared/api/advisor-tiers.ts: 0 claude-haiku-4-5 … 7 claude-mythos-5-1); an entry for a
   * built-in model replaces its tier. Checked when the engine starts.
   */
  advisorTiers?: Record<string, number>
  /** The files API's upload cap in bytes (default DEFAULT_MAX_FILE_BYTES). */
  maxFileBytes?: number
  /** The budget the desktop's new-session dialog starts with, in whole US cents (absent: no budget). API clients are not affected. */
  defaultBudgetCents?: string
  /** How long a dream may run, in minutes from its creation (default DEFAULT_DREAM_TIME_LIMIT_MINUTES); past it, it fails with `timeout`. */
  dreamTimeLimitMinutes?: number
  [key: string]: unknown
}

/** What is wrong with settings.json's dreamTimeLimitMinutes (a positive number of minutes up to a week, or absent), or undefined. The engine's start refuses a bad one. */
export function dreamTimeLimitProblem(settings: Settings): string | undefined {
  const v = settings.dreamTimeLimitMinutes
  if (v === undefined || v === null) return undefined
  if (typeof v === 'number' && Number.isFinite(v) && v > 0 && v <= MAX_DREAM_TIME_LIMIT_MINUTES) return undefined
  return `dreamTimeLimitMinutes must be a positive number of minutes, at most ${MAX_DREAM_TIME_LIMIT_MINUTES} (a week) (got ${JSON.stringify(v)})`
}

/**
 * settings.json's dreamTimeLimitMinutes in milliseconds: the default when absent, and also when it
 * is bad (a file edited by hand while the engine runs; the next start names it: dreamTimeLimitProblem).
 */
export function dreamTimeLimitMs(settings: Settings): number {
  const v = settings.dreamTimeLimitMinutes
  return dreamTimeLimitProblem(settings) === undefined && typeof v === 'number' ? Math.round(v * 60_000) : DEFAULT_DREAM_TIME_LIMIT_MINUTES * 60_000
}

export function readSettings(dataDir: string): Settings {
  const file = join(dataDir, 'settings.json')
  if (!existsSync(file)) return {}
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Settings
  } catch (err) {
    throw new Error(`settings file ${file} is not valid JSON: ${(err as Error).message}`)
  }
}

export function writeSettings(dataDir: string, settings: Settings): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  writeFileSync(join(dataDir, 'settings.json'), JSON.stringify(settings, null, 2) + '\n', { mode: 0o600 })
}
