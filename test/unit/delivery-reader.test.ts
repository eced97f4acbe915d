/**
 * The delivery reader: bodies parsed, shape-checked and digested on a thread of their own, with
 * the same answers as on the calling thread, and no body lost when the thread dies.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/lib/errors.js';
import { DIGEST_PART_ITEMS, inlineDeliveryReader, ThreadDeliveryReader, type DeliveryReader } from '../../src/modules/deliveries/delivery-reader.js';
import { EXAMPLES, validator } from '../helpers/deliveries.js';

const PATIENT_URN = 'urn:uuid:3f1b9f8e-7a56-4a0d-9a43-6f1d5b2a9c11';

/** A transaction with a new Patient (id from its fullUrl), an Encounter pointing at it, an invalid Observation, a deletion. */
const transaction = JSON.stringify({
  resourceType: 'Bundle',
  type: 'transaction',
  entry: [
    { fullUrl: PATIENT_URN, resource: { resourceType: 'Patient', meta: { tag: [{ code: 'High Risk' }] }, name: [{ given: ['Ada'], family: 'Lee' }] }, request: { method: 'POST', url: 'Patient' } },
    {
      fullUrl: 'urn:uuid:0b1c2d3e-4f50-4a6b-8c7d-8e9fa0b1c2d3',
      resource: { resourceType: 'Encounter', id: 'enc-1', status: 'in-progress', class: { code: 'IMP' }, subject: { reference: PATIENT_URN } },
      request: { method: 'PUT', url: 'Encounter/enc-1' },
    },
    { resource: { resourceType: 'Observation', id: 'obs-1', status: 42 }, request: { method: 'PUT', url: 'Observation/obs-1' } },
    { request: { method: 'DELETE', url: 'Condition/c-9' } },
    { resource: { resourceType: 'Encounter' } },
  ],
});

const examples = readdirSync(EXAMPLES)
  .filter((file) => file.startsWith('Bundle-') && file.endsWith('.json'))
  .slice(0, 12)
  .map((file) => readFileSync(join(EXAMPLES, file), 'utf8'));

const threads: ThreadDeliveryReader[] = [];
function threadReader(onLost?: (error: unknown) => void, threadModule?: string): ThreadDeliveryReader {
  const reader = new ThreadDeliveryReader(onLost, validator, threadModule);
  threads.push(reader);
  return reader;
}
afterAll(async () => {
  await Promise.all(threads.map((reader) => reader.close()));
});

