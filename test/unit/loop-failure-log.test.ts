/** An outage of the store, as a background loop logs it: a few lines, not one per try. */
import { describe, expect, it } from 'vitest';
import { LoopFailureLog, OUTAGE_REMINDER_MS } from '../../src/lib/loop-failure-log.js';
import { capturedLogger } from '../helpers/log-capture.js';

const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5499'), { code: 'ECONNREFUSED' });
const quoting = () => Object.assign(new Error('invalid input syntax for type uuid: "Jane Doe"'), { code: '22P02' });

describe('LoopFailureLog', () => {
  it('logs an outage as its start, a reminder a minute, and its end', () => {
    const { logger, lines } = capturedLogger('info');
    let now = 1_000_000;
    const log = new LoopFailureLog(logger, 'claiming runs failed', { workerId: 'w-1' }, () => now);
    // 75 s of failures, 8 a second: 600 tries.
    for (let i = 0; i < 600; i++) {
      log.failed(refused());
      now += 125;
    }
    log.succeeded();
    log.succeeded();
    const said = lines.map((line) => [line.level, line.msg]);
    expect(said).toEqual([
      [40, 'claiming runs failed: the store did not answer; trying again until it does'],
      [40, 'claiming runs failed: the store still does not answer'],
      [30, 'claiming runs failed: the store answers again'],
    ]);
    expect(lines[0]).toMatchObject({ workerId: 'w-1', err: { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5499' } });
    expect(lines[0].err).not.toHaveProperty('frames');
    expect(lines[1]).toMatchObject({ failures: 481, outageMs: OUTAGE_REMINDER_MS });
    expect(lines[2]).toMatchObject({ workerId: 'w-1', failures: 600, outageMs: 75_000 });

    // The next outage starts over.
    log.failed(refused());
    expect(lines.at(-1)?.msg).toBe('claiming runs failed: the store did not answer; trying again until it does');
  });

  it('logs every other failure at error with its frames and never its words', () => {
    const { logger, lines } = capturedLogger('info');
    const log = new LoopFailureLog(logger, 'scheduler could not run due ticks');
    log.failed(quoting());
    log.failed(quoting());
    log.succeeded();
    expect(lines.map((line) => [line.level, line.msg])).toEqual([
      [50, 'scheduler could not run due ticks'],
      [50, 'scheduler could not run due ticks'],
    ]);
    expect(lines[0].err).toMatchObject({ type: 'Error', code: '22P02' });
    expect((lines[0].err as { frames: string[] }).frames.length).toBeGreaterThan(0);
    expect(JSON.stringify(lines)).not.toMatch(/Jane/);
  });
});
