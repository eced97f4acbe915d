/**
 * PostgreSQL as Kysely speaks it, except that listing tables looks at the connection's own schema
 * only. Kysely's migrator asks whether its tables exist by listing every table, with its columns,
 * of every schema in the database; when another schema is being created or dropped meanwhile
 * (other carepath deployments or test files sharing the database), that listing fails with
 * "schema … does not exist" or "column … does not exist" for objects that are not ours. This
 * service reads table metadata for nothing else.
 */
import {
  DEFAULT_MIGRATION_LOCK_TABLE,
  DEFAULT_MIGRATION_TABLE,
  PostgresDialect,
  PostgresIntrospector,
  sql,
  type DatabaseIntrospector,
  type Kysely,
  type TableMetadata,
} from 'kysely';

export class SchemaScopedPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    const standard = new PostgresIntrospector(db);
    return {
      getSchemas: () => standard.getSchemas(),
      getTables: (options) => tablesOfCurrentSchema(db, options?.withInternalKyselyTables ?? false),
      getMetadata: async (options) => ({ tables: await tablesOfCurrentSchema(db, options?.withInternalKyselyTables ?? false) }),
    };
  }
}

/** Tables and views of the current schema, by name (without columns: nothing here needs them). */
async function tablesOfCurrentSchema(db: Kysely<any>, withKyselyTables: boolean): Promise<TableMetadata[]> {
  const { rows } = await sql<{ name: string; kind: string; schema: string }>`
    select c.relname as name, c.relkind as kind, n.nspname as schema
    from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
    where n.nspname = current_schema() and c.relkind in ('r', 'v', 'm', 'p')
    order by c.relname`.execute(db);
  return rows
    .filter((row) => withKyselyTables || !KYSELY_TABLES.has(row.name))
    .map((row) => ({ name: row.name, schema: row.schema, isView: row.kind === 'v' || row.kind === 'm', columns: [] }));
}

/** The migrator's own tables, listed only when asked for (as Kysely's own introspector does). */
const KYSELY_TABLES = new Set([DEFAULT_MIGRATION_TABLE, DEFAULT_MIGRATION_LOCK_TABLE]);
