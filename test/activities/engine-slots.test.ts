// Engine slots: at most `size` engine processes at once on a worker, the others wait (and say so
// in their heartbeat); a call cancelled while it waits fails at once and never starts its process.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EngineClient } from '../../activities/engine';
import { EngineSlots } from '../../activities/engine-slots';
import { testSandbox } from '../support/test-stack';
import { engineDeps } from '../support/stack';

/** A task that stays running until its gate opens. */
function gated() {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  return { gate, open };
}

describe('engine slots', () => {
  it('run at most their size at once and start the next as one ends', async () => {
    const slots = new EngineSlots(2);
    const gates = Array.from({ length: 5 }, gated);
    let running = 0;
    let peak = 0;
    const started: number[] = [];
    const all = gates.map((g, i) =>
      slots.run(async () => {
        started.push(i);
        running += 1;
        peak = Math.max(peak, running);
        await g.gate;
        running -= 1;
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1]);
    expect(slots.waiting).toBe(3);
    for (const g of gates) g.open();
    expect(await Promise.all(all)).toEqual([0, 1, 2, 3, 4]);
    expect(peak).toBe(2);
    expect(slots.running).toBe(0);
  });

  it('a call cancelled while it waits fails at once and never runs', async () => {
    const slots = new EngineSlots(1);
    const busy = gated();
    const first = slots.run(() => busy.gate);
    const abort = new AbortController();
    let ran = false;
    let waited = false;
    const second = slots.run(
      () => {
        ran = true;
        return Promise.resolve();
      },
      { signal: abort.signal, onWait: () => (waited = true) },
    );
    expect(waited).toBe(true);
    abort.abort(new Error('activity cancelled'));
    await expect(second).rejects.toThrow('activity cancelled');
    busy.open();
    await first;
    // The queued call's turn came and went: it did not run.
    await slots.run(() => Promise.resolve());
    expect(ran).toBe(false);
  });

  it('keep two real engines sharing one slot from running at the same time', async () => {
    const slots = new EngineSlots(1);
    // The real terraform behind a wrapper that logs when each process starts and ends.
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-slots-'));
    const log = join(dir, 'calls.log');
    const wrapper = join(dir, 'terraform');
    writeFileSync(
      wrapper,
      `#!/bin/sh\necho start >> "${log}"\n"${engineDeps().binary}" "$@"\nrc=$?\necho end >> "${log}"\nexit $rc\n`,
      { mode: 0o755 },
    );
    writeFileSync(log, '');
    const heartbeats: string[] = [];
    const engines = [1, 2].map((n) => {
      const root = mkdtempSync(join(dir, `root-${n}-`));
      writeFileSync(join(root, 'main.tf'), `output "n" {\n  value = ${n}\n}\n`);
      // The wrapper writes its log beside itself: the sandbox lets it.
      return new EngineClient({
        ...engineDeps(),
        sandbox: testSandbox([dir]),
        binary: wrapper,
        slots,
        workdir: root,
        scopeId: 'slots',
      });
    });
    // Each caller hears when its process is asked for (before its call ends): the second only once
    // the first process ended.
    const asked: string[][] = [];
    const events: string[] = [];
    await Promise.all(
      engines.map((e, n) =>
        e
          .init({
            heartbeat: (d) => heartbeats.push(d),
            onStart: () => {
              events.push(`asked ${n}`);
              asked.push(readFileSync(log, 'utf8').trim().split('\n').filter(Boolean));
            },
          })
          .then(() => events.push(`done ${n}`)),
      ),
    );
    for (const n of [0, 1]) expect(events.indexOf(`asked ${n}`)).toBeLessThan(events.indexOf(`done ${n}`));
    expect(asked).toEqual([[], ['start', 'end']]);
    expect(readFileSync(log, 'utf8').trim().split('\n')).toEqual(['start', 'end', 'start', 'end']);
    expect(heartbeats).toContain('terraform init waiting for an engine slot (1 of 1 busy)');
  });
});
