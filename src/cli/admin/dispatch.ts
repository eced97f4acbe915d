/**
 * `carepath admin <noun> <verb> …`: finds the command, parses its flags (node:util parseArgs,
 * strict: an unknown flag is an error, not silently ignored), then opens the store, runs it and
 * closes the store. Usage errors are raised before the store is opened.
 */
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Config } from '../../config.js';
import { createLogger } from '../../lib/logger.js';
import { CommandError, UsageError, usageErrorFromParseArgs } from '../errors.js';
import { commandName, type AdminCommand, type Output } from './command.js';
import { workspaceCommands } from './workspace.js';
import { keyCommands } from './key.js';
import { blueprintCommands } from './blueprint.js';
import { webhookCommands } from './webhook.js';
import { secretCommands } from './secret.js';
import { deliveryCommands } from './delivery.js';
import { auditCommands } from './audit.js';

export const ADMIN_COMMANDS: readonly AdminCommand[] = [
  ...workspaceCommands,
  ...keyCommands,
  ...blueprintCommands,
  ...webhookCommands,
  ...secretCommands,
  ...deliveryCommands,
  ...auditCommands,
];

export function adminUsageLines(): string[] {
  return ADMIN_COMMANDS.map((command) => `${commandName(command)} ${command.synopsis}`);
}

export type ParsedAdmin =
  | { kind: 'help'; text: string }
  | { kind: 'run'; command: AdminCommand; args: unknown; json: boolean };

function isHelp(word: string | undefined): boolean {
  return word === '--help' || word === '-h' || word === 'help';
}

/** Argv after `admin` → the command and its checked arguments, or the help asked for. */
export function parseAdminArgv(argv: readonly string[]): ParsedAdmin {
  const [noun, verb, ...rest] = argv;
  const adminHelp = `Admin commands:\n${adminUsageLines().map((line) => `  ${line}`).join('\n')}\n`;
  if (isHelp(noun)) return { kind: 'help', text: adminHelp };
  if (noun === undefined) throw new UsageError('admin needs a command, such as `carepath admin key create`', 'carepath admin --help');

  const ofNoun = ADMIN_COMMANDS.filter((command) => command.noun === noun);
  if (ofNoun.length === 0) {
    const nouns = [...new Set(ADMIN_COMMANDS.map((command) => command.noun))].join(', ');
    throw new UsageError(`unknown admin command "${noun}"; one of: ${nouns}`, 'carepath admin --help');
  }
  const verbs = ofNoun.map((command) => command.verb).join(', ');
  if (isHelp(verb)) {
    return { kind: 'help', text: `${ofNoun.map((command) => `${commandName(command)} ${command.synopsis}`).join('\n')}\n` };
  }
  const command = ofNoun.find((candidate) => candidate.verb === verb);
  if (!command) {
    const what = verb === undefined ? 'needs one of' : `has no "${verb}"; one of`;
    throw new UsageError(`admin ${noun} ${what}: ${verbs}`, 'carepath admin --help');
  }

  const helpCommand = `${commandName(command)} --help`;
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      options: {
        ...Object.fromEntries(command.flags.map((flag) => [flag, { type: 'string' as const }])),
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw usageErrorFromParseArgs(error, helpCommand);
  }
  if (parsed.values.help) return { kind: 'help', text: `${commandName(command)} ${command.synopsis}\n` };
  if (parsed.values.json && command.refusesJson) throw new UsageError(`${commandName(command)} takes no --json: ${command.refusesJson}`, helpCommand);

  const missing = command.positionals.slice(parsed.positionals.length);
  if (missing.length > 0) throw new UsageError(`<${missing[0]}> is required`, helpCommand);
  const extra = parsed.positionals.slice(command.positionals.length);
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`, helpCommand);

  const given = parsed.values as Record<string, string | boolean | undefined>;
  const values: Record<string, string | undefined> = {};
  for (const flag of command.flags) values[flag] = given[flag] as string | undefined;
  try {
    const args = command.parse({ values, positionals: parsed.positionals });
    return { kind: 'run', command, args, json: parsed.values.json === true };
  } catch (error) {
    if (error instanceof UsageError) throw new UsageError(error.message, helpCommand);
    throw error;
  }
}

/**
 * Runs one admin command against the configured store. Its logger is silent: stdout belongs to
 * the command's output (one JSON value with --json), and failures are reported by the caller.
 */
export async function runAdmin(argv: readonly string[], config: () => Config, out: Output): Promise<void> {
  const parsed = parseAdminArgv(argv);
  if (parsed.kind === 'help') return out.write(parsed.text);
  const settings = config();
  // Loaded here, not at the top: `carepath help` reads this file's usage lines only.
  const [{ sqlitePathOf }, { createContainer }] = await Promise.all([import('../../storage/connect.js'), import('../../container.js')]);
  // Every command but `workspace create` reads or changes what a store already holds. Run without
  // the service's settings, one opened a new, empty store at the default path, found nothing
  // ("no live webhook endpoint has the id …", read as a wrong id at 2 a.m.; "No workspaces.")
  // and left that store behind (a newcomer's walkthrough): refused before anything is made.
  // An in-memory store lasts as long as this command: ids it printed would name nothing after.
  if (settings.databaseUrl === 'sqlite::memory:') {
    throw new CommandError('CAREPATH_DATABASE_URL is sqlite::memory:, a store that lasts only as long as this command: set it as the service has it (a sqlite: file or postgres://…)');
  }
  const file = sqlitePathOf(settings.databaseUrl);
  if (file !== null && !existsSync(file) && commandName(parsed.command) !== 'carepath admin workspace create') {
    throw new CommandError(
      `there is no store at ${settings.databaseUrl}: set CAREPATH_DATABASE_URL as the service has it` +
        `${process.env.CAREPATH_DATABASE_URL ? '' : ' (it is not set here, so the default was used)'}; ` +
        '`carepath admin workspace create` (or starting the service) makes a new one',
    );
  }
  const container = await createContainer(settings, { logger: createLogger('silent') });
  try {
    await parsed.command.execute(container, parsed.args, out, parsed.json);
  } finally {
    await container.close();
  }
}
