/** `carepath admin workspace create|list`: a workspace in a tenant, the tenant made on first use; every workspace. */
import type { Container } from '../../container.js';
import { createWorkspace, ensureTenant, findWorkspaceByName, listWorkspaces } from '../../modules/tenancy/tenancy.repository.js';
import { CommandError } from '../errors.js';
import { checkName, optionalFlag, requiredFlag, writeJson, type AdminCommand } from './command.js';
import { auditAdminChange } from './admin-audit.js';

export interface WorkspaceCreateArgs {
  tenant: string;
  name: string;
}

export interface WorkspaceCreated {
  tenantId: string;
  workspaceId: string;
}

export async function workspaceCreate(container: Container, args: WorkspaceCreateArgs): Promise<WorkspaceCreated> {
  const at = container.clock.now().toISOString();
  return container.db.transaction().execute(async (tx) => {
    const tenantId = await ensureTenant(tx, args.tenant, at);
    // Names are unique in a tenant; say which workspace already holds it rather than a SQL error.
    const existing = await findWorkspaceByName(tx, tenantId, args.name);
    if (existing) {
      throw new CommandError(`tenant "${args.tenant}" already has a workspace named "${args.name}" (${existing.id})`);
    }
    const workspaceId = await createWorkspace(tx, tenantId, args.name, at);
    await auditAdminChange(tx, { id: workspaceId, tenant_id: tenantId }, container.config.environment, at, {
      action: 'workspace.create',
      resourceType: 'workspace',
      resourceId: workspaceId,
      details: { tenant: args.tenant, name: args.name },
    });
    return { tenantId, workspaceId };
  });
}

const create: AdminCommand<WorkspaceCreateArgs> = {
  noun: 'workspace',
  verb: 'create',
  synopsis: '--tenant <tenant name> --name <workspace name> [--json]',
  flags: ['tenant', 'name'],
  positionals: [],
  parse: (input) => ({
    tenant: checkName('--tenant', requiredFlag(input, 'tenant', 'tenant name')),
    name: checkName('--name', requiredFlag(input, 'name', 'workspace name')),
  }),
  async execute(container, args, out, json) {
    const created = await workspaceCreate(container, args);
    if (json) return writeJson(out, created);
    await out.write(
      `Workspace "${args.name}" created: ${created.workspaceId}\n` +
        `Tenant "${args.tenant}": ${created.tenantId}\n` +
        `Next: carepath admin key create --workspace ${created.workspaceId} --name <key name>\n`,
    );
  },
};

/**
 * Every workspace, with its tenant: an operator who no longer has a workspace's id (every other
 * command needs it) had no way to find it again (an operations review).
 */
const list: AdminCommand<{ tenant?: string }> = {
  noun: 'workspace',
  verb: 'list',
  synopsis: '[--tenant <tenant name>] [--json]',
  flags: ['tenant'],
  positionals: [],
  parse: (input) => {
    const tenant = optionalFlag(input, 'tenant');
    return { tenant: tenant === undefined ? undefined : checkName('--tenant', tenant) };
  },
  async execute(container, args, out, json) {
    const workspaces = await listWorkspaces(container.db, args.tenant);
    if (json) return writeJson(out, workspaces);
    if (workspaces.length === 0) return void (await out.write(args.tenant === undefined ? 'No workspaces.\n' : `No workspaces in tenant "${args.tenant}".\n`));
    await out.write(workspaces.map((w) => `${w.workspaceId}  ${w.name}  tenant "${w.tenant}" (${w.tenantId})  created ${w.createdAt}\n`).join(''));
  },
};

export const workspaceCommands: AdminCommand[] = [create, list];
