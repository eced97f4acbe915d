/**
 * `carepath admin secret set|list|delete`: the secrets a workspace's http automations send to
 * partners (`${secrets.NAME}` in a header; modules/secrets). The value is read from standard
 * input, never from a flag, so it stays out of shell history and of the process list; it is
 * stored sealed (CAREPATH_SECRET_KEY) and never printed again, by this command or any other.
 * Setting and deleting are audited (`secret.set`, `secret.delete`) with the name only.
 */
import type { Container } from '../../container.js';
import { checkedSecretBox } from '../../modules/secrets/secret-key-check.js';
import { sealPlainSecrets } from '../../modules/secrets/seal-plain-secrets.js';
import { SECRET_NAME } from '../../modules/secrets/secret-refs.js';
import { deleteSecret, listSecrets, setSecret, type SecretListing } from '../../modules/secrets/secret.repository.js';
import { CommandError, UsageError } from '../errors.js';
import { requireWorkspace, workspaceFlag, workspaceListCommand, writeJson, type AdminCommand } from './command.js';
import { auditAdminChange } from './admin-audit.js';

/** Longest value taken: a token or a password, not a document. */
const MAX_SECRET_BYTES = 8 * 1024;

export interface SecretArgs {
  workspaceId: string;
  name: string;
}

export interface SecretSet {
  workspaceId: string;
  name: string;
  created: boolean;
}

function checkSecretName(name: string): string {
  if (!SECRET_NAME.test(name)) {
    throw new UsageError(`"${name}" is not a secret name: letters, digits and _, up to 64, not starting with a digit (such as LAB_PARTNER_TOKEN)`);
  }
  return name;
}

/** The value as piped in: one trailing line break (from `echo`) is not part of it. */
export function secretValueFrom(input: string): string {
  return input.replace(/\r?\n$/, '');
}

/** A value an HTTP header can carry: not empty, not huge, no line breaks or other control characters. */
function checkSecretValue(value: string): void {
  if (value === '') throw new CommandError('no secret value on standard input: pipe it in, e.g. printf %s "$TOKEN" | carepath admin secret set NAME --workspace <workspaceId>');
  if (Buffer.byteLength(value) > MAX_SECRET_BYTES) throw new CommandError(`the secret value is longer than ${MAX_SECRET_BYTES} bytes`);
  if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) throw new CommandError('a secret is sent in an HTTP header: it may not hold line breaks or other control characters');
}

export async function secretSet(container: Container, args: SecretArgs & { value: string }): Promise<SecretSet> {
  checkSecretValue(args.value);
  const workspace = await requireWorkspace(container, args.workspaceId);
  const at = container.clock.now().toISOString();
  // Sealed with this shell's key: it must be the deployment's.
  const box = await checkedSecretBox(container.db, container.config.secretKey);
  return container.db.transaction().execute(async (tx) => {
    const created = await setSecret(tx, box, workspace.id, args.name, args.value, at);
    await auditAdminChange(tx, workspace, container.config.environment, at, {
      action: 'secret.set',
      resourceType: 'secret',
      resourceId: args.name,
      details: { name: args.name, created },
    });
    return { workspaceId: workspace.id, name: args.name, created };
  });
}

export async function secretList(container: Container, args: { workspaceId: string }): Promise<SecretListing[]> {
  await requireWorkspace(container, args.workspaceId);
  return listSecrets(container.db, args.workspaceId);
}

export async function secretDelete(container: Container, args: SecretArgs): Promise<{ workspaceId: string; name: string; deleted: true }> {
  const workspace = await requireWorkspace(container, args.workspaceId);
  const at = container.clock.now().toISOString();
  const deleted = await container.db.transaction().execute(async (tx) => {
    const found = await deleteSecret(tx, workspace.id, args.name);
    if (found) {
      await auditAdminChange(tx, workspace, container.config.environment, at, {
        action: 'secret.delete',
        resourceType: 'secret',
        resourceId: args.name,
        details: { name: args.name },
      });
    }
    return found;
  });
  if (!deleted) throw new CommandError(`workspace ${workspace.id} has no secret "${args.name}"`);
  return { workspaceId: workspace.id, name: args.name, deleted: true };
}

/** Standard input, whole; a terminal is refused (a typed secret would be echoed on screen). */
async function readStandardInput(): Promise<string> {
  if (process.stdin.isTTY) {
    throw new UsageError('pipe the secret value in, e.g. printf %s "$TOKEN" | carepath admin secret set NAME --workspace <workspaceId>');
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const parseNamed = (input: { values: Record<string, string | undefined>; positionals: string[] }): SecretArgs => ({
  workspaceId: workspaceFlag(input),
  name: checkSecretName(input.positionals[0]),
});

const set: AdminCommand<SecretArgs> = {
  noun: 'secret',
  verb: 'set',
  synopsis: '<name> --workspace <workspaceId> [--json]   (the value on standard input)',
  flags: ['workspace'],
  positionals: ['name'],
  parse: parseNamed,
  async execute(container, args, out, json) {
    const value = secretValueFrom(await readStandardInput());
    const result = await secretSet(container, { ...args, value });
    if (json) return writeJson(out, result);
    await out.write(`Secret ${result.name} ${result.created ? 'set' : 'replaced'}; blueprints send it as \${secrets.${result.name}} in an http header.\n`);
  },
};

const list = workspaceListCommand('secret', secretList, {
  none: 'No secrets in this workspace.',
  line: (secret) => `${secret.name}  (set ${secret.updatedAt})`,
});

const remove: AdminCommand<SecretArgs> = {
  noun: 'secret',
  verb: 'delete',
  synopsis: '<name> --workspace <workspaceId> [--json]',
  flags: ['workspace'],
  positionals: ['name'],
  parse: parseNamed,
  async execute(container, args, out, json) {
    const result = await secretDelete(container, args);
    if (json) return writeJson(out, result);
    await out.write(`Secret ${result.name} deleted; http automations that name it now fail until it is set again.\n`);
  },
};

/**
 * Every secret stored while the store had no key (`plain:`, webhook signing secrets and partner
 * secrets of every workspace) sealed with CAREPATH_SECRET_KEY. An operator's step, not done at
 * start: a process still running without the key (a rolling deploy) could no longer open them,
 * and every signed delivery it took would be a 500 (a code review).
 */
const sealStored: AdminCommand<Record<string, never>> = {
  noun: 'secret',
  verb: 'seal-stored',
  synopsis: '[--json]   (once every process runs with CAREPATH_SECRET_KEY)',
  flags: [],
  positionals: [],
  parse: () => ({}),
  async execute(container, _args, out, json) {
    if (container.config.secretKey === undefined) {
      throw new CommandError('CAREPATH_SECRET_KEY is not set: set it to the deployment\'s key (the one every process runs with), then seal');
    }
    const box = await checkedSecretBox(container.db, container.config.secretKey);
    const sealed = await sealPlainSecrets(container.db, box);
    if (json) return writeJson(out, sealed);
    await out.write(`Sealed ${sealed.webhookSecrets} webhook signing secrets and ${sealed.partnerSecrets} partner secrets stored before CAREPATH_SECRET_KEY was set.\n`);
  },
};

export const secretCommands: AdminCommand[] = [set, list, remove, sealStored];
