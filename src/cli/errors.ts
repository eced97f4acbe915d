/**
 * The two ways a command ends badly, kept apart because scripts tell them apart by exit code:
 * used wrongly (2, with a pointer to the usage text) or unable to do its job (1).
 */
import { ConfigError } from '../config.js';
import { ApiError } from '../lib/errors.js';
import { BlueprintError } from '../modules/blueprints/blueprint.validate.js';
import { StoreUnavailableError } from '../storage/store-unavailable.js';
import { StoreNewerThanCodeError } from '../storage/migrate.js';

/** An unknown command or flag, a missing or malformed argument. */
export class UsageError extends Error {
  constructor(
    message: string,
    /** Where to read about the right usage, such as `carepath admin key create --help`. */
    readonly helpCommand = 'carepath --help',
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** node:util parseArgs failures as usage errors; its text for an unknown flag runs on about '--'. */
export function usageErrorFromParseArgs(error: unknown, helpCommand?: string): UsageError {
  const message = (error as Error).message;
  const unknown = /^Unknown option '([^']+)'/.exec(message);
  return new UsageError(unknown ? `unknown flag ${unknown[1]}` : message, helpCommand);
}

/** The command was understood but cannot be done: an unknown workspace, key or file. */
export class CommandError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandError';
  }
}

export interface FailureReport {
  /** What goes to stderr: clear sentences, never a stack. */
  text: string;
  exitCode: 1 | 2;
}

/** Turns what a command threw into the text and exit code the operator sees. */
export function reportFailure(error: unknown): FailureReport {
  if (error instanceof UsageError) {
    return { text: `carepath: ${error.message}\nSee \`${error.helpCommand}\`.`, exitCode: 2 };
  }
  if (error instanceof BlueprintError) {
    const count = error.problems.length;
    const lines = error.problems.map((problem) => `  - ${problem}`);
    return { text: [`carepath: the blueprint has ${count} problem${count === 1 ? '' : 's'}:`, ...lines].join('\n'), exitCode: 1 };
  }
  if (
    error instanceof ConfigError ||
    error instanceof CommandError ||
    error instanceof ApiError ||
    error instanceof StoreUnavailableError ||
    error instanceof StoreNewerThanCodeError
  ) {
    return { text: `carepath: ${error.message}`, exitCode: 1 };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { text: `carepath: failed: ${message}`, exitCode: 1 };
}
