// Setup's background builds yield the CPU to what runs beside them (a test run, `npm start`): a
// detached build leads a session of its own, which Linux's autogroup scheduling weighs as a whole
// against every other session whatever its processes' nice — so the group's nice is raised too.
import { spawn, type ChildProcess } from 'node:child_process';
import { getPriority } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { autogroupOf, lowerPriority } from '../../../shared/infra/tools.mjs';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

function sleeper(detached: boolean): number {
  const child = spawn('sleep', ['60'], { detached, stdio: 'ignore' });
  children.push(child);
  if (!child.pid) throw new Error('sleep did not start');
  return child.pid;
}

describe('lowerPriority', () => {
  // Where the kernel groups by session (CONFIG_SCHED_AUTOGROUP), a detached child leads a group of
  // its own. This process may be in none: a CI job run in init's own session has an empty file.
  it("a detached process gets nice 19 and so does its session's scheduler group (where the kernel has one); this one's keeps its own", () => {
    const ours = autogroupOf('self');
    const pid = sleeper(true);
    const before = autogroupOf(pid);
    const grouped = before !== undefined;
    if (grouped) {
      expect(before.group).not.toBe(ours?.group);
      expect(before.nice).toBe(0);
    } else {
      expect(ours).toBeUndefined(); // a kernel without groups has none for this process either
    }

    expect(lowerPriority(pid)).toEqual({ nice: true, group: grouped });
    expect(getPriority(pid)).toBe(19);
    expect(autogroupOf(pid)).toEqual(grouped ? { group: before.group, nice: 19 } : undefined);
    expect(autogroupOf('self')).toEqual(ours);
  });

  it("a child in this session gets nice 19 and leaves the session's group as it was", () => {
    const ours = autogroupOf('self');
    const pid = sleeper(false);
    expect(autogroupOf(pid)?.group).toBe(ours?.group);

    expect(lowerPriority(pid)).toEqual({ nice: true, group: false });
    expect(getPriority(pid)).toBe(19);
    expect(autogroupOf('self')).toEqual(ours);
  });
});
