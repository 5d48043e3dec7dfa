import { describe, expect, it } from 'vitest';
import { driftedAddresses, parsePlanJson } from '../../shared/drift';

const rc = (address: string, actions: string[], mode = 'managed') => ({
  address,
  mode,
  type: address.split('.')[0] ?? '',
  name: address.split('.')[1] ?? '',
  change: { actions, before: {}, after: {} },
});

describe('driftedAddresses', () => {
  it('lists resources changed outside the engine, sorted, without no-op or data sources', () => {
    const plan = parsePlanJson({
      format_version: '1.2',
      resource_drift: [
        rc('rest_object.sg_web_demo', ['update']),
        rc('local_file.motd', ['delete']),
        rc('rest_object.same', ['no-op']),
        rc('data.http.x', ['update'], 'data'),
      ],
      resource_changes: [rc('local_file.motd', ['create'])],
    });
    expect(driftedAddresses(plan)).toEqual(['local_file.motd', 'rest_object.sg_web_demo']);
  });

  it('reports nothing for a plan without resource_drift', () => {
    expect(driftedAddresses(parsePlanJson({ format_version: '1.2' }))).toEqual([]);
  });

  it('rejects input that is not a plan representation', () => {
    expect(() => parsePlanJson({ resource_drift: 'nope' })).toThrow();
  });
});
