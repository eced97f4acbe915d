/**
 * `carepath admin delivery retry <deliveryId>`: a `failed` delivery back to `received`, so a
 * processor takes it again once its cause is fixed (a bug fixed by an upgrade, say). A failed
 * delivery keeps its body for exactly this; the sender had its 202 and will not send it again.
 * Find them with `GET /v1/webhooks/{webhookId}/deliveries?status=failed`. Audited as
 * `delivery.retry` in the delivery's workspace.
 */
import type { Container } from '../../container.js';
import { isUuid } from '../../lib/ids.js';
import { requeueFailedDelivery } from '../../modules/deliveries/delivery.repository.js';
import { CommandError } from '../errors.js';
import { idArgument, writeJson, type AdminCommand } from './command.js';
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

export const deliveryCommands: AdminCommand[] = [retry];
