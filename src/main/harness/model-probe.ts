import { ANTHROPIC_API_URL, AnthropicModelClient, ModelRequestError } from './model-client'
import type { ModelCheckView } from '../../shared/api/types'

/** The model a probe asks when the settings name none: the cheapest current Claude model. */
export const PROBE_DEFAULT_MODEL = 'claude-haiku-4-5'

export interface ModelProbeParams {
  /** Empty: Anthropic's API. */
  baseURL?: string
  apiKey?: string
  compatibilityMode?: boolean
  /** The model to ask (default PROBE_DEFAULT_MODEL). */
  model?: string
  /** Give up after this long (default 20 s): a probe must answer while the user waits. */
  timeoutMs?: number
  signal?: AbortSignal
  /** The fetch the SDK uses (tests). */
  fetch?: typeof fetch
}

/** What one probe found: a Test connection (shared/api ModelCheckView) before the engine adds where the key came from. */
export type ModelProbeResult = Omit<ModelCheckView, 'key_source' | 'checked_at'>

/**
 * `Test connection` and `corral doctor`: one real, minimal Messages request (one user word,
 * max_tokens 1) through the same client the harness uses (AnthropicModelClient), so a probe that
 * succeeds means a session's first request will reach the model. Never throws: every failure is
 * a result with ok: false, the status (when the endpoint answered) and its error text.
 */
export async function probeModel(params: ModelProbeParams): Promise<ModelProbeResult> {
  const model = params.model || PROBE_DEFAULT_MODEL
  const base_url = params.baseURL || ANTHROPIC_API_URL
  const timeoutMs = params.timeoutMs ?? 20_000
  const client = new AnthropicModelClient({
    apiKey: params.apiKey,
    baseURL: params.baseURL || undefined,
    compatibilityMode: params.compatibilityMode,
    stallTimeoutMs: timeoutMs,
    requestTimeoutMs: timeoutMs,
    fetch: params.fetch,
  })
  const controller = new AbortController()
  const onAbort = () => controller.abort()
  params.signal?.addEventListener('abort', onAbort, { once: true })
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  try {
    const res = await client.stream({ model, max_tokens: 1, messages: [{ role: 'user', content: 'ping' }] }, { signal: controller.signal })
    return { ok: true, status: 200, message: `the model answered (${res.model || model})`, base_url, model, answered_model: res.model || null, elapsed_ms: elapsed() }
  } catch (err) {
    const e = err instanceof ModelRequestError ? err : new ModelRequestError('connection', (err as Error).message)
    const message = !params.apiKey && e.status === 401 ? `${e.message} (no API key is set)` : e.message
    return { ok: false, status: e.status ?? null, message, base_url, model, answered_model: null, elapsed_ms: elapsed() }
  } finally {
    params.signal?.removeEventListener('abort', onAbort)
  }
}
