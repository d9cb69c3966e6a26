import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts', 'test/integration/**/*.test.ts', 'test/conformance/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two files at a time even on two cores (vitest's own default there is one): most integration
    // files wait on child processes, sandboxes and sockets, not on the CPU. CORRAL_TEST_WORKERS overrides.
    maxWorkers: Number(process.env.CORRAL_TEST_WORKERS) || Math.max(2, availableParallelism() - 1),
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results/vitest.json' },
  },
})
