// The first `npm start` builds the providers in the background once the system is up: an engine
// `init` that needs one still building waits for it and says so, then installs it; one that
// nothing is building fails at once. Real terraform, its filesystem mirror in a tool cache of the
// test's own.
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EngineClient, EngineError } from '../../activities/engine';
import {
  backgroundBuildFiles,
  cliConfigPath,
  cliConfigText,
  GO_TOOLS,
  PROVIDER_HOSTS,
  providerMirrorBinary,
  providerMirrorDir,
  toolPath,
} from '../../shared/infra/tools.mjs';

const root = (provider: string, source: string, version: string) => `terraform {
  required_providers {
    ${provider} = {
      source  = "${source}"
      version = "${version}"
    }
  }
}
`;

describe('engine init and a provider still building in the background', () => {
  const base = mkdtempSync(join(tmpdir(), 'kumoss-provider-wait-'));
  const previous = process.env.KUMOSS_CACHE_DIR;
  // The machine's built provider and engine, read before the tool cache moves to the test's own.
  const builtLocal = toolPath('provider-local');
  const terraform = toolPath('terraform');
  let build: ChildProcess | undefined;

  beforeAll(() => {
    process.env.KUMOSS_CACHE_DIR = join(base, 'cache');
    mkdirSync(providerMirrorDir(), { recursive: true });
    writeFileSync(cliConfigPath(), cliConfigText());
  });
  afterAll(() => {
    build?.kill('SIGKILL');
    if (previous === undefined) delete process.env.KUMOSS_CACHE_DIR;
    else process.env.KUMOSS_CACHE_DIR = previous;
  });

  const engineOn = (text: string) => {
    const workdir = join(base, `root-${Math.random().toString(36).slice(2, 8)}`);
    mkdirSync(workdir, { recursive: true });
    writeFileSync(join(workdir, 'main.tf'), text);
    return {
      workdir,
      engine: new EngineClient({
        kind: 'terraform',
        binary: terraform,
        cliConfigFile: cliConfigPath(),
        workdir,
        scopeId: 'provider-wait-test',
      }),
    };
  };

  it('init waits for a provider whose build is under way, says so, and installs it once it is in the mirror', async () => {
    // A build under way, as setup records one: its process's pid.
    build = spawn('sleep', ['600'], { stdio: 'ignore' });
    writeFileSync(backgroundBuildFiles('provider-local').pid, String(build.pid));
    const { engine, workdir } = engineOn(root('local', 'hashicorp/local', '1.4.0'));
    const said: string[] = [];
    const init = engine.init({ heartbeat: (d) => said.push(d) });

    await vi.waitFor(() => expect(said.join('\n')).toMatch(/waiting for provider-local to finish building/), {
      timeout: 60_000,
      interval: 200,
    });
    // The build ends: its provider lands in the mirror, as setup's background half puts it there.
    const tool = GO_TOOLS.find((t) => t.name === 'provider-local');
    if (!tool) throw new Error('provider-local is not a tool');
    for (const host of PROVIDER_HOSTS) {
      const dest = providerMirrorBinary(tool, host);
      mkdirSync(dirname(dest), { recursive: true });
      copyFileSync(builtLocal, dest);
      writeFileSync(`${dest}.from`, toolPath('provider-local'));
    }
    build.kill('SIGKILL');

    expect(await init).toMatch(/Installed hashicorp\/local v1\.4\.0/);
    expect(
      existsSync(
        join(workdir, '.terraform', 'providers', 'registry.terraform.io', 'hashicorp', 'local', '1.4.0'),
      ),
    ).toBe(true);
  });

  it('init fails at once, naming the provider, when nothing is building it', async () => {
    const { engine } = engineOn(root('time', 'hashicorp/time', '0.14.2'));
    const said: string[] = [];
    const err = await engine.init({ heartbeat: (d) => said.push(d) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect((err as EngineError).output).toMatch(/hashicorp\/time was not found/);
    expect(said.join('\n')).not.toMatch(/waiting for/);
  });
});
