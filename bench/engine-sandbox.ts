// What the engine sandbox (bubblewrap, activities/sandbox.ts) adds to an engine call, measured side
// by side in one run: the same root, the same calls, alternately with and without the sandbox.
// `version` shows the bare cost of entering the sandbox; `plan -out` of a small root with a provider
// shows it on a call a round makes (a round makes 6–10 of them). Sandboxed, the engine speaks to its
// providers without TLS; the plain calls are given the same setting, so the two differ only by
// bubblewrap — and, beside them, a plain plan with TLS (the engine's default unsandboxed).
// The network (engine.network: isolated, activities/egress.ts): the same plan in its own network
// namespace behind the egress gate, and a plan that refreshes 40 objects of a REST API on loopback
// — every request through the relay and the gate — beside the same plan on the worker's network.
// Prints `BENCH_ENGINE_SANDBOX {json}`. BENCH_SANDBOX_CALLS sets the calls per mode (default 15).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EngineClient } from '../activities/engine';
import { EngineSandbox } from '../activities/sandbox';
import { runProcess } from '../activities/process';
import { cliConfigPath, providerMirrorDir, toolPath } from '../shared/infra/tools.mjs';
import { startObjectApi } from '../scripts/embedded/object-api';

const CALLS = Number(process.env.BENCH_SANDBOX_CALLS ?? 15);
const sandbox = new EngineSandbox({
  mode: 'bubblewrap',
  readOnly: [toolPath('terraform'), toolPath('tofu'), cliConfigPath(), providerMirrorDir()],
});
if (!sandbox.check().ok) throw new Error(`bubblewrap cannot run here: ${JSON.stringify(sandbox.check())}`);
const api = await startObjectApi();
const isolated = new EngineSandbox({
  ...sandbox.opts,
  network: { relay: toolPath('egress-relay'), allow: () => [api.url] },
});
const OBJECTS = 40;

const base = mkdtempSync(join(tmpdir(), 'kumoss-bench-sandbox-'));
const root = join(base, 'repo');
mkdirSync(root);
writeFileSync(
  join(root, 'main.tf'),
  `terraform {
  required_providers {
    time = {
      source  = "hashicorp/time"
      version = "0.14.2"
    }
  }
}
resource "time_static" "a" {}
${Array.from({ length: 20 }, (_, i) => `output "o${i}" { value = "${i}" }`).join('\n')}
`,
);
const restRoot = join(base, 'rest');
mkdirSync(restRoot);
writeFileSync(
  join(restRoot, 'main.tf'),
  `terraform {
  required_providers {
    rest = {
      source  = "kumoss/rest"
      version = "0.1.0"
    }
  }
}
provider "rest" {
  uri = "${api.url}"
}
${Array.from({ length: OBJECTS }, (_, i) => `resource "rest_object" "o${i}" {\n  path = "/api/objects"\n  data = jsonencode({ id = "o${i}", n = ${i} })\n}`).join('\n')}
`,
);
type Mode = 'sandbox' | 'plain' | 'plainTls' | 'isolated';
const engine = (mode: Mode, workdir = root) =>
  new EngineClient({
    kind: 'terraform',
    binary: toolPath('terraform'),
    cliConfigFile: cliConfigPath(),
    workdir,
    runDir: base,
    scopeId: 'bench',
    ...(mode === 'sandbox' ? { sandbox } : {}),
    ...(mode === 'isolated' ? { sandbox: isolated } : {}),
    ...(mode === 'plain' ? { env: { TF_DISABLE_PLUGIN_TLS: '1' } } : {}),
  });
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
};

try {
  await engine('sandbox').init();
  const rest = engine('sandbox', restRoot);
  await rest.init();
  await rest.apply();
  const restTimes = { sandbox: [] as number[], isolated: [] as number[] };
  const times = {
    isolated: { version: [] as number[], plan: [] as number[] },
    sandbox: { version: [] as number[], plan: [] as number[] },
    plain: { version: [] as number[], plan: [] as number[] },
    plainTls: { version: [] as number[], plan: [] as number[] },
  };
  for (let i = 0; i < CALLS; i++) {
    for (const mode of ['sandbox', 'isolated'] as const) {
      const e = engine(mode, restRoot);
      e.assumeInitialized();
      const t = Date.now();
      await e.plan({ out: join(base, `rest-${mode}-${i}.tfplan`) });
      restTimes[mode].push(Date.now() - t);
    }
    for (const mode of ['sandbox', 'isolated', 'plain', 'plainTls'] as const) {
      const wrapped =
        mode === 'sandbox' || mode === 'isolated'
          ? (mode === 'sandbox' ? sandbox : isolated).wrap(toolPath('terraform'), ['version'], {
              writable: [base],
              cwd: root,
              env: { HOME: '/home' },
            })
          : { command: toolPath('terraform'), args: ['version'], fd3: undefined };
      let t = Date.now();
      await runProcess(wrapped.command, wrapped.args, {
        cwd: root,
        ...(wrapped.fd3 !== undefined ? { fd3: wrapped.fd3 } : {}),
      });
      times[mode].version.push(Date.now() - t);
      const e = engine(mode);
      t = Date.now();
      await e.plan({ out: join(base, `${mode}-${i}.tfplan`) });
      times[mode].plan.push(Date.now() - t);
    }
  }
  const figures = {
    sandbox_version_ms: median(times.sandbox.version),
    plain_version_ms: median(times.plain.version),
    sandbox_plan_ms: median(times.sandbox.plan),
    plain_plan_ms: median(times.plain.plan),
    sandbox_plan_overhead_ms: median(times.sandbox.plan) - median(times.plain.plan),
    sandbox_plan_ratio: Number((median(times.sandbox.plan) / median(times.plain.plan)).toFixed(3)),
    plain_tls_plan_ms: median(times.plainTls.plan),
    isolated_plan_ms: median(times.isolated.plan),
    isolated_plan_overhead_ms: median(times.isolated.plan) - median(times.sandbox.plan),
    rest_objects: OBJECTS,
    rest_plan_shared_network_ms: median(restTimes.sandbox),
    rest_plan_isolated_ms: median(restTimes.isolated),
    rest_plan_isolated_ratio: Number((median(restTimes.isolated) / median(restTimes.sandbox)).toFixed(3)),
  };
  console.log(
    `engine sandbox, ${CALLS} calls each, medians: terraform version ${figures.sandbox_version_ms} ms sandboxed vs ${figures.plain_version_ms} ms plain; ` +
      `plan -out ${figures.sandbox_plan_ms} ms vs ${figures.plain_plan_ms} ms (+${figures.sandbox_plan_overhead_ms} ms, ×${figures.sandbox_plan_ratio}); ` +
      `plain with TLS to its providers (the engine's default unsandboxed) ${figures.plain_tls_plan_ms} ms; ` +
      `in its own network behind the egress gate ${figures.isolated_plan_ms} ms (+${figures.isolated_plan_overhead_ms} ms); ` +
      `a plan refreshing ${OBJECTS} REST objects: ${figures.rest_plan_isolated_ms} ms isolated vs ${figures.rest_plan_shared_network_ms} ms on the worker's network (×${figures.rest_plan_isolated_ratio})`,
  );
  console.log(`BENCH_ENGINE_SANDBOX ${JSON.stringify(figures)}`);
} finally {
  await api.close();
  rmSync(base, { recursive: true, force: true });
}
