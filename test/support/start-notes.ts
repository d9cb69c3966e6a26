/**
 * A sandbox's start, when it takes more than 0.3 s, is shown in the waiting call's live output as
 * `[corral] …` lines on Corral's `status` stream (RunnerSandbox: src/main/hands/README.md, "A start
 * shows its progress"): a test of a command's own output previews leaves them out, since a cold
 * start's length depends on the machine's load.
 */
export function isStatusDelta(delta: { stream?: string } | undefined): boolean {
  return delta?.stream === 'status'
}
