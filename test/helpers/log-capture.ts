/** A logger whose lines are kept, parsed, for a test to read back. */
import { Writable } from 'node:stream';
import { createLogger, type Logger } from '../../src/lib/logger.js';

/** A logger at `level` whose lines are collected, parsed, in `lines`. */
export function capturedLogger(level: string): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: createLogger(level, destination), lines };
}
