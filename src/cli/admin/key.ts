/**
 * `carepath admin key …`: issue, list and revoke API keys (DESIGN §3). A key is shown once, at
 * creation; the store keeps its SHA-256 hash, and nothing here ever prints that hash.
 */
import type { Container } from '../../container.js';
import { isUuid } from '../../lib/ids.js';
import { issueKey, listKeys, revokeKey, type IssuedKey } from '../../modules/tenancy/tenancy.repository.js';
import { SCOPES, isScope } from '../../auth/scopes.js';
import { CommandError, UsageError } from '../errors.js';
import { checkName, idArgument, optionalFlag, requireWorkspace, requiredFlag, workspaceFlag, workspaceListCommand, writeJson, type AdminCommand } from './command.js';
import { auditAdminChange } from './admin-audit.js';

export interface KeyCreateArgs {
  workspaceId: string;
  name: string;
  /** Absent: full access. Present: the key may do only these. */
  scopes?: string[];
}

/** `a:b, c:d` → ['a:b', 'c:d']; checking the names is keyCreate's job. */
export function parseScopeList(text: string): string[] {
  return text
    .split(',')
    .map((scope) => scope.trim())
    .filter(Boolean);
}

/** A malformed --scopes is wrong usage (exit 2), like any other malformed argument. */
function checkScopes(scopes: string[]): string[] {
  if (scopes.length === 0) {
    // An empty list would be stored as full access: refuse it rather than grant more than asked.
    throw new UsageError('--scopes names no scope; leave it out for a full-access key');
  }
  const unknown = scopes.filter((scope) => !isScope(scope));
  if (unknown.length > 0) {
    const names = unknown.map((scope) => `"${scope}"`).join(', ');
    throw new UsageError(`unknown scope${unknown.length === 1 ? '' : 's'} ${names}; known scopes: ${SCOPES.join(', ')}`);
  }
  return [...new Set(scopes)];
}

export async function keyCreate(container: Container, args: KeyCreateArgs): Promise<IssuedKey> {
  const scopes = args.scopes === undefined ? [] : checkScopes(args.scopes);
  const workspace = await requireWorkspace(container, args.workspaceId);
  const at = container.clock.now().toISOString();
  const environment = container.config.environment;
  return container.db.transaction().execute(async (tx) => {
    const issued = await issueKey(tx, workspace, args.name, scopes, environment, at);
    await auditAdminChange(tx, workspace, environment, at, {
      action: 'key.create',
      resourceType: 'key',
      resourceId: issued.keyId,
      details: { name: args.name, scopes, environment },
    });
    return issued;
  });
}

export interface KeyRevoked {
  keyId: string;
  revoked: true;
}

export async function keyRevoke(container: Container, args: { keyId: string }): Promise<KeyRevoked> {
  const at = container.clock.now().toISOString();
  const found =
    isUuid(args.keyId) &&
    (await container.db.transaction().execute(async (tx) => {
      const revoked = await revokeKey(tx, args.keyId, at);
      // Revoking a revoked key changes nothing and records nothing.
      if (revoked?.revokedNow) {
        await auditAdminChange(tx, revoked.workspace, container.config.environment, at, {
          action: 'key.revoke',
          resourceType: 'key',
          resourceId: args.keyId,
        });
      }
      return revoked !== undefined;
    }));
  if (!found) throw new CommandError(`no key has the id "${args.keyId}"`);
  return { keyId: args.keyId, revoked: true };
}

export type KeySummary = Awaited<ReturnType<typeof listKeys>>[number];

export async function keyList(container: Container, args: { workspaceId: string }): Promise<KeySummary[]> {
  await requireWorkspace(container, args.workspaceId);
  return listKeys(container.db, args.workspaceId);
}

const create: AdminCommand<KeyCreateArgs> = {
  noun: 'key',
  verb: 'create',
  synopsis: '--workspace <workspaceId> --name <key name> [--scopes a:b,c:d] [--json]',
  flags: ['workspace', 'name', 'scopes'],
  positionals: [],
  parse(input) {
    const scopes = optionalFlag(input, 'scopes');
    return {
      workspaceId: workspaceFlag(input),
      name: checkName('--name', requiredFlag(input, 'name', 'key name')),
      ...(scopes === undefined ? {} : { scopes: checkScopes(parseScopeList(scopes)) }),
    };
  },
  async execute(container, args, out, json) {
    const issued = await keyCreate(container, args);
    if (json) return writeJson(out, issued);
    const access = args.scopes ? `scopes ${[...new Set(args.scopes)].join(', ')}` : 'full access';
    await out.write(
      `Key "${args.name}" created (${access}): ${issued.keyId}\n` +
        `${issued.key}\n` +
        'This is the only time the key is shown; the service keeps only its hash.\n',
    );
  },
};

const revoke: AdminCommand<{ keyId: string }> = {
  noun: 'key',
  verb: 'revoke',
  synopsis: '<keyId> [--json]',
  flags: [],
  positionals: ['keyId'],
  parse: (input) => ({ keyId: idArgument(input.positionals[0]) }),
  async execute(container, args, out, json) {
    const result = await keyRevoke(container, args);
    if (json) return writeJson(out, result);
    await out.write(`Key ${result.keyId} revoked; it fails with 401 from the next request on.\n`);
  },
};

const list = workspaceListCommand('key', keyList, {
  none: 'No keys in this workspace.',
  line: (key) => {
    const access = key.scopes.length === 0 ? 'full access' : key.scopes.join(',');
    const state = key.revokedAt ? `revoked ${key.revokedAt}` : `last used ${key.lastUsedAt ?? 'never'}`;
    return `${key.keyId}  ${key.name}  ${key.environment}  ${access}  created ${key.createdAt}  ${state}`;
  },
});

export const keyCommands: AdminCommand[] = [create, revoke, list];
