// Engine time of a benchmark run: each engine call's interval on this process's clock, and the time
// during which at least one engine process ran. That is the sum of the calls when they run one
// after the other, and less when a round runs two at once (validate beside plan), which a plain sum
// would count twice — and so credit as less orchestration overhead than there is.
import type { EngineCall } from '../activities/engine';

export class EngineTimes {
  private intervals: [number, number][] = [];
  /** Every call of the run: its arguments and interval, on `performance.now()`'s clock. */
  readonly log: { args: string[]; start: number; end: number }[] = [];
  calls = 0;
  sumMs = 0;

  /** Record one call as it ends (an `onEngineCall` hook). */
  readonly record = (c: EngineCall): void => {
    const end = performance.now();
    this.intervals.push([end - c.durationMs, end]);
    this.log.push({ args: c.args, start: end - c.durationMs, end });
    this.calls += 1;
    this.sumMs += c.durationMs;
  };

  reset(): void {
    this.intervals = [];
    this.log.length = 0;
    this.calls = 0;
    this.sumMs = 0;
  }

  /** Milliseconds during which at least one engine process ran. */
  busyMs(): number {
    let total = 0;
    let end = -Infinity;
    for (const [a, b] of [...this.intervals].sort((x, y) => x[0] - y[0])) {
      if (a > end) {
        total += b - a;
        end = b;
      } else if (b > end) {
        total += b - end;
        end = b;
      }
    }
    return total;
  }
}
