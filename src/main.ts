/**
 * Entry of the `carepath` command (bin/carepath.js loads it): argv → serve | api | worker |
 * migrate | admin | help. Every failure ends as one clear message on stderr and an exit code:
 * 1 when a command could not do its job, 2 when it was used wrongly. No stack traces.
 */
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { loadConfig } from './config.js';
import type { Output } from './cli/admin/command.js';
import { reportFailure, usageErrorFromParseArgs } from './cli/errors.js';
import { usageText } from './cli/usage.js';

// Each command loads what it needs when it runs: `help` or an admin command need not load the
// HTTP server and the engine first (about a second of every `npx carepath …` through tsx).

const stdout: Output = {
  async write(text) {
    // Respect back-pressure: an audit export into a slow pipe must not pile up in memory.
    if (!process.stdout.write(text)) await once(process.stdout, 'drain');
  },
};

/** The flags a top-level command takes: --help everywhere, --json for migrate. */
function commandFlags(command: string, args: string[]): { help: boolean; json: boolean } {
  try {
    const { values } = parseArgs({
      args,
      options: { help: { type: 'boolean', short: 'h' }, ...(command === 'migrate' ? { json: { type: 'boolean' } } : {}) },
      strict: true,
      allowPositionals: false,
    });
    return { help: values.help === true, json: (values as { json?: boolean }).json === true };
  } catch (error) {
    throw usageErrorFromParseArgs(error, `carepath ${command} --help`);
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const config = () => loadConfig(process.env);
  switch (command) {
    case 'help':
    case '--help':
    case '-h':
      await stdout.write(usageText());
      return 0;
    case 'version':
    case '--version': {
      const { versionText } = await import('./cli/version.js');
      await stdout.write(versionText());
      return 0;
    }
    case 'serve':
    case 'api':
    case 'worker': {
      if (commandFlags(command, rest).help) return stdout.write(usageText()).then(() => 0);
      const { SERVICE_PARTS, runService } = await import('./cli/run-service.js');
      await runService(config(), SERVICE_PARTS[command], (text) => process.stdout.write(text));
      return 0;
    }
    case 'migrate': {
      const flags = commandFlags(command, rest);
      if (flags.help) return stdout.write(usageText()).then(() => 0);
      const { describeMigrations, runMigrations } = await import('./cli/migrate.js');
      const applied = await runMigrations(config());
      await stdout.write(flags.json ? `${JSON.stringify({ applied })}\n` : describeMigrations(applied));
      return 0;
    }
    case 'admin': {
      const { runAdmin } = await import('./cli/admin/dispatch.js');
      await runAdmin(rest, config, stdout);
      return 0;
    }
    case undefined:
      process.stderr.write(`carepath: which command?\n\n${usageText()}`);
      return 2;
    default:
      process.stderr.write(`carepath: unknown command "${command}"\n\n${usageText()}`);
      return 2;
  }
}

// A reader that goes away (`carepath admin audit export … | head`) is not a failure.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});

const command = process.argv[2];
let exitCode: number;
try {
  exitCode = await main(process.argv.slice(2));
} catch (error) {
  const failure = reportFailure(error);
  process.stderr.write(`${failure.text}\n`);
  exitCode = failure.exitCode;
}
if (command === 'serve' || command === 'api' || command === 'worker') {
  // Background services other parts of the code own may hold timers or sockets past their stop;
  // the stop was graceful already, so end the process rather than wait on them.
  process.exit(exitCode);
}
process.exitCode = exitCode;
