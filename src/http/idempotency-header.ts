import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { invalidRequest } from '../lib/errors.js';
import { createKeyOf, CreateReplayed, earlierCreate, type CreatedKind, type CreateKey } from '../modules/idempotency/create-keys.js';
import type { DbOrTx } from '../storage/database.js';

/**
 * The request's `Idempotency-Key` header. Node joins a header sent twice into one value
 * ("a, b"), which became a key neither copy named: the same retry with the headers in another
 * order was a new run. Two of them are refused instead (400), whatever they hold.
 */
export function idempotencyKeyHeader(request: FastifyRequest): string | undefined {
  const value = request.headers['idempotency-key'];
  if (value === undefined) return undefined;
  // rawHeaders lists each header as sent, name then value (also under light-my-request's inject).
  const { rawHeaders } = request.raw;
  let sent = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].toLowerCase() === 'idempotency-key') sent++;
  if (sent > 1 || Array.isArray(value)) throw invalidRequest('send one Idempotency-Key header, not several');
  return value;
}

/** The header a keyed request may carry, as its routes declare it (validation and the OpenAPI document). */
export const IdempotencyKeyHeaders = Type.Object({ 'idempotency-key': Type.Optional(Type.String()) });

/** What a keyed create's route says of the key (OpenAPI description). */
export const CREATE_KEY_DESCRIPTION =
  'Send `Idempotency-Key` to make the create safe to retry: the same key and body answer what the first request made, ' +
  'as it is now, with 200 and `Idempotent-Replayed: true`, and make nothing again; the same key with another body, or a key ' +
  'a fire or another request used, is 409 `idempotency_mismatch`.';

/**
 * Answers a create that takes an Idempotency-Key (modules/idempotency/create-keys.ts): 201 with
 * what it made, or, when the same request came before, 200 and `Idempotent-Replayed: true` with
 * what that one made as it is now (`current`, which answers 404 when it was deleted since).
 */
export async function answerCreate<Made, Current>(
  request: FastifyRequest,
  reply: FastifyReply,
  db: DbOrTx,
  kind: CreatedKind,
  create: (createKey: CreateKey | undefined) => Promise<Made>,
  current: (madeId: string) => Promise<Current>,
): Promise<FastifyReply> {
  const createKey = createKeyOf(kind, idempotencyKeyHeader(request), request.body);
  const replay = async (madeId: string) => {
    // What it made first: a 404 if it was deleted since, which is no replay.
    const answer = await current(madeId);
    return reply.header('Idempotent-Replayed', 'true').code(200).send(answer);
  };
  // A retry is answered before the create's own checks, which a retry may no longer pass (a
  // key's condition-check budget spent, say): the same request made something already.
  const earlier = await earlierCreate(db, request.ctx.workspaceId, createKey);
  if (earlier) return replay(earlier);
  try {
    return reply.code(201).send(await create(createKey));
  } catch (error) {
    if (!(error instanceof CreateReplayed)) throw error;
    return replay(error.madeId);
  }
}
