import Anthropic from '@anthropic-ai/sdk'

/** Every item of the SDK's paginated list (follows its pages). */
export async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

/**
 * Asks `find` every `everyMs` until it answers something other than undefined, and resolves with
 * it; past `ms`, throws naming `what` was waited for.
 */
export async function until<T>(what: string, find: () => Promise<T | undefined>, ms = 20_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await find()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

/** `until` for a synchronous condition: resolves once `ok()` is true, asked every `everyMs`. */
export async function untilTrue(what: string, ok: () => boolean, ms = 20_000, everyMs = 25): Promise<void> {
  await until(what, async () => (ok() ? true : undefined), ms, everyMs)
}

/** Reads items from an SDK stream until `count` arrived (or until `ms` passed), then aborts it. */
export async function take<T>(stream: AsyncIterable<T> & { controller: AbortController }, count: number, ms = 5000): Promise<T[]> {
  const got: T[] = []
  const timer = setTimeout(() => stream.controller.abort(), ms)
  try {
    for await (const item of stream) {
      got.push(item)
      if (got.length >= count) break
    }
  } catch (err) {
    if (!(err instanceof Anthropic.APIUserAbortError) && (err as Error).name !== 'AbortError') throw err
  } finally {
    clearTimeout(timer)
    stream.controller.abort()
  }
  return got
}
