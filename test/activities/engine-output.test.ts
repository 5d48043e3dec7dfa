import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EngineClient, EngineError, isPermanentEngineFailure, needsInit } from '../../activities/engine';
import { engineDeps } from '../support/stack';

describe('engine output classification', () => {
  it('asks for init when a provider or module is missing', () => {
    expect(
      needsInit('Error: Inconsistent dependency lock file\n  provider registry.terraform.io/hashicorp/time'),
    ).toBe(true);
    expect(needsInit('Error: Module not installed')).toBe(true);
    expect(needsInit('Error: Missing required provider\nPlease run "terraform init".')).toBe(true);
    expect(needsInit('Error: Invalid reference')).toBe(false);
  });

  it('treats configuration errors as permanent and others as transient', () => {
    expect(isPermanentEngineFailure('Error: Unsupported argument\n  on main.tf line 3')).toBe(true);
    expect(isPermanentEngineFailure('Error: Argument or block definition required')).toBe(true);
    expect(isPermanentEngineFailure('Error: error reading object: connection refused')).toBe(false);
  });
});

describe("engine failures classified by the engine's own -json diagnostics (real terraform)", () => {
  const root = (files: Record<string, string>) => {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-engine-'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    return new EngineClient({ ...engineDeps(), workdir: dir, scopeId: 'engine-test' });
  };
  const versions = `terraform {
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = "1.4.0"
    }
  }
}
`;

  it('an engine that is not installed fails at once, permanent, saying how to build it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-engine-'));
    const missing = join(dir, 'no-such-tofu');
    const engine = new EngineClient({
      ...engineDeps(),
      kind: 'tofu',
      binary: missing,
      workdir: dir,
      scopeId: 'e',
    });
    const err = await engine.validate().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ permanent: true });
    expect((err as Error).message).toBe(
      `tofu is not installed here (${missing}); \`npm run setup\` builds it`,
    );
  });

  it('a configuration error found by validate is permanent, named with its file and line', async () => {
    const engine = root({
      'main.tf': `${versions}
resource "local_file" "motd" {
  filename = "/tmp/kumoss-never-written"
  content  = var.undeclared
}
`,
    });
    const err = await engine.validate().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ permanent: true });
    expect((err as Error).message).toBe(
      'terraform validate failed: Error: Reference to undeclared input variable (main.tf line 12)',
    );
  });

  it('a plan that fails on a configuration that validates is transient (retried)', async () => {
    const engine = root({
      'main.tf': `${versions}
data "local_file" "missing" {
  filename = "/nonexistent/kumoss/input.txt"
}
`,
    });
    const err = await engine
      .plan({ out: join(tmpdir(), `kumoss-${Date.now()}.tfplan`) })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ permanent: false });
    expect((err as Error).message).toMatch(/^terraform plan failed: Error: /);
  });
});

