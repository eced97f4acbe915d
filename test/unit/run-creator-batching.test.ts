import { describe, expect, it } from 'vitest';
import { RunCreator, type CreateOutcome, type PreparedRun } from '../../src/engine/run-creator.js';
import { WorkSignals } from '../../src/lib/work-signals.js';
import { systemContext } from '../../src/auth/context.js';
import type { Db } from '../../src/storage/database.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function recordingCreator(options: { gatherTo?: number; gatherTurns?: number } = {}) {
  const batches: number[] = [];
  const creator = new RunCreator({} as Db, new WorkSignals(), {
    ...options,
    write: async (runs) => {
      batches.push(runs.length);
      return runs.map((run): CreateOutcome => ({ kind: 'created', runId: run.runId }));
    },
  });
  return { creator, batches };
}

let n = 0;
function prepared(): PreparedRun {
  n++;
  return {
    ctx: systemContext('tenant', 'workspace', `request-${n}`),
    runId: `run-${n}`,
    triggerId: 'trigger',
    blueprint: { id: 'blueprint', name: 'Pathway', version: 1 },
    status: 'queued',
    payloadJson: null,
    subjectRecordId: null,
    idempotencyKey: null,
    claim: null,
    origin: {},
    at: new Date(0).toISOString(),
  };
}

describe('run creator batching', () => {
  it('lets the runs of the next turns of the event loop join a small batch', async () => {
    const { creator, batches } = recordingCreator({ gatherTo: 48, gatherTurns: 3 });
    const created: Promise<CreateOutcome>[] = [];
    for (let t = 0; t < 3; t++) {
      for (let i = 0; i < 10; i++) created.push(creator.create(prepared()));
      await turn();
    }
    await Promise.all(created);
    expect(batches).toEqual([30]);
  });

  it('writes a batch that reached its size at once, without waiting for company', async () => {
    const { creator, batches } = recordingCreator({ gatherTo: 48, gatherTurns: 3 });
    const created = Array.from({ length: 50 }, () => creator.create(prepared()));
    await turn();
    expect(batches).toEqual([50]);
    await Promise.all(created);
  });

  it('writes a lone run after a few turns, never waiting on a timer', async () => {
    const { creator, batches } = recordingCreator({ gatherTo: 48, gatherTurns: 3 });
    let done = false;
    void creator.create(prepared()).then(() => {
      done = true;
    });
    for (let t = 0; t < 5 && !done; t++) await turn();
    expect(done).toBe(true);
    expect(batches).toEqual([1]);
  });

  it('without gathering, writes what arrived in one turn', async () => {
    const { creator, batches } = recordingCreator({ gatherTurns: 0 });
    const created: Promise<CreateOutcome>[] = [];
    for (let t = 0; t < 3; t++) {
      for (let i = 0; i < 10; i++) created.push(creator.create(prepared()));
      await turn();
    }
    await Promise.all(created);
    expect(batches).toEqual([10, 10, 10]);
  });
});
