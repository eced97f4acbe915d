/**
 * How much a run may keep. A step's output (a `set` step's variables, a call's answer, the event
 * a wait received) is stored with the step and in the run's progress (`engine_state`), which
 * holds every step's output and variable and is rewritten with each step. Unbounded, one
 * blueprint of 23 `set` variables, each its predecessor twice, grew a SQLite store by 800 MB
 * from one fire, and one more variable made a JSON text longer than a string may be: the step
 * could not be written, and its run was retried for ever (a review). A step over the limit now
 * fails, and its run errors at its node with a message that says why.
 */

/** The most a step's output may come to as JSON text (characters). */
export const MAX_STEP_OUTPUT_CHARS = 4 * 1024 * 1024;

/** The most a run's progress (every step's output and variable) may come to as JSON text. */
export const MAX_RUN_STATE_CHARS = 16 * 1024 * 1024;

/** A run's error message, and a step's, is cut to this many characters (a `fail` message filled from data, a partner's answer). */
export const MAX_ERROR_MESSAGE_CHARS = 4_000;

const MIB = 1024 * 1024;

export const STEP_OUTPUT_TOO_LARGE = `its output comes to more than ${MAX_STEP_OUTPUT_CHARS / MIB} MiB as JSON, the most a step may keep`;
export const RUN_STATE_TOO_LARGE = `the run's variables and step outputs would come to more than ${MAX_RUN_STATE_CHARS / MIB} MiB as JSON, the most a run may keep`;

/** The value as JSON text, or null when it is longer than `limit` (or than any string may be). */
export function jsonWithin(value: unknown, limit: number): string | null {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    if (error instanceof RangeError) return null;
    throw error;
  }
  if (text === undefined) return 'null';
  return text.length > limit ? null : text;
}

/** The message cut to MAX_ERROR_MESSAGE_CHARS in all, saying so (cut again, it stays as it is). */
export function cutMessage(message: string): string {
  if (message.length <= MAX_ERROR_MESSAGE_CHARS) return message;
  const said = `… (cut: ${message.length} characters)`;
  const cut = message.slice(0, MAX_ERROR_MESSAGE_CHARS - said.length);
  // Not half a surrogate pair at the cut.
  const whole = /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut;
  return `${whole}${said}`;
}

/** The run's progress would pass MAX_RUN_STATE_CHARS: the step that made it grow fails instead. */
export class RunStateTooLarge extends Error {}