async function refusal(reader: DeliveryReader, body: string): Promise<ApiError> {
  const error = await reader.read(body).shaped.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe('delivery reader', () => {
  const inline = inlineDeliveryReader(validator);

  it('digests a body into facts: ids from urn:uuid fullUrls, references resolved, records, JSON text, problems', async () => {
    const read = threadReader().read(transaction);
    expect(await read.shaped).toBe(4);
    const digest = await read.digest();
    expect(digest.problems.map((p) => p.index)).toEqual([2, 4]);
    const [patient, encounter, deletion] = digest.items;
    expect(patient).toMatchObject({
      kind: 'resource',
      index: 0,
      resourceType: 'Patient',
      id: '3f1b9f8e-7a56-4a0d-9a43-6f1d5b2a9c11',
      deleted: false,
      record: { resourceType: 'Patient', extId: '3f1b9f8e-7a56-4a0d-9a43-6f1d5b2a9c11', name: 'Ada Lee', tags: ['high-risk'] },
    });
    expect(encounter).toMatchObject({ index: 1, id: 'enc-1', status: 'in-progress', patientId: '3f1b9f8e-7a56-4a0d-9a43-6f1d5b2a9c11', record: null });
    expect(JSON.parse((encounter as { json: string }).json)).toEqual(JSON.parse(transaction).entry[1].resource);
    expect(deletion).toMatchObject({ index: 3, resourceType: 'Condition', id: 'c-9', deleted: true, status: null, json: '{"resourceType":"Condition","id":"c-9"}' });
  });

  it('gives the same shape and digest on its thread as on the calling thread (HL7 R4 example bundles)', async () => {
    const reader = threadReader();
    for (const body of [transaction, ...examples]) {
      const [onThread, here] = [reader.read(body), inline.read(body)];
      expect(await onThread.shaped).toBe(await here.shaped);
      expect(await onThread.digest()).toEqual(await here.digest());
    }
  });

  it('sends a large digest in parts, one asked for at a time, and it arrives whole and in order', async () => {
    // 2.5 parts of Patients and a refused entry: the problems come with the last part.
    const count = Math.floor(DIGEST_PART_ITEMS * 2.5);
    const entries = Array.from({ length: count }, (_, i) => ({ resource: { resourceType: 'Patient', id: `many-${i}`, name: [{ family: `F${i}` }] } }));
    entries.splice(17, 0, { resource: { resourceType: 'Patient', id: 'bad', gender: 42 } } as never);
    const body = JSON.stringify({ resourceType: 'Bundle', type: 'collection', entry: entries });
    const reader = threadReader();
    // Two at once: the parts of one do not mix with the other's.
    const [first, second, here] = [reader.read(body), reader.read(body), inline.read(body)];
    const expected = await here.digest();
    expect(expected.items).toHaveLength(count);
    expect(expected.problems).toHaveLength(1);
    expect(await first.digest()).toEqual(expected);
    expect(await second.digest()).toEqual(expected);
  });

  it('refuses bad bodies with the same invalid_request message as the calling thread', async () => {
    const reader = threadReader();
    for (const body of ['', '{"resourceType": ', '[1, 2]', '{"resourceType":"Patient","id":"p","__proto__":{"x":1}}', '{"records": 5}']) {
      const [onThread, here] = [await refusal(reader, body), await refusal(inline, body)];
      expect(onThread.code).toBe('invalid_request');
      expect(onThread.message).toBe(here.message);
    }
    // The digest of a refused body rejects too, and nobody asking for it is not an unhandled rejection.
    await expect(reader.read('{').digest()).rejects.toBeInstanceOf(ApiError);
  });

  it('reads stored bodies with plain JSON.parse, and only shapes when no digest is wanted', async () => {
    const reader = threadReader();
    const stored = reader.read(transaction, { stored: true });
    expect((await stored.digest()).items).toHaveLength(3);
    const shapeOnly = reader.read(transaction, { digest: false });
    expect(await shapeOnly.shaped).toBe(4);
    await expect(shapeOnly.digest()).rejects.toThrow(/shape only/);
  });

  it('reads on the calling thread what a dead thread held, and starts a new thread for the next body', async () => {
    const lost: unknown[] = [];
    const reader = threadReader((error) => lost.push(error));
    await reader.read(transaction).shaped;
    const reads = [reader.read(transaction), reader.read('{"resourceType": 1}'), reader.read(examples[0])];
    // The thread dies with three bodies in hand (as if killed by the operating system).
    await (reader as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    expect(lost).toHaveLength(1);
    expect(await reads[0].shaped).toBe(4);
    expect((await reads[0].digest()).problems).toHaveLength(2);
    await expect(reads[1].shaped).rejects.toBeInstanceOf(ApiError);
    expect(await reads[2].digest()).toEqual(await inline.read(examples[0]).digest());
    // A new thread takes the next body.
    const next = reader.read(transaction);
    expect(await next.shaped).toBe(4);
    expect((reader as unknown as { worker: unknown }).worker).not.toBeNull();
  });

  it('reads on the calling thread for good when its threads keep failing to start', async () => {
    const lost: unknown[] = [];
    const reader = threadReader((error) => lost.push(error), 'data:text/javascript,throw new Error("cannot start")');
    for (let attempt = 0; attempt < 5; attempt++) {
      const read = reader.read(transaction);
      expect(await read.shaped).toBe(4);
      expect((await read.digest()).items).toHaveLength(3);
    }
    expect(lost).toHaveLength(3);
    expect(reader.threaded).toBe(false);
  });

  it('starts its thread from any working directory', async () => {
    const cwd = process.cwd();
    process.chdir('/');
    try {
      const reader = threadReader();
      expect(await reader.read(transaction).shaped).toBe(4);
      expect(reader.threaded).toBe(true);
    } finally {
      process.chdir(cwd);
    }
  });

  it('answers a shape at once while its thread compiles the validation, and digests the body after', async () => {
    const reader = threadReader();
    const settled: string[] = [];
    const warmed = reader.warm().then(() => settled.push('warmed'));
    const read = reader.read(transaction);
    const refused = reader.read('{"resourceType": ');
    const shapeOnly = reader.read(transaction, { digest: false });
    const shaped = read.shaped.then((accepted) => settled.push(`shaped ${accepted}`));
    await expect(refused.shaped).rejects.toMatchObject({ code: 'invalid_request' });
    expect(await shapeOnly.shaped).toBe(4);
    await Promise.all([warmed, shaped]);
    // Before, the shape came after the compile (seconds): the thread answers in order.
    expect(settled).toEqual(['shaped 4', 'warmed']);
    expect(await read.digest()).toEqual(await inline.read(transaction).digest());
    await expect(shapeOnly.digest()).rejects.toThrow(/shape only/);
    // Once warm, bodies go to the thread for their shape as before.
    expect(await reader.read(transaction).shaped).toBe(4);
  });

  it('warms its validation on the thread, and reads on the calling thread once closed', async () => {
    const reader = threadReader();
    expect(await reader.warm()).toBeGreaterThan(0);
    await reader.close();
    expect(await reader.read(transaction).shaped).toBe(4);
    expect((reader as unknown as { worker: unknown }).worker).toBeNull();
  });
});
