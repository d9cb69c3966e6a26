import type { z } from 'zod'
import { CorralError } from '../../shared/errors'
import { describeZodError } from '../../shared/api/schemas'

/** Validates input with a boundary schema; a failure is a 400 that names each field and rule. */
export function validate<S extends z.ZodType>(schema: S, input: unknown, where = 'body'): z.infer<S> {
  const result = schema.safeParse(input)
  if (!result.success) throw new CorralError('invalid_request_error', `invalid ${where}: ${describeZodError(result.error)}`)
  return result.data
}
