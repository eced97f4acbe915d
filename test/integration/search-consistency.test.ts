/**
 * A search's page agrees with its own filters while tags change under it. The matches (tag
 * bitmaps) and the page are two reads; a change committed between them once gave, on
 * PostgreSQL, pages of records that carried none of the tag searched for (a review).
 */
import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { changeTags, insertRecords } from '../../src/modules/records/record.repository.js';
import { searchRecords } from '../../src/modules/search/search.service.js';
import { systemContext } from '../../src/auth/context.js';

const RECORDS = 60;

describeEachStore('search: one snapshot', (env) => {
  it('never hands out a record that contradicts a with or without filter while tags flip', async () => {
    const ws = await env.workspace();
    const at = new Date().toISOString();
    const ids = await insertRecords(
      env.db,
      ws.workspaceId,
      Array.from({ length: RECORDS }, (_, i) => ({ resourceType: 'Patient' as const, extId: `f-${i}`, name: `Flip ${String(i).padStart(3, '0')}`, tags: ['flip'] })),
      at,
    );
    const ctx = { ...systemContext(ws.tenantId, ws.workspaceId, 'consistency'), keyName: 'test' };
    let flipped = 'flip';
    let writing = true;
    // The writer moves every record from one tag to the other in one transaction, over and over.
    const writer = (async () => {
      while (writing) {
        const [from, to] = flipped === 'flip' ? ['flip', 'flop'] : ['flop', 'flip'];
        await env.db.transaction().execute(async (tx) => {
          for (const id of ids) await changeTags(tx, ws.workspaceId, id, [to], [from], new Date().toISOString());
        });
        flipped = to;
      }
    })();
    let searches = 0;
    let wrong = 0;
    let wholePages = 0;
    const until = Date.now() + 4_000;
    try {
      while (Date.now() < until) {
        const [withFlip, withoutFlip] = await Promise.all([
          searchRecords(env.db, ctx, { resourceType: 'Patient', filters: [{ op: 'with', tag: 'flip' }], limit: 100 }, new Date()),
          searchRecords(env.db, ctx, { resourceType: 'Patient', filters: [{ op: 'without', tag: 'flip' }], limit: 100 }, new Date()),
        ]);
        searches += 2;
        wrong += withFlip.results.filter((hit) => !hit.tags.includes('flip')).length;
        wrong += withoutFlip.results.filter((hit) => hit.tags.includes('flip')).length;
        // Every record moves at once: a page holds all of them or none.
        for (const result of [withFlip, withoutFlip]) {
          expect([0, RECORDS]).toContain(result.total);
          if (result.results.length === RECORDS) wholePages++;
        }
      }
    } finally {
      writing = false;
      await writer;
    }
    expect(searches).toBeGreaterThan(20);
    expect(wrong).toBe(0);
    expect(wholePages).toBeGreaterThan(0);
  });
});
