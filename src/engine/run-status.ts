/**
 * The automation statuses of a run (interface spec, "States and transitions") and the tiny pure
 * predicates every part of the service asks instead of comparing strings itself.
 */
export const RUN_STATUSES = ['queued', 'scheduled', 'running', 'paused', 'completed', 'errored', 'canceled', 'stopped'] as const;

export type RunStatus = (typeof RUN_STATUSES)[number];

export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'errored', 'canceled', 'stopped'];

export function isRunStatus(text: string): text is RunStatus {
  return (RUN_STATUSES as readonly string[]).includes(text);
}

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/** Statuses in which a worker may execute steps of the run. */
export function isExecutable(status: string): boolean {
  return status === 'scheduled' || status === 'running';
}
