/**
 * The one error type Corral throws. `code` is stable and mirrors the Managed Agents API's
 * error `type`, so the HTTP boundary can map it to the API's envelope and status, and the
 * official SDK raises its own classes (BadRequestError, NotFoundError, ...).
 */
export type CorralErrorCode =
  | 'invalid_request_error' // 400: a field is missing, mistyped or breaks a rule
  | 'authentication_error' // 401: no token or a wrong one
  | 'permission_error' // 403: the request is not allowed (foreign Host/Origin, ...)
  | 'not_found_error' // 404: no such resource or path
  | 'conflict_error' // 409: stale version, resource in a state that forbids the operation
  | 'memory_precondition_failed_error' // 409: a memory's content_sha256 is not the one the request expected
  | 'memory_path_conflict_error' // 409: a memory path is taken or overlaps another memory's path
  | 'state_conflict' // 409 invalid_request_error, final (x-should-retry: false): e.g. a work item already stopped
  | 'precondition_failed' // 412 invalid_request_error: a conditional request's precondition does not hold (a work item's heartbeat)
  | 'request_too_large' // 413: body over the limit
  | 'rate_limit_error' // 429
  | 'api_error' // 500: a bug or an unexpected failure inside Corral
  | 'overloaded_error' // 529
  | 'sandbox_error' // a sandbox could not be provisioned or died
  | 'keychain_error' // 503: the OS keychain refused or is unavailable

const STATUS: Record<CorralErrorCode, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  conflict_error: 409,
  memory_precondition_failed_error: 409,
  memory_path_conflict_error: 409,
  state_conflict: 409,
  precondition_failed: 412,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
  sandbox_error: 500,
  keychain_error: 503,
}

/** Codes whose envelope `type` is another (the API has no such error type of its own). */
const WIRE_TYPE: Partial<Record<CorralErrorCode, string>> = {
  sandbox_error: 'api_error',
  keychain_error: 'api_error',
  state_conflict: 'invalid_request_error',
  precondition_failed: 'invalid_request_error',
}

export class CorralError extends Error {
  readonly code: CorralErrorCode
  /** Fields the API's error object carries beside `type` and `message` (e.g. `conflicting_path`, `details`). */
  readonly fields: Readonly<Record<string, unknown>>
  private readonly retry: boolean | undefined

  constructor(code: CorralErrorCode, message: string, options?: { cause?: unknown; fields?: Record<string, unknown>; shouldRetry?: boolean }) {
    super(message, options)
    this.name = 'CorralError'
    this.code = code
    this.fields = options?.fields ?? {}
    this.retry = options?.shouldRetry
  }

  /**
   * Whether a client should retry: false for the memory 409s, which are final (the SDK retries
   * a 409 unless the response says `x-should-retry: false`); undefined = the client decides.
   */
  get shouldRetry(): boolean | undefined {
    if (this.retry !== undefined) return this.retry
    return this.code === 'memory_precondition_failed_error' || this.code === 'memory_path_conflict_error' || this.code === 'state_conflict' ? false : undefined
  }

  /** The HTTP status the API answers with for this error. */
  get status(): number {
    return STATUS[this.code]
  }

  /** The API's error envelope: `{type:'error', error:{type, message}}`. */
  toEnvelope(): { type: 'error'; error: { type: string; message: string; [field: string]: unknown } } {
    const type = WIRE_TYPE[this.code] ?? this.code
    return { type: 'error', error: { ...this.fields, type, message: this.message } }
  }
}

export function isCorralError(err: unknown): err is CorralError {
  return err instanceof CorralError
}

export const invalid = (message: string, cause?: unknown) => new CorralError('invalid_request_error', message, { cause })
export const notFound = (what: string, id: string) => new CorralError('not_found_error', `${what} ${JSON.stringify(id)} was not found`)
export const conflict = (message: string) => new CorralError('conflict_error', message)
