/** `carepath admin workspace create`: a workspace in a tenant, the tenant made on first use. */
import type { Container } from '../../container.js';
import { createWorkspace, ensureTenant, findWorkspaceByName } from '../../modules/tenancy/tenancy.repository.js';
import { CommandError } from '../errors.js';
import { checkName, requiredFlag, writeJson, type AdminCommand } from './command.js';
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

export const workspaceCommands: AdminCommand[] = [create];
