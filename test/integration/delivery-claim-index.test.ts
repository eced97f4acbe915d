/**
 * A claim of deliveries finds what it takes from an index (migration 0006): it never reads the
 * rows of deliveries in flight to learn their leases, which on SQLite meant reading through each
 * one's stored body (6.6 ms a claim with 300 bodies of 95 KiB in flight, against 21 µs).
 */
import { expect, it } from 'vitest';
import { CompiledQuery } from 'kysely';
import { describeEachStore } from '../helpers/test-env.js';
import { sqliteConnectionOf } from '../../src/storage/connect.js';
import { sqliteDeliveryStatementsOf } from '../../src/modules/deliveries/sqlite-delivery-statements.js';

describeEachStore('deliveries: the claim index', (env) => {
  it('claims by (status, lease_expires_at, id): on SQLite both branches of the claim are index searches', async () => {
    if (env.kind === 'postgres') {
      // PostgreSQL's plan depends on its statistics; what must hold is that the index exists.
      const { rows } = await env.db.executeQuery<{ indexdef: string }>(
        CompiledQuery.raw(`select indexdef from pg_indexes where schemaname = current_schema() and tablename = 'deliveries'`),
      );
      const definitions = rows.map((row) => row.indexdef);
      expect(definitions.some((d) => /deliveries_claim_by_lease .*\(status, lease_expires_at, id\)/.test(d))).toBe(true);
      expect(definitions.some((d) => / deliveries_claim /.test(d))).toBe(false);
      return;
    }
    const connection = sqliteConnectionOf(env.db)!;
    for (const statement of [sqliteDeliveryStatementsOf(env.db)!.claim, sqliteDeliveryStatementsOf(env.db)!.claimWithBodies]) {
      const plan = (connection.prepare(`explain query plan ${statement.source}`).all('o', 'x', 'n', 8, 'n') as { detail: string }[]).map((row) => row.detail);
      const onDeliveries = plan.filter((detail) => /deliveries/.test(detail));
      expect(onDeliveries.length).toBeGreaterThan(0);
      for (const detail of onDeliveries) expect(detail).toMatch(/^SEARCH deliveries USING (COVERING )?INDEX deliveries_claim_by_lease/);
      expect(onDeliveries.some((detail) => /lease_expires_at<\?/.test(detail))).toBe(true);
    }
  });

  it('checks which deliveries a processor still holds from an index, reading no row (migration 0015)', async () => {
    if (env.kind === 'postgres') {
      // PostgreSQL extends the leases (an UPDATE) and keeps bodies out of line: nothing to read through.
      return;
    }
    // A row holds its body before the lease columns: the check read through the body of every
    // delivery in processing, and through 20 MiB once a part for a delivery applied in parts.
    const connection = sqliteConnectionOf(env.db)!;
    const statement = sqliteDeliveryStatementsOf(env.db)!.heldLeases;
    const plan = (connection.prepare(`explain query plan ${statement.source}`).all('["x"]', 'o') as { detail: string }[]).map((row) => row.detail);
    expect(plan.filter((detail) => /deliveries/.test(detail))).toEqual([expect.stringMatching(/^SEARCH deliveries USING COVERING INDEX deliveries_lease_holder \(id=\? AND status=\? AND lease_owner=\?\)$/)]);
  });
});
