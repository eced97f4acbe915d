import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Every integration file makes its own SQLite file and PostgreSQL schema, so files may run
    // side by side; two at a time suits the two cores this project is built on.
    maxWorkers: 2,
    setupFiles: [],
  },
});
