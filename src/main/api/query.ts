/**
 * Parses a query string the way the official SDK writes it (qs, arrayFormat 'brackets'):
 * `types[]=a&types[]=b` → { types: ['a','b'] }; `created_at[gte]=x` stays a key of its own.
 * A repeated plain key also becomes an array. `beta=true` (the SDK adds it) is dropped.
 */
export function parseQuery(search: URLSearchParams, arrayKeys: readonly string[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [rawKey, value] of search) {
    if (rawKey === 'beta') continue
    const key = rawKey.endsWith('[]') ? rawKey.slice(0, -2) : rawKey
    const isArray = rawKey.endsWith('[]') || arrayKeys.includes(key)
    if (isArray) {
      const list = (out[key] as string[] | undefined) ?? []
      list.push(value)
      out[key] = list
    } else if (key in out) {
      const prev = out[key]
      out[key] = Array.isArray(prev) ? [...prev, value] : [prev, value]
    } else out[key] = value
  }
  return out
}
