import { EventEmitter } from 'node:events';

/**
 * In-process wake-up calls between parts of one process ("a run was scheduled", "a delivery was
 * stored"). They only shorten waits: every consumer also polls the store, so a signal that is
 * lost, or work made by another process, is still picked up.
 */
export type WorkKind = 'runs' | 'deliveries' | 'timers';

export class WorkSignals {
  private readonly emitter = new EventEmitter();

  constructor() {
    this.emitter.setMaxListeners(100);
  }

  notify(kind: WorkKind): void {
    this.emitter.emit(kind);
  }

  on(kind: WorkKind, listener: () => void): () => void {
    this.emitter.on(kind, listener);
    return () => this.emitter.off(kind, listener);
  }
}
