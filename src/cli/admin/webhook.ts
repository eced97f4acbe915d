/**
 * `carepath admin webhook rotate-secret`: a new secret for an endpoint without changing its URL
 * (the spec arranges rotation outside the API). The old secret keeps verifying for the overlap,
 * so the sending system can switch over without losing a delivery (DESIGN §7).
 */
import { Duration } from 'luxon';
import type { Container } from '../../container.js';
import { ApiError } from '../../lib/errors.js';
import { isUuid } from '../../lib/ids.js';
import { hasNegativePart } from '../../lib/iso-duration.js';
import { checkedSecretBox } from '../../modules/secrets/secret-key-check.js';
import { rotateSecret } from '../../modules/webhooks/webhook-secrets.js';
import { CommandError, UsageError } from '../errors.js';
import { idArgument, optionalFlag, writeJson, type AdminCommand } from './command.js';
import { auditAdminChange } from './admin-audit.js';

export const DEFAULT_OVERLAP = 'PT24H';

export interface WebhookRotateArgs {
  webhookId: string;
  overlapMs: number;
}

export interface WebhookRotated {
  webhookId: string;
  /** Shown once: the service keeps it sealed and never prints it again. */
  secret: string;
  oldSecretValidUntil: string;
}

/**
 * The longest overlap: long enough to reconfigure every sender of a feed, short enough that a
 * secret rotated because it leaked stops working. `P1000Y` was taken (an operations review).
 */
export const MAX_OVERLAP_DAYS = 30;

/** An ISO 8601 duration (`PT24H`, `P2D`, `PT0S` to end the old secret at once) in milliseconds. */
export function parseOverlap(text: string): number {
  const duration = Duration.fromISO(text);
  // ISO 8601 has no negative parts; luxon reads them (`P-1M30DT1H` is 1 h by its measure).
  const ms = duration.isValid && !hasNegativePart(duration) ? duration.toMillis() : Number.NaN;
  if (!Number.isFinite(ms) || ms < 0) {
    throw new UsageError(`--overlap must be an ISO 8601 duration such as PT24H or PT0S, got "${text}"`);
  }
  if (ms > MAX_OVERLAP_DAYS * 86_400_000) {
    throw new UsageError(`--overlap may be at most P${MAX_OVERLAP_DAYS}D: the old secret, which may have leaked, stays valid that long; got "${text}"`);
  }
  return ms;
}

export async function webhookRotateSecret(container: Container, args: WebhookRotateArgs): Promise<WebhookRotated> {
  const now = container.clock.now();
  // The new secret is sealed with this shell's key: it must be the deployment's.
  const box = await checkedSecretBox(container.db, container.config.secretKey);
  try {
    if (!isUuid(args.webhookId)) throw new CommandError(`no webhook endpoint has the id "${args.webhookId}"`);
    const secret = await rotateSecret(container.db, box, args.webhookId, args.overlapMs, now, async (tx, webhook) => {
      const workspace = await tx.selectFrom('workspaces').select(['id', 'tenant_id']).where('id', '=', webhook.workspace_id).executeTakeFirstOrThrow();
      await auditAdminChange(tx, workspace, container.config.environment, now.toISOString(), {
        action: 'webhook.rotate_secret',
        resourceType: 'webhook',
        resourceId: webhook.id,
        details: { overlapSeconds: Math.round(args.overlapMs / 1000) },
      });
    });
    return {
      webhookId: args.webhookId,
      secret,
      oldSecretValidUntil: new Date(now.getTime() + args.overlapMs).toISOString(),
    };
  } catch (error) {
    if (error instanceof ApiError && error.code === 'not_found') {
      throw new CommandError(`no live webhook endpoint has the id "${args.webhookId}"`);
    }
    throw error;
  }
}

const rotate: AdminCommand<WebhookRotateArgs> = {
  noun: 'webhook',
  verb: 'rotate-secret',
  synopsis: `<webhookId> [--overlap <ISO duration, default ${DEFAULT_OVERLAP}>] [--json]`,
  flags: ['overlap'],
  positionals: ['webhookId'],
  parse: (input) => ({
    webhookId: idArgument(input.positionals[0]),
    overlapMs: parseOverlap(optionalFlag(input, 'overlap') ?? DEFAULT_OVERLAP),
  }),
  async execute(container, args, out, json) {
    const rotated = await webhookRotateSecret(container, args);
    if (json) return writeJson(out, rotated);
    await out.write(
      `New secret for webhook endpoint ${rotated.webhookId} (shown only now):\n` +
        `${rotated.secret}\n` +
        (args.overlapMs === 0
          ? 'The old secret stopped working now (no overlap): deliveries signed with it are refused.\n'
          : `The old secret keeps working until ${rotated.oldSecretValidUntil}; update the sending system before then.\n`),
    );
  },
};

export const webhookCommands: AdminCommand[] = [rotate];
