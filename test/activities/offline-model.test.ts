import { describe, expect, it } from 'vitest';
import { offlineFilter, offlineTargets } from '../../activities/model/offline';
import type { ConfigResource } from '../../activities/model/port';

const res = (address: string, source = ''): ConfigResource => ({
  address,
  type: address.split('.')[0] ?? '',
  name: address.split('.')[1] ?? '',
  file: 'main.tf',
  source,
});

describe('offline model', () => {
  it('accepts requests to resolve or scope drift', () => {
    expect(
      offlineFilter(
        'Resolve the drift on security group sg-web-demo; someone opened port 8080 in the console.',
      ).accepted,
    ).toBe(true);
    expect(offlineFilter('Reconcile everything in envs/dev.').accepted).toBe(true);
  });

  it('declines requests to create or modify infrastructure as an operation mismatch', () => {
    const d = offlineFilter('Create a new S3 bucket for the logs.');
    expect(d.accepted).toBe(false);
    expect(d.reason).toMatch(/^Operation mismatch/);
    expect(offlineFilter('Increase the instance size to m5.large').accepted).toBe(false);
  });

  it('picks targets by address, name or identifying value, never by substring', () => {
    const resources = [
      res('rest_object.sg_web_demo', 'data = jsonencode({ "id": "sg-web-demo" })'),
      res('rest_object.app_config'),
      res('rest_object.sg_web'),
    ];
    expect(offlineTargets('fix drift on sg-web-demo', resources).targets).toEqual([
      'rest_object.sg_web_demo',
    ]);
    expect(offlineTargets('drift on rest_object.app_config please', resources).targets).toEqual([
      'rest_object.app_config',
    ]);
    expect(offlineTargets('drift somewhere', resources).targets).toEqual([]);
  });
});
