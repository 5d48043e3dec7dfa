import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../shared/infra/config';

function configFile(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'kumoss-cfg-')), 'kumoss.yaml');
  writeFileSync(file, text);
  return file;
}

describe('loadConfig', () => {
  it('ships the seed defaults', () => {
    const c = loadConfig({});
    expect(c.orchestration.max_drift_reports).toBe(3);
    expect(c.orchestration.drift_group_operations).toBe(8);
    expect(c.services.authz.enabled).toBe(false);
    expect(c.engine.binary).toBe('terraform');
    // Engine slots: the machine's cores; stack detections at once: twice the slots.
    expect(c.engine.max_concurrent).toBe(0);
    expect(c.engine.max_concurrent_detections).toBe(0);
    expect(c.orchestration.max_repair_cycles).toBe(2);
    expect(c.state).toEqual({
      managed: true,
      bucket: '',
      prefix: 'state',
      lock_ttl_seconds: 15,
      lock_wait_seconds: 600,
    });
    // A killed worker's activity is retried 10 s later (every activity heartbeats every 2 s).
    expect(c.orchestration.activity_heartbeat_seconds).toBe(10);
  });

  it('lets the environment override a key, parsing numbers and booleans', () => {
    const c = loadConfig({
      KUMOSS_MAX_DRIFT_REPORTS: '5',
      KUMOSS_AUTHZ_ENABLED: 'true',
      TEMPORAL_ADDRESS: 'temporal.example:7233',
      KUMOSS_ENGINE: 'tofu',
      KUMOSS_MAX_REPAIR_CYCLES: '0',
      KUMOSS_MANAGED_STATE: 'false',
      KUMOSS_ENGINE_MAX_CONCURRENT_DETECTIONS: '12',
    });
    expect(c.engine.max_concurrent_detections).toBe(12);
    expect(c.orchestration.max_repair_cycles).toBe(0);
    expect(c.state.managed).toBe(false);
    expect(c.orchestration.max_drift_reports).toBe(5);
    expect(c.services.authz.enabled).toBe(true);
    expect(c.temporal.address).toBe('temporal.example:7233');
    expect(c.engine.binary).toBe('tofu');
  });

  it('fails fast naming every invalid key', () => {
    const file = configFile('orchestration:\n  max_drift_reports: 0\nengine:\n  binary: pulumi\n');
    let err: unknown;
    try {
      loadConfig({ KUMOSS_CONFIG: file });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('orchestration.max_drift_reports');
    expect((err as Error).message).toContain('engine.binary');
  });

  it('says which file it could not read', () => {
    expect(() => loadConfig({ KUMOSS_CONFIG: '/nonexistent/kumoss.yaml' })).toThrow(
      /\/nonexistent\/kumoss.yaml/,
    );
  });

  it('rejects a file that is not a mapping', () => {
    expect(() => loadConfig({ KUMOSS_CONFIG: configFile('- a\n- b\n') })).toThrow(/YAML mapping/);
  });
});