describe('validate beside plan (real terraform)', () => {
  const versions = `terraform {
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = "1.4.0"
    }
  }
}
`;
  const root = (files: Record<string, string>) => {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-engine-'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const calls: { verb: string; start: number; end: number }[] = [];
    const engine = new EngineClient({
      ...engineDeps(),
      workdir: dir,
      scopeId: 'engine-test',
      onCall: (c) => {
        const end = performance.now();
        calls.push({ verb: c.args[0] ?? '', start: end - c.durationMs, end });
      },
    });
    return { dir, engine, calls };
  };

  it('runs both processes at once and answers with the plan', async () => {
    const { dir, engine, calls } = root({
      'main.tf': `${versions}
resource "local_file" "motd" {
  filename = "${join(tmpdir(), 'kumoss-never-applied')}"
  content  = "hello"
}
`,
    });
    const out = join(dir, 'round.tfplan');
    const plan = await engine.validateAndPlan({ out });
    expect(plan).toMatchObject({ planFile: out, hasChanges: true, reinitialized: false });
    expect(plan.output).toContain('local_file.motd will be created');
    expect(JSON.parse(plan.validateOutput)).toMatchObject({ valid: true });
    expect(calls.map((c) => c.verb)).toEqual(['init', expect.any(String), expect.any(String)]);
    const validate = calls.find((c) => c.verb === 'validate');
    const planned = calls.find((c) => c.verb === 'plan');
    // Each started before the other ended.
    expect(validate && planned && validate.start < planned.end && planned.start < validate.end).toBe(true);
  });

  it("fails with validate's diagnostic, permanent, when the configuration does not validate", async () => {
    const { dir, engine } = root({
      'main.tf': `${versions}
resource "local_file" "motd" {
  filename = "/tmp/kumoss-never-written"
  content  = var.undeclared
}
`,
    });
    const err = await engine.validateAndPlan({ out: join(dir, 'round.tfplan') }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ permanent: true });
    expect((err as Error).message).toBe(
      'terraform validate failed: Error: Reference to undeclared input variable (main.tf line 12)',
    );
  });

  it('runs init once more, alone, when a module appears after the first init, then both again', async () => {
    const { dir, engine, calls } = root({ 'main.tf': versions });
    await engine.ensureInit();
    mkdirSync(join(dir, 'modules', 'm'), { recursive: true });
    writeFileSync(join(dir, 'modules', 'm', 'main.tf'), 'output "x" {\n  value = 1\n}\n');
    writeFileSync(join(dir, 'calls.tf'), 'module "m" {\n  source = "./modules/m"\n}\n');
    const plan = await engine.validateAndPlan({ out: join(dir, 'round.tfplan') });
    expect(plan.reinitialized).toBe(true);
    const verbs = calls.map((c) => c.verb);
    expect(verbs.filter((v) => v === 'init')).toHaveLength(2);
    const reinit = calls.filter((c) => c.verb === 'init')[1];
    // No other engine process of the directory ran while init did (durations are whole
    // milliseconds: a process started in the millisecond the one before it ended may seem to touch it).
    const slack = 3;
    expect(
      calls.filter((c) => c !== reinit && c.start < reinit!.end - slack && reinit!.start + slack < c.end),
    ).toEqual([]);
    expect(verbs.slice(-2).sort()).toEqual(['plan', 'validate']);
  });
});

describe("a cycle's plan validates what it plans, with no validate process beside it (real terraform)", () => {
  const versions = `terraform {
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = "1.4.0"
    }
  }
}
`;
  const motd = `resource "local_file" "motd" {
  filename = "${join(tmpdir(), 'kumoss-never-applied')}"
  content  = "hello"
}
`;
  const root = (files: Record<string, string>) => {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-engine-'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const verbs: string[] = [];
    const engine = new EngineClient({
      ...engineDeps(),
      workdir: dir,
      scopeId: 'engine-test',
      onCall: (c) => verbs.push(c.args[0] ?? ''),
    });
    return { dir, engine, verbs };
  };

  it('a configuration that plans runs init and plan only', async () => {
    const { dir, engine, verbs } = root({ 'main.tf': `${versions}\n${motd}` });
    const out = join(dir, 'cycle.tfplan');
    const plan = await engine.planValidated({ out, targets: ['local_file.motd'] });
    expect(plan).toMatchObject({ planFile: out, hasChanges: true, reinitialized: false });
    expect(plan.output).toContain('local_file.motd will be created');
    expect(verbs).toEqual(['init', 'plan']);
  });

  it("an error outside the plan's targets still fails it, permanent, with validate's diagnostic", async () => {
    const { dir, engine, verbs } = root({
      'main.tf': `${versions}\n${motd}`,
      'other.tf': `resource "local_file" "other" {
  filename = "/tmp/kumoss-never-written"
  content  = var.undeclared
}
`,
    });
    const err = await engine
      .planValidated({ out: join(dir, 'cycle.tfplan'), targets: ['local_file.motd'] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toMatchObject({ permanent: true });
    expect((err as Error).message).toBe(
      'terraform validate failed: Error: Reference to undeclared input variable (other.tf line 3)',
    );
    expect(verbs).toEqual(['init', 'plan', 'validate']);
  });

  it('a plan that fails on a configuration that validates stays transient', async () => {
    const { dir, engine, verbs } = root({
      'main.tf': `${versions}
data "local_file" "missing" {
  filename = "/nonexistent/kumoss/input.txt"
}
`,
    });
    const err = await engine.planValidated({ out: join(dir, 'cycle.tfplan') }).catch((e: unknown) => e);
    expect(err).toMatchObject({ permanent: false });
    expect((err as Error).message).toMatch(/^terraform plan failed: Error: /);
    expect(verbs).toEqual(['init', 'plan', 'validate']);
  });
});
