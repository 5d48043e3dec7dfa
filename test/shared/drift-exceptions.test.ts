import { describe, expect, it } from 'vitest';
import type { DriftOperation } from '../../shared/drift';
import { activeRules, applyExceptions, exceptionRuleSchema, globMatch } from '../../shared/drift-exceptions';

const op = (address: string, paths: string[], drift_actions = ['update']): DriftOperation => ({
  address,
  type: address.split('.')[0] ?? '',
  name: address.split('.')[1] ?? '',
  drift_actions,
  planned_actions: ['update'],
  changes: paths.map((path) => ({ path, declared: 1, actual: 2 })),
  attributes: {},
});

const rule = (r: Record<string, unknown>) => exceptionRuleSchema.parse({ reason: 'because', ...r });

describe('drift-exception rules', () => {
  it('matches globs on whole values', () => {
    expect(globMatch('aws_*', 'aws_instance')).toBe(true);
    expect(globMatch('aws_*', 'google_x')).toBe(false);
    expect(globMatch('tags.aws:*', 'tags.aws:createdBy')).toBe(true);
    expect(globMatch('a.b', 'a.bc')).toBe(false);
  });

  it('drops an operation whose every change is covered, naming the rule', () => {
    const r = applyExceptions(
      [op('aws_asg.web', ['desired_capacity'])],
      [rule({ id: 'asg', resource_type: 'aws_asg', attribute: 'desired_capacity' })],
    );
    expect(r.survivors).toEqual([]);
    expect(r.whitelisted).toEqual([
      { address: 'aws_asg.web', attributes: ['desired_capacity'], rule_id: 'asg', reason: 'because' },
    ]);
  });

  it('keeps the uncovered changes of a partly covered operation', () => {
    const r = applyExceptions(
      [op('rest_object.app', ['data.replicas', 'data.log_level'])],
      [rule({ id: 'rep', attribute: 'data.replicas' })],
    );
    expect(r.survivors.map((s) => s.changes.map((c) => c.path))).toEqual([['data.log_level']]);
    expect(r.whitelisted).toHaveLength(1);
  });

  it('covers nested paths under an attribute and whole resources with the default pattern', () => {
    const r = applyExceptions(
      [op('k.one', ['metadata.annotations.x']), op('k.gone', [''], ['delete'])],
      [rule({ id: 'ann', attribute: 'metadata.annotations' }), rule({ id: 'all', address: 'k.gone' })],
    );
    expect(r.survivors).toEqual([]);
    expect(r.whitelisted.map((w) => w.rule_id)).toEqual(['ann', 'all']);
  });

  it('a rule on a tag covers its tags_all mirror, and the rest of the map is remediated without that tag', () => {
    const instance: DriftOperation = {
      ...op('aws_instance.worker[0]', []),
      changes: [
        { path: 'tags.Patch', declared: undefined, actual: 'tuesday' },
        { path: 'tags.Team', declared: 'web', actual: 'ops' },
        { path: 'tags_all.Patch', declared: undefined, actual: 'tuesday', mirror_of: 'tags' },
      ],
      attributes: {
        tags: { declared: { Team: 'web' }, actual: { Team: 'ops', Patch: 'tuesday' } },
        tags_all: { declared: { Team: 'web' }, actual: { Team: 'ops', Patch: 'tuesday' } },
      },
    };
    const r = applyExceptions([instance], [rule({ id: 'patch', attribute: 'tags.Patch' })]);
    expect(r.whitelisted).toEqual([
      {
        address: 'aws_instance.worker[0]',
        attributes: ['tags.Patch', 'tags_all.Patch'],
        rule_id: 'patch',
        reason: 'because',
      },
    ]);
    expect(r.survivors[0]?.changes.map((c) => c.path)).toEqual(['tags.Team']);
    expect(r.survivors[0]?.attributes).toEqual({
      tags: { declared: { Team: 'web' }, actual: { Team: 'ops' } },
    });
    // And a rule written on the mirror covers the source.
    const m = applyExceptions(
      [op('aws_vpc.a', ['tags.aws:cf'])],
      [rule({ id: 'sys', attribute: 'tags_all.aws:*' })],
    );
    expect(m.survivors).toEqual([]);
  });

  it('does not let an attribute rule cover a deletion', () => {
    const r = applyExceptions([op('k.gone', [''], ['delete'])], [rule({ id: 'attr', attribute: 'tags' })]);
    expect(r.survivors).toHaveLength(1);
  });

  it('drops expired rules, and rejects malformed ones', () => {
    const rules = [
      rule({ id: 'old', expires: '2020-01-01' }),
      rule({ id: 'new', expires: '2999-01-01' }),
      rule({ id: 'forever' }),
    ];
    expect(activeRules(rules, '2026-11-29').map((r) => r.id)).toEqual(['new', 'forever']);
    expect(() => exceptionRuleSchema.parse({ id: 'x', reason: 'r', expires: 'tomorrow' })).toThrow(
      /YYYY-MM-DD/,
    );
    expect(() => exceptionRuleSchema.parse({ id: 'x' })).toThrow();
    expect(() => exceptionRuleSchema.parse({ id: 'x', reason: 'r', colour: 'red' })).toThrow();
  });
});
