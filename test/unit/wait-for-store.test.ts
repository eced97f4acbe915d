/** Waiting for a PostgreSQL server at start: how long, what is said, what is not waited for. */
import { describe, expect, it } from 'vitest';
import { waitForStore } from '../../src/cli/wait-for-store.js';
import { StoreUnavailableError } from '../../src/storage/store-unavailable.js';
import { capturedLogger } from '../helpers/log-capture.js';

/** A clock that moves only when the wait sleeps. */
function fakeTime() {
  let now = 0;
  return { now: () => now, sleep: async (ms: number) => void (now += ms) };
}

const notUp = () => new StoreUnavailableError('cannot open the store in CAREPATH_DATABASE_URL (postgres://u:***@db/x): nothing listens there', true);

describe('waitForStore', () => {
  it('tries every 2 s, says so at once and every 10 s, and starts when the store answers', async () => {
    const { logger, lines } = capturedLogger('info');
    const time = fakeTime();
    let tries = 0;
    const opened = await waitForStore(async () => (++tries < 12 ? Promise.reject(notUp()) : 'store'), logger, time);
    expect(opened).toBe('store');
    expect(tries).toBe(12);
    expect(lines.map((line) => [line.msg, line.waitedMs])).toEqual([
      ['waiting for the store: cannot open the store in CAREPATH_DATABASE_URL (postgres://u:***@db/x): nothing listens there', 0],
      ['waiting for the store: cannot open the store in CAREPATH_DATABASE_URL (postgres://u:***@db/x): nothing listens there', 10_000],
      ['waiting for the store: cannot open the store in CAREPATH_DATABASE_URL (postgres://u:***@db/x): nothing listens there', 20_000],
      ['the store answers: starting', 22_000],
    ]);
    expect(JSON.stringify(lines)).not.toContain('s3cret');
  });

  it('gives up after a minute with the store\'s own sentence', async () => {
    const { logger } = capturedLogger('info');
    const time = fakeTime();
    let tries = 0;
    await expect(waitForStore(async () => Promise.reject(notUp()).finally(() => tries++), logger, time)).rejects.toThrow(/nothing listens there/);
    // Tries at 0, 2, … 60 s; the next would come after the minute.
    expect(tries).toBe(31);
    expect(time.now()).toBe(60_000);
  });

  it('does not wait for a store that refuses, nor for another failure', async () => {
    const { logger, lines } = capturedLogger('info');
    const time = fakeTime();
    const refused = new StoreUnavailableError('cannot open the store …: the database does not exist; create it first (createdb)');
    await expect(waitForStore(async () => Promise.reject(refused), logger, time)).rejects.toBe(refused);
    await expect(waitForStore(async () => Promise.reject(new Error('a migration failed')), logger, time)).rejects.toThrow('a migration failed');
    expect(time.now()).toBe(0);
    expect(lines).toEqual([]);
  });
});
