import { mkdtempSync, writeFileSync } from 'node:fs';
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
