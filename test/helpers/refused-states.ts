/**
 * A store-side failure for one resource id, as a full disk, a constraint or a process killed
 * there would give: the store refuses to write that resource's state (a trigger on
 * `resource_states`). Answers the cure, which drops it again.
 */
import { sql } from 'kysely';
import type { TestEnv } from './test-env.js';

export async function refuseStateOf(env: TestEnv, resourceId: string): Promise<() => Promise<void>> {
  const name = `refuse_${resourceId.replace(/\W/g, '_')}`;
  const id = resourceId.replace(/'/g, "''");
  if (env.kind === 'sqlite') {
    await sql.raw(`create trigger ${name} before insert on resource_states when new.resource_id = '${id}' begin select raise(abort, 'refused'); end`).execute(env.db);
    return async () => void (await sql.raw(`drop trigger ${name}`).execute(env.db));
  }
  await sql
    .raw(`create function ${name}() returns trigger language plpgsql as $$ begin if new.resource_id = '${id}' then raise exception 'refused'; end if; return new; end $$`)
    .execute(env.db);
  await sql.raw(`create trigger ${name} before insert on resource_states for each row execute function ${name}()`).execute(env.db);
  return async () => {
    await sql.raw(`drop trigger ${name} on resource_states`).execute(env.db);
    await sql.raw(`drop function ${name}()`).execute(env.db);
  };
}
