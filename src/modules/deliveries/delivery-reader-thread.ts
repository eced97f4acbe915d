/**
 * The thread that reads delivery bodies for delivery-reader.ts: JSON parse, shape check, FHIR R4
 * validation and digest (ingestion/delivery-digest.ts), one body after the other. It answers
 * twice per body: as soon as the shape is known (the intake's 202 or 400 waits for that only),
 * then with the digest. It owns its FHIR validator; it has no store, no clock and no secrets.
 */
import { parentPort } from 'node:worker_threads';
import { ApiError } from '../../lib/errors.js';
import { createFhirValidator } from '../../ingestion/fhir-validate.js';
import { digestDelivery, readDeliveryBody, type DeliveryDigest } from '../../ingestion/delivery-digest.js';
import type { DeliveryItems } from '../../ingestion/delivery-body.js';
import { DIGEST_PART_ITEMS, type ReaderReply, type ReaderRequest } from './delivery-reader.js';

const port = parentPort;
if (!port) throw new Error('delivery-reader-thread.ts runs as a worker thread of delivery-reader.ts');
const validator = createFhirValidator();
const answer = (reply: ReaderReply) => port.postMessage(reply);

/** Bodies shaped and waiting for their digest, oldest first, with the length of their text. */
const waiting: { id: number; parsed: DeliveryItems; length: number }[] = [];
let waitingLength = 0;
let draining = false;

/**
 * Parsed bodies are several times larger than their text: past this much text waiting for its
 * digest, a new body is shaped only after the backlog is digested, so a sender that outruns the
 * thread slows down (its 202 waits) instead of the thread's memory growing without bound.
 */
const MAX_WAITING_TEXT = 64 * 1024 * 1024;

/** Digests being sent in parts (delivery-reader.ts DIGEST_PART_ITEMS), with the next item to send. */
const sending = new Map<number, { digest: DeliveryDigest; next: number }>();

/** A digest whole, or its first part; the serving thread asks for each next one (`more`). */
function sendDigest(id: number, digest: DeliveryDigest): void {
  if (digest.items.length <= DIGEST_PART_ITEMS) {
    answer({ id, kind: 'digested', digest });
    return;
  }
  sending.set(id, { digest, next: 0 });
  sendNextPart(id);
}

function sendNextPart(id: number): void {
  const sent = sending.get(id);
  if (!sent) return;
  const from = sent.next;
  sent.next = from + DIGEST_PART_ITEMS;
  if (sent.next < sent.digest.items.length) {
    answer({ id, kind: 'digest-part', items: sent.digest.items.slice(from, sent.next) });
    return;
  }
  sending.delete(id);
  answer({ id, kind: 'digested', digest: { items: sent.digest.items.slice(from), problems: sent.digest.problems } });
}

port.on('message', (request: ReaderRequest) => {
  const { id } = request;
  if (request.kind === 'warm') {
    answer({ id, kind: 'warmed', ms: validator.warm() });
    return;
  }
  if (request.kind === 'more') {
    sendNextPart(id);
    return;
  }
  while (waitingLength > MAX_WAITING_TEXT) digestOne();
  let parsed;
  const text = request.body;
  try {
    parsed = readDeliveryBody(text, request.stored);
  } catch (error) {
    answer(error instanceof ApiError ? { id, kind: 'refused', message: error.message } : { id, kind: 'broken', stage: 'shape', name: nameOf(error) });
    return;
  }
  answer({ id, kind: 'shaped', accepted: parsed.items.length });
  if (!request.digest) return;
  waiting.push({ id, parsed, length: text.length });
  waitingLength += text.length;
  if (!draining) {
    draining = true;
    setImmediate(digestNext);
  }
});

/**
 * One digest per turn: bodies that came meanwhile are shaped first, because a sender waits for
 * its 202 on the shape while the digest only feeds the processor.
 */
function digestNext(): void {
  if (!digestOne()) {
    draining = false;
    return;
  }
  setImmediate(digestNext);
}

/** Digests the oldest waiting body; false when none waits. */
function digestOne(): boolean {
  const next = waiting.shift();
  if (!next) return false;
  waitingLength -= next.length;
  try {
    sendDigest(next.id, digestDelivery(next.parsed, validator));
  } catch (error) {
    answer({ id: next.id, kind: 'broken', stage: 'digest', name: nameOf(error) });
  }
  return true;
}

/** Only the kind of error crosses back: messages may quote delivered data. */
function nameOf(error: unknown): string {
  return error instanceof Error ? error.name : 'Error';
}
