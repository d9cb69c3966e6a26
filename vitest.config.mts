import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts', 'test/integration/**/*.test.ts', 'test/conformance/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results/vitest.json' },
  },
})
