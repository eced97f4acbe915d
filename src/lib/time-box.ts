/**
 * Synchronous work interrupted after a time: V8 stops a script run with a timeout, and with it
 * whatever that script calls. The way to bound work that cannot be made to yield, such as a
 * FHIRPath evaluation or the compile of a regular expression, on a thread that serves everyone.
 * Each call starts a watchdog thread (about 0.25 ms): for work that is rare or cached, not for
 * every evaluation the engine makes.
 */
import vm from 'node:vm';

/** The work took longer than it was given and was interrupted. */
export class TimeBoxExceeded extends Error {
  constructor(readonly timeoutMs: number) {
    super(`took longer than ${timeoutMs} ms`);
    this.name = 'TimeBoxExceeded';
  }
}

const box = vm.createContext({ work: null as (() => unknown) | null });
const callWork = new vm.Script('work()');

/** `work()`, or TimeBoxExceeded once it has run for `timeoutMs`. May be nested. */
export function runWithin<T>(work: () => T, timeoutMs: number): T {
  box.work = work;
  try {
    return callWork.runInContext(box, { timeout: timeoutMs }) as T;
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw new TimeBoxExceeded(timeoutMs);
    throw error;
  } finally {
    box.work = null;
  }
}
