/**
 * `carepath admin delivery retry <deliveryId>`: a `failed` delivery back to `received`, so a
 * processor takes it again once its cause is fixed (a bug fixed by an upgrade, say). A failed
 * delivery keeps its body for exactly this; the sender had its 202 and will not send it again.
 * Audited as `delivery.retry` in the delivery's workspace.
 *
 * `carepath admin delivery list --workspace <id> [--status failed] [--limit n]`: the workspace's
 * deliveries, newest first, across all its endpoints, deleted ones too: the API lists them per
 * endpoint and answers 404 for a deleted one, whose failed deliveries an operator may still
 * need to find and retry. Counts and states only, never a body.
 */
import type { Container } from '../../container.js';
import { isUuid } from '../../lib/ids.js';
import { requeueFailedDelivery } from '../../modules/deliveries/delivery.repository.js';
import { CommandError, UsageError } from '../errors.js';
import { idArgument, optionalFlag, requireWorkspace, workspaceFlag, writeJson, type AdminCommand } from './command.js';
import { listDeliveries, type DeliveryView } from '../../modules/deliveries/delivery.repository.js';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../../storage/database.js';
import { auditAdminChange } from './admin-audit.js';

export interface DeliveryRetried {
  deliveryId: string;
  webhookId: string;
  status: 'received';
}

export async function deliveryRetry(container: Container, args: { deliveryId: string }): Promise<DeliveryRetried> {
  const at = container.clock.now().toISOString();
  const outcome = !isUuid(args.deliveryId)
    ? ({ kind: 'not-found' } as const)
    : await container.db.transaction().execute(async (tx) => {
        const result = await requeueFailedDelivery(tx, args.deliveryId);
        if (result.kind === 'requeued') {
          await auditAdminChange(tx, { id: result.workspaceId, tenant_id: result.tenantId }, container.config.environment, at, {
            action: 'delivery.retry',
            resourceType: 'delivery',
            resourceId: args.deliveryId,
            details: { webhookId: result.webhookId, previousError: result.error },
          });
        }
        return result;
      });
  switch (outcome.kind) {
    case 'requeued':
      // Processors poll the store (every second by default): one takes it at its next look.
      return { deliveryId: args.deliveryId, webhookId: outcome.webhookId, status: 'received' };
    case 'not-found':
      throw new CommandError(`no delivery has the id "${args.deliveryId}"`);
    case 'not-failed':
      throw new CommandError(`delivery ${args.deliveryId} is ${outcome.status}, not failed: only a failed delivery can be retried`);
    case 'no-body':
      throw new CommandError(`delivery ${args.deliveryId} kept no body to process again`);
  }
}

const retry: AdminCommand<{ deliveryId: string }> = {
  noun: 'delivery',
  verb: 'retry',
  synopsis: '<deliveryId> [--json]',
  flags: [],
  positionals: ['deliveryId'],
  parse: (input) => ({ deliveryId: idArgument(input.positionals[0]) }),
  async execute(container, args, out, json) {
    const result = await deliveryRetry(container, args);
    if (json) return writeJson(out, result);
    await out.write(`Delivery ${result.deliveryId} is received again; a running worker (or serve) processes it within a second or two.\n`);
  },
};

export interface ListedDelivery extends Omit<DeliveryView, 'skipped' | 'events'> {
  webhookId: string;
  /** The endpoint was deleted (its deliveries stay, and a failed one can still be retried). */
  endpointDeleted: boolean;
}

const MAX_LISTED = 1000;

export async function deliveryList(
  container: Container,
  args: { workspaceId: string; status?: DeliveryStatus; limit: number },
): Promise<ListedDelivery[]> {
  await requireWorkspace(container, args.workspaceId);
  const endpoints = await container.db.selectFrom('webhooks').select(['id', 'deleted_at']).where('workspace_id', '=', args.workspaceId).execute();
  const listed: ListedDelivery[] = [];
  // Each endpoint's newest through the (webhook_id, id) index, then the newest of them all.
  for (const endpoint of endpoints) {
    const page = await listDeliveries(container.db, endpoint.id, { limit: args.limit, ...(args.status ? { status: args.status } : {}) });
    for (const { skipped: _skipped, events: _events, ...delivery } of page.data) {
      listed.push({ ...delivery, webhookId: endpoint.id, endpointDeleted: endpoint.deleted_at !== null });
    }
  }
  return listed.sort((a, b) => (a.deliveryId < b.deliveryId ? 1 : -1)).slice(0, args.limit);
}

const list: AdminCommand<{ workspaceId: string; status?: DeliveryStatus; limit: number }> = {
  noun: 'delivery',
  verb: 'list',
  synopsis: '--workspace <workspaceId> [--status received|processing|processed|failed] [--limit n] [--json]',
  flags: ['workspace', 'status', 'limit'],
  positionals: [],
  parse: (input) => {
    const status = optionalFlag(input, 'status');
    if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
      throw new UsageError(`--status must be one of ${DELIVERY_STATUSES.join(', ')}`);
    }
    const limitText = optionalFlag(input, 'limit') ?? '100';
    const limit = Number(limitText);
    if (!/^\d+$/.test(limitText) || limit < 1 || limit > MAX_LISTED) throw new UsageError(`--limit must be a whole number from 1 to ${MAX_LISTED}`);
    return { workspaceId: workspaceFlag(input), limit, ...(status ? { status: status as DeliveryStatus } : {}) };
  },
  async execute(container, args, out, json) {
    const deliveries = await deliveryList(container, args);
    if (json) return writeJson(out, deliveries);
    if (deliveries.length === 0) return void (await out.write('none\n'));
    const line = (d: ListedDelivery) =>
      `${d.deliveryId}  ${d.status.padEnd(10)} ${d.receivedAt}  endpoint ${d.webhookId}${d.endpointDeleted ? ' (deleted)' : ''}  accepted ${d.accepted}, runs ${d.runsStarted}${d.error ? `  error: ${d.error}` : ''}\n`;
    await out.write(deliveries.map(line).join(''));
  },
};

export const deliveryCommands: AdminCommand[] = [retry, list];
