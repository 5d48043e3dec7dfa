// How many engine processes (terraform, tofu) one worker runs at once: every call of every round,
// probe and stack detection takes a slot for as long as its process lives and waits for one when
// all are busy — 300 stacks due at once start `engine.max_concurrent` processes, not 300. A call
// waiting for its slot still heartbeats (the activity is alive) and stops waiting when cancelled.
import { availableParallelism } from 'node:os';
import pLimit, { type LimitFunction } from 'p-limit';

export class EngineSlots {
  private readonly limit: LimitFunction;

  /** `size` 0: as many as the machine has cores. */
  constructor(size = 0) {
    this.limit = pLimit(size > 0 ? size : availableParallelism());
  }

  get size(): number {
    return this.limit.concurrency;
  }
  /** Processes running now. */
  get running(): number {
    return this.limit.activeCount;
  }
  /** Calls waiting for a slot. */
  get waiting(): number {
    return this.limit.pendingCount;
  }

  /**
   * Runs `fn` in a slot. Aborted while it waits, the call fails at once with the signal's reason
   * and `fn` never runs; aborted once running, `fn` itself sees the signal.
   */
  run<T>(fn: () => Promise<T>, opts: { signal?: AbortSignal; onWait?: () => void } = {}): Promise<T> {
    const { signal } = opts;
    let started = false;
    const inSlot = this.limit(() => {
      started = true;
      if (signal?.aborted) return Promise.reject(abortReason(signal));
      return fn();
    });
    if (!started && this.limit.activeCount >= this.limit.concurrency) opts.onWait?.();
    if (!signal) return inSlot;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        if (!started) reject(abortReason(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      inSlot.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('The engine call was cancelled.');
}
