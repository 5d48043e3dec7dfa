// The engine's sandbox (activities/sandbox.ts), tried from inside a root: a repository's code that
// reads the worker's environment, other checkouts, the data directory and the tool cache, and that
// writes outside its checkout. Real terraform under real bubblewrap.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EngineClient, EngineError } from '../../activities/engine';
import { EngineSandbox } from '../../activities/sandbox';
import { cliConfigPath, toolsDir } from '../../shared/infra/tools.mjs';
import { engineDeps } from '../support/stack';

/** A secret the test process (standing for the worker) holds in its environment. */
const WORKER_SECRET = `worker-secret-${Math.random().toString(36).slice(2)}`;

/** The pinned hashicorp/local, which the roots below use. */
const LOCAL_PROVIDER = `terraform {
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = "1.4.0"
    }
  }
}
`;

interface PlanJson {
  planned_values?: { outputs?: Record<string, { value?: unknown }> };
}

describe('the engine sandbox (bubblewrap): a root reaches its own run directory and nothing else', () => {
  const base = mkdtempSync(join(tmpdir(), 'kumoss-sandbox-'));
  // What a worker holds beside a run: another session's checkout and Kumoss's data directory.
  const otherCheckout = join(base, 'work', 'other-session', 'repo');
  const dataDir = join(base, 'kumoss-data');
  const previous = process.env.KUMOSS_TEST_WORKER_SECRET;

  beforeAll(() => {
    process.env.KUMOSS_TEST_WORKER_SECRET = WORKER_SECRET;
    mkdirSync(otherCheckout, { recursive: true });
    writeFileSync(join(otherCheckout, 'main.tf'), "# another organization's root\n");
    mkdirSync(join(dataDir, 'run'), { recursive: true });
    writeFileSync(join(dataDir, 'run', 'secrets.env'), `GIT_TOKEN=${WORKER_SECRET}\n`);
  });
  afterAll(() => {
    if (previous === undefined) delete process.env.KUMOSS_TEST_WORKER_SECRET;
    else process.env.KUMOSS_TEST_WORKER_SECRET = previous;
  });

  /** A run directory holding a checkout with `files` as its root, and an engine client on it. */
  const run = (files: Record<string, string>, opts: { sandbox?: EngineSandbox } = {}) => {
    const runDir = join(base, 'work', `session-${Math.random().toString(36).slice(2, 8)}`);
    const root = join(runDir, 'repo');
    mkdirSync(join(root, '.git'), { recursive: true });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(root, name), text);
    const engine = new EngineClient({
      ...engineDeps(),
      // The run's cloud credentials, as its connection gives them.
      runCredentials: () =>
        Promise.resolve({
          env: { AWS_ACCESS_KEY_ID: 'run-key', AWS_SECRET_ACCESS_KEY: 'run-secret' },
          expiresAt: Number.POSITIVE_INFINITY,
        }),
      ...(opts.sandbox ? { sandbox: opts.sandbox } : {}),
      workdir: root,
      runDir,
      scopeId: 'sandbox-test',
    });
    return { engine, runDir, root };
  };

  let ownRun = '';
  const outputs = async (files: Record<string, string>) => {
    const { engine, runDir } = run(files);
    ownRun = runDir;
    const plan = join(runDir, 'probe.tfplan');
    await engine.plan({ out: plan });
    await engine.showJson(plan, join(runDir, 'probe.json'));
    const json = JSON.parse(readFileSync(join(runDir, 'probe.json'), 'utf8')) as PlanJson;
    return Object.fromEntries(
      Object.entries(json.planned_values?.outputs ?? {}).map(([k, v]) => [k, v.value]),
    );
  };

  it("`/proc/self/environ` holds the run's own variables and nothing of the worker's", async () => {
    const out = await outputs({
      'main.tf': 'output "environ" { value = filebase64("/proc/self/environ") }\n',
    });
    const environ = Buffer.from(String(out.environ), 'base64').toString('utf8');
    const names = environ
      .split('\0')
      .filter(Boolean)
      .map((kv) => kv.split('=')[0] ?? '')
      .sort();
    expect(environ).not.toContain(WORKER_SECRET);
    expect(environ).toContain('AWS_SECRET_ACCESS_KEY=run-secret');
    expect(
      names.filter(
        (n) =>
          !/^(TF_|AWS_|CHECKPOINT_DISABLE$|GOGC$|GOMEMLIMIT$|PATH$|HOME$|PWD$|(HTTPS?|NO)_PROXY$|(https?|no)_proxy$)/.test(
            n,
          ),
      ),
    ).toEqual([]);
    // Its network's way out: the egress gate's proxy inside its namespace (activities/egress.ts).
    expect(environ).toMatch(/\0HTTPS_PROXY=http:\/\/127\.0\.0\.1:\d+\0/);
    // The Go runtime's settings (engine.go_memory_limit_mib): no collection below the limit.
    expect(environ).toContain('\0GOGC=off\0');
    expect(environ).toContain('\0GOMEMLIMIT=1024MiB\0');
    expect(environ).toContain('HOME=/home');
    // Sandboxed, the engine speaks to its providers without TLS (their sockets are private).
    expect(environ).toContain('\0TF_DISABLE_PLUGIN_TLS=1\0');
  });

  it("a provider's plugin socket is in the run's private /tmp: the machine's /tmp never sees it", async () => {
    // While hashicorp/local runs (its provider starts before the resource that waits on the
    // probe), the probe finds the socket in its /tmp, records it in the checkout and waits until
    // the test has looked for the same path on the machine.
    const { engine, root } = run({
      'main.tf': `${LOCAL_PROVIDER}resource "terraform_data" "probe" {
  provisioner "local-exec" {
    command = "for i in $(seq 1 400); do s=$(find /tmp -maxdepth 2 -type s | head -n 1); case $s in /*) break;; esac; sleep 0.05; done; echo $s > sockets.tmp; mv sockets.tmp sockets.txt; for i in $(seq 1 400); do [ -e looked ] && break; sleep 0.05; done"
  }
}
resource "local_file" "after" {
  filename   = "\${path.module}/after.txt"
  content    = "x"
  depends_on = [terraform_data.probe]
}
`,
    });
    await engine.init();
    const applied = engine.apply();
    const socket = await vi.waitFor(
      () => {
        const text = readFileSync(join(root, 'sockets.txt'), 'utf8').trim();
        if (!text) throw new Error('no socket yet');
        return text;
      },
      { timeout: 30_000, interval: 50 },
    );
    // The provider is running (the probe holds the apply): its socket, seen from the machine.
    const seenFromMachine = existsSync(socket);
    writeFileSync(join(root, 'looked'), '');
    await applied;
    expect(socket).toMatch(/^\/tmp\/plugin/);
    expect(seenFromMachine).toBe(false);

    // Unsandboxed (engine.sandbox: off), the socket would be in the machine's /tmp: TLS stays on.
    const off = run(
      { 'main.tf': 'output "environ" { value = filebase64("/proc/self/environ") }\n' },
      { sandbox: new EngineSandbox({ mode: 'off', readOnly: [] }) },
    );
    await off.engine.plan({ out: join(off.runDir, 'p.tfplan') });
    await off.engine.showJson(join(off.runDir, 'p.tfplan'), join(off.runDir, 'p.json'));
    const json = JSON.parse(readFileSync(join(off.runDir, 'p.json'), 'utf8')) as PlanJson;
    const environ = Buffer.from(String(json.planned_values?.outputs?.environ?.value), 'base64').toString();
    expect(environ).toContain('\0TF_IN_AUTOMATION=1\0');
    expect(environ).not.toContain('TF_DISABLE_PLUGIN_TLS');
  });

  it("no process of the machine reads the run's secrets on a command line (`/proc/<pid>/cmdline`)", async () => {
    // While the engine runs (a local-exec waits for the test), every process's command line is
    // read, as any user of the machine may: the run's secret is in none, bubblewrap's is there.
    const { engine, root } = run({
      'main.tf': `resource "terraform_data" "wait" {
  provisioner "local-exec" {
    command = "touch running; for i in $(seq 1 400); do [ -e looked ] && break; sleep 0.05; done"
  }
}
`,
    });
    await engine.init();
    const applied = engine.apply();
    await vi.waitFor(
      () => {
        if (!existsSync(join(root, 'running'))) throw new Error('not running yet');
      },
      { timeout: 30_000, interval: 50 },
    );
    const lines: string[] = [];
    for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      try {
        lines.push(
          readFileSync(join('/proc', pid, 'cmdline'), 'utf8')
            .split('\0')
            .join(' '),
        );
      } catch {
        // gone meanwhile
      }
    }
    writeFileSync(join(root, 'looked'), '');
    await applied;
    const engines = lines.filter((l) => /\bbwrap --args 3 -- .*\S*terraform apply/.test(l));
    expect(engines.length, lines.filter((l) => l.includes('terraform')).join('\n')).toBeGreaterThan(0);
    expect(lines.filter((l) => l.includes('run-secret') || l.includes('--setenv'))).toEqual([]);
  });

  it('file() and fileset() of another checkout, the data directory, the home and the tool cache find nothing', async () => {
    for (const [what, path] of [
      ["another session's checkout", join(otherCheckout, 'main.tf')],
      ['the data directory', join(dataDir, 'run', 'secrets.env')],
    ] as const) {
      const { engine, runDir } = run({
        'main.tf': `output "stolen" { value = file(${JSON.stringify(path)}) }\n`,
      });
      const err = await engine.plan({ out: join(runDir, 'p.tfplan') }).catch((e: unknown) => e);
      expect(err, what).toBeInstanceOf(EngineError);
      expect((err as EngineError).output, what).toMatch(/no file exists|Invalid function argument/i);
      expect((err as EngineError).output, what).not.toContain(WORKER_SECRET);
    }
    const out = await outputs({
      'main.tf': [
        `output "others" { value = fileset(${JSON.stringify(join(base, 'work'))}, "*/repo/*") }`,
        `output "data" { value = fileset(${JSON.stringify(dataDir)}, "**") }`,
        `output "tools" { value = fileset(${JSON.stringify(toolsDir())}, "*/*") }`,
        'output "home" { value = fileset(pathexpand("~"), "**") }',
        'output "own" { value = fileset(path.module, "*.tf") }',
        '',
      ].join('\n'),
    });
    // Its own checkout only: the other session's is not there.
    const others = out.others as string[];
    expect(others.length).toBeGreaterThan(0);
    expect(
      others.filter((p) => !p.includes(`${basename(ownRun)}/repo/`)),
      others.join(', '),
    ).toEqual([]);
    expect(out.data).toEqual([]);
    // Of the tool cache, only the engine binaries and the egress relay: no Temporal, moto or Gitea build.
    const tools = out.tools as string[];
    expect(tools).toEqual(expect.arrayContaining([expect.stringMatching(/terraform-[^/]+\/terraform$/)]));
    expect(
      tools.filter(
        (p) => !/(terraform|tofu)-[^/]+\/(terraform|tofu)$|egress-relay-[^/]+\/kumoss-egress-relay$/.test(p),
      ),
    ).toEqual([]);
    expect(out.home).toEqual([]);
    expect(out.own).toEqual(['main.tf']);
  });

  it('local-exec and hashicorp/local write inside the checkout, and cannot write outside it', async () => {
    const outside = join(dataDir, 'pwned-by-local-exec');
    const viaProvider = join(dataDir, 'pwned-by-local-file');
    const writes = (target: string, fileTarget: string) => ({
      'main.tf': `${LOCAL_PROVIDER}resource "terraform_data" "probe" {
  provisioner "local-exec" {
    command = "echo written > ${target}"
  }
}
resource "local_file" "probe" {
  filename = "${fileTarget}"
  content  = "written"
}
`,
    });
    const inside = run(writes('inside.txt', '${path.module}/inside-file.txt'));
    await inside.engine.init();
    await inside.engine.apply();
    expect(readFileSync(join(inside.root, 'inside.txt'), 'utf8')).toBe('written\n');
    expect(readFileSync(join(inside.root, 'inside-file.txt'), 'utf8')).toBe('written');

    // Outside the checkout, a path the sandbox does not have: the directory does not exist there
    // (or, once local_file created it in the sandbox's private /tmp, the write lands there and is
    // gone with the process). Whichever resource runs first, nothing reaches the worker's disk.
    const escape = run(writes(outside, viaProvider));
    await escape.engine.init();
    await escape.engine.apply().catch((e: unknown) => e);
    expect(existsSync(outside)).toBe(false);
    expect(existsSync(viaProvider)).toBe(false);

    // A path the sandbox has read-only (the engine's CLI config): the write fails, the file is unchanged.
    const before = readFileSync(cliConfigPath(), 'utf8');
    const readOnly = run({
      'main.tf': `resource "terraform_data" "probe" {
  provisioner "local-exec" {
    command = "echo pwned >> ${cliConfigPath()}"
  }
}
`,
    });
    await readOnly.engine.init();
    const err = await readOnly.engine.apply().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect((err as EngineError).output).toMatch(/Read-only file system/);
    expect(readFileSync(cliConfigPath(), 'utf8')).toBe(before);
  });

  it('where bubblewrap cannot run, no engine process starts and the failure says why', async () => {
    const broken = new EngineSandbox({
      mode: 'bubblewrap',
      bwrap: join(base, 'no-bwrap-here'),
      readOnly: [],
    });
    expect(broken.describe()).toBe('unavailable');
    const { engine } = run({ 'main.tf': 'output "x" { value = 1 }\n' }, { sandbox: broken });
    const err = await engine.init().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ permanent: true });
    expect((err as Error).message).toMatch(
      /engine sandbox cannot run on this worker.*bubblewrap.*engine\.sandbox: off/s,
    );
    expect(engine.calls).toEqual([]);
  });

  it('formats several files in one sandboxed fmt, falls back per file when one does not parse, leaves nothing behind', async () => {
    const { engine, runDir } = run({ 'main.tf': '' });
    const texts = [
      { text: 'resource "x" "a" {\n  n=1\n    long_name = 2\n}\n' },
      { text: 'a=1\nbbb = 2\n', tfvars: true },
      { text: 'locals {\n  ok = true\n}\n' },
    ];
    const canonical = await Promise.all(texts.map((t) => engine.fmt(t.text)));
    expect(await engine.fmtMany(texts)).toEqual(canonical);
    expect(canonical[0]).toContain('  n         = 1');
    // A text that does not parse: fmt of the directory refuses, each text goes on its own.
    expect(await engine.fmtMany([...texts, { text: 'resource "x" {\n' }])).toEqual([...canonical, undefined]);
    const left = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
        d.isDirectory() ? [d.name, ...left(join(dir, d.name)).map((n) => `${d.name}/${n}`)] : [d.name],
      );
    expect(left(runDir).filter((n) => n.includes('kumoss-fmt'))).toEqual([]);
  });
});
