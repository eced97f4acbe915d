/**
 * Migrations that correct rows older versions stored: applied to a store as the version before
 * them left it, they change exactly the rows that are wrong.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { STORE_KINDS } from '../helpers/stores.js';
import { storesAtMigration } from '../helpers/store-at-migration.js';

for (const kind of STORE_KINDS) {
  describe(`migrations that fix stored rows [${kind}]`, () => {
    const stores = storesAtMigration(kind);
    afterAll(() => stores.closeAll());

    it('0011 clears the next run of inactive and deleted triggers, and a tick past the year 9999', async () => {
      const { store, migrator } = await stores.open('0010_event_trigger_when');

      const at = '2026-11-01T00:00:00.000Z';
      const trigger = (id: string, active: number, next: string | null, deleted: string | null = null) => ({
        id, workspace_id: 'w', name: id, source_id: 's', type: 'search' as const, query_id: 'q', event: null, schedule: null,
        next_run_at: next, auto_start: 1, active, one_per_subject: 1, when_expression: null, created_at: at, updated_at: at, deleted_at: deleted,
      });
      await store.db
        .insertInto('triggers')
        .values([
          trigger('due', 1, '2026-11-02T08:00:00.000Z'),
          trigger('switched-off', 0, '2026-11-02T08:00:00.000Z'),
          trigger('deleted', 1, '2026-11-02T08:00:00.000Z', at),
          trigger('past-9999', 1, '+010000-01-01T04:30:00.000Z'),
          trigger('ended', 1, null),
        ])
        .execute();
      expect((await migrator.migrateToLatest()).error).toBeUndefined();
      const rows = await store.db.selectFrom('triggers').select(['id', 'next_run_at']).orderBy('id').execute();
      expect(Object.fromEntries(rows.map((row) => [row.id, row.next_run_at]))).toEqual({
        deleted: null,
        due: '2026-11-02T08:00:00.000Z',
        ended: null,
        'past-9999': null,
        'switched-off': null,
      });
    });
  });
}
