/**
 * What every `carepath admin` command is made of. The dispatcher parses flags with node:util
 * parseArgs; `parse` turns them into typed arguments before any store is opened, so a typo never
 * touches the database; `execute` calls the command's plain function (the one tests call) and
 * prints its result, as one JSON value with `--json` or as a friendly line without.
 */
import type { Container } from '../../container.js';
import { findWorkspace } from '../../modules/tenancy/tenancy.repository.js';
import { CommandError, UsageError } from '../errors.js';
import { isUuid } from '../../lib/ids.js';

export interface CommandInput {
  /** `--flag value` pairs; every flag of a command takes a value except --json and --help. */
  values: Record<string, string | undefined>;
  positionals: string[];
}

export interface Output {
  /** Writes to stdout, waiting while the pipe is full so a long export never piles up in memory. */
  write(text: string): Promise<void>;
}

export interface AdminCommand<Args = any> {
  noun: string;
  verb: string;
  /** What follows `carepath admin <noun> <verb>` in the usage text. */
  synopsis: string;
  /** Flags that take a value, without the dashes. */
  flags: readonly string[];
  /** Names of the positional arguments, in order; each is required. */
  positionals: readonly string[];
  parse(input: CommandInput): Args;
  execute(container: Container, args: Args, out: Output, json: boolean): Promise<void>;
  /**
   * Why `--json` is refused, for a command whose output is not one JSON value (`--json` promises
   * exactly one): said as a usage error instead of printing something else under its name.
   */
  refusesJson?: string;
}

export function commandName(command: Pick<AdminCommand, 'noun' | 'verb'>): string {
  return `carepath admin ${command.noun} ${command.verb}`;
}

/** A flag's value, or a usage error naming the flag and what it wants. */
export function requiredFlag(input: CommandInput, flag: string, placeholder: string): string {
  const value = input.values[flag]?.trim();
  if (!value) throw new UsageError(`--${flag} <${placeholder}> is required`);
  return value;
}

/**
 * An id given on the command line: a UUID in upper case is the same id (RFC 9562 §4), so it is
 * turned to the lower case ids are stored in; anything else is left for the command to refuse.
 */
export function idArgument(value: string): string {
  return isUuid(value) ? value.toLowerCase() : value;
}

/** `--workspace <workspaceId>`, required. */
export function workspaceFlag(input: CommandInput): string {
  return idArgument(requiredFlag(input, 'workspace', 'workspaceId'));
}

export function optionalFlag(input: CommandInput, flag: string): string | undefined {
  const value = input.values[flag]?.trim();
  if (value === '') throw new UsageError(`--${flag} needs a value`);
  return value;
}

/** Names of tenants, workspaces and keys: what an operator can read in a list. */
export function checkName(what: string, value: string): string {
  if (value.length > 200) throw new UsageError(`${what} may be at most 200 characters`);
  return value;
}

export async function requireWorkspace(container: Container, workspaceId: string) {
  const workspace = await findWorkspace(container.db, workspaceId);
  if (!workspace) throw new CommandError(`no workspace has the id "${workspaceId}"`);
  return workspace;
}

export async function writeJson(out: Output, value: unknown): Promise<void> {
  await out.write(`${JSON.stringify(value)}\n`);
}

/**
 * `carepath admin <noun> list --workspace <workspaceId> [--json]`: the workspace's items as one
 * JSON array, or a line each (`none` when there are none).
 */
export function workspaceListCommand<Item>(
  noun: string,
  list: (container: Container, args: { workspaceId: string }) => Promise<Item[]>,
  text: { none: string; line: (item: Item) => string },
): AdminCommand<{ workspaceId: string }> {
  return {
    noun,
    verb: 'list',
    synopsis: '--workspace <workspaceId> [--json]',
    flags: ['workspace'],
    positionals: [],
    parse: (input) => ({ workspaceId: workspaceFlag(input) }),
    async execute(container, args, out, json) {
      const items = await list(container, args);
      if (json) return writeJson(out, items);
      await out.write(items.length === 0 ? `${text.none}\n` : items.map((item) => `${text.line(item)}\n`).join(''));
    },
  };
}
