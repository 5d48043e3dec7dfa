// The first `npm start` builds OPA in the background once the system is up: a generate round's
// compliance audit in those minutes waits for it and says so, then evaluates; one that nothing is
// building fails at once. The real OPA, moved into a tool cache of the test's own.
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { evaluatePolicies } from '../../activities/generate-round';
import { backgroundBuildFiles, toolPath } from '../../shared/infra/tools.mjs';

describe('a compliance audit and OPA still building in the background', () => {
  const base = mkdtempSync(join(tmpdir(), 'kumoss-opa-wait-'));
  const previous = process.env.KUMOSS_CACHE_DIR;
  // The machine's built OPA, read before the tool cache moves to the test's own.
  const builtOpa = toolPath('opa');
  const policies = join(base, 'policies');
  const plan = join(base, 'plan.json');
  let build: ChildProcess | undefined;

  beforeAll(() => {
    process.env.KUMOSS_CACHE_DIR = join(base, 'cache');
    mkdirSync(policies, { recursive: true });
    writeFileSync(
      join(policies, 'compliance.rego'),
      `package kumoss.compliance

deny contains msg if {
  some rc in input.resource_changes
  rc.type == "aws_s3_bucket"
  msg := sprintf("%s: buckets are not allowed here", [rc.address])
}
`,
    );
    writeFileSync(
      plan,
      JSON.stringify({ resource_changes: [{ address: 'aws_s3_bucket.logs', type: 'aws_s3_bucket' }] }),
    );
  });
  afterAll(() => {
    build?.kill('SIGKILL');
    if (previous === undefined) delete process.env.KUMOSS_CACHE_DIR;
    else process.env.KUMOSS_CACHE_DIR = previous;
  });

  it('waits for a build under way, says so, and evaluates once OPA is in place', async () => {
    // A build under way, as setup records one: its process's pid.
    build = spawn('sleep', ['600'], { stdio: 'ignore' });
    mkdirSync(dirname(backgroundBuildFiles('opa').pid), { recursive: true });
    writeFileSync(backgroundBuildFiles('opa').pid, String(build.pid));
    const said: string[] = [];
    const audit = evaluatePolicies(policies, plan, { heartbeat: (d) => said.push(d) });

    await vi.waitFor(() => expect(said.join('\n')).toMatch(/waiting for opa to finish building/), {
      timeout: 30_000,
      interval: 200,
    });
    // The build ends: OPA lands where setup installs it.
    mkdirSync(dirname(toolPath('opa')), { recursive: true });
    copyFileSync(builtOpa, toolPath('opa'));
    build.kill('SIGKILL');

    expect(await audit).toEqual({ deny: ['aws_s3_bucket.logs: buckets are not allowed here'], warn: [] });
  });

  it('fails at once when OPA is not built and nothing is building it', async () => {
    process.env.KUMOSS_CACHE_DIR = join(base, 'empty-cache');
    const said: string[] = [];
    await expect(evaluatePolicies(policies, plan, { heartbeat: (d) => said.push(d) })).rejects.toThrow(
      /opa is not built and nothing is building it/,
    );
    expect(said).toEqual([]);
  });
});
