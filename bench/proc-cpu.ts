// Where a machine's CPU went over a stretch of time, by process: two snapshots of /proc/<pid>/stat
// (utime + stime, and cutime + cstime — what the process's reaped children used), their difference
// grouped under a label. A process that started and ended between the snapshots is counted in the
// children time of the process that reaped it: the spawner for git, the machine's init for the
// sandboxed engines and their providers (bubblewrap's monitor exits first and orphans them).
import { readdirSync, readFileSync } from 'node:fs';

const TICK_S = 0.01; // USER_HZ on Linux.

interface Sample {
  label: string;
  self: number;
  children: number;
}

/** A process's label, from its name and command line; undefined: not counted. */
export type Labeller = (pid: number, comm: string, cmdline: string) => string | undefined;

export function snapshot(label: Labeller): Map<number, Sample> {
  const out = new Map<number, Sample>();
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      // The name is in parentheses and may hold spaces: the fields follow its closing one.
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const f = stat
        .slice(close + 2)
        .split(' ')
        .map(Number);
      // Fields 14–17 of stat (1-based), counted from field 3 here.
      const [utime, stime, cutime, cstime] = [f[11] ?? 0, f[12] ?? 0, f[13] ?? 0, f[14] ?? 0];
      const cmdline = readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const l = label(Number(p), comm, cmdline);
      if (l) out.set(Number(p), { label: l, self: utime + stime, children: cutime + cstime });
    } catch {
      // gone between listing and reading
    }
  }
  return out;
}

/** CPU-seconds by label between two snapshots, largest first. */
export function cpuByLabel(before: Map<number, Sample>, after: Map<number, Sample>): [string, number][] {
  const by = new Map<string, number>();
  for (const [pid, b] of after) {
    const a = before.get(pid);
    const ticks = a ? b.self - a.self + (b.children - a.children) : b.self + b.children;
    by.set(b.label, (by.get(b.label) ?? 0) + ticks * TICK_S);
  }
  return [...by].sort((x, y) => y[1] - x[1]);
}

/** The processes of a test stack on this machine, by what they are. */
export function stackLabeller(opts: { benchPid: number; workerPids: number[] }): Labeller {
  return (pid, comm, cmdline) => {
    // The test stack in this process: the git host (and its git http-backend children), the
    // object store (s3rver), the drift bed's REST cloud.
    if (pid === opts.benchPid) return 'git host, object store, REST cloud (bench process)';
    if (opts.workerPids.includes(pid)) return 'worker (node)';
    // The spawner reaps git and the engines' sandboxes; bubblewrap's monitor exits before the
    // sandbox's init, whose engine and providers the machine's init then reaps.
    if (cmdline.includes('spawner.mjs')) return 'git and bubblewrap (spawner children)';
    if (pid === 1) return 'sandboxed engines and providers (reaped by init)';
    if (comm === 'temporal' || cmdline.includes('temporal')) return 'Temporal server';
    if (comm === 'postgres') return 'PostgreSQL';
    if (cmdline.includes('moto_server')) return 'AWS emulator (moto)';
    return undefined;
  };
}
