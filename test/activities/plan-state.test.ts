// A stack detection whose plan changes nothing reads the resources' cloud ids from the state its
// saved plan carries, without `show -json`: the same ids and addresses as `show -json` gives (real
// terraform: counted, keyed and module instances), what the state marks sensitive left out, and a
// file without a state refused.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { strToU8, zipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { EngineClient } from '../../activities/engine';
import { readPlanForDrift, readPlanStateResources } from '../../activities/plan-reader';
import { cloudIdsOfState, type StateResource } from '../../shared/audit-events';
import { engineDeps } from '../support/stack';

const sorted = (ids: Map<string, string[]>) => [...ids].sort(([a], [b]) => (a < b ? -1 : 1));

describe('the state a saved plan carries (real terraform)', () => {
  it('gives the cloud ids and addresses show -json gives, for a plan that changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kumoss-plan-state-'));
    mkdirSync(join(dir, 'mod'));
    writeFileSync(
      join(dir, 'main.tf'),
      `resource "terraform_data" "one" {
  input = "a"
}
resource "terraform_data" "counted" {
  count = 2
  input = count.index
}
resource "terraform_data" "keyed" {
  for_each = toset(["web", "db \\"main\\""])
  input    = each.key
}
module "m" {
  source = "./mod"
  count  = 2
}
`,
    );
    writeFileSync(join(dir, 'mod', 'main.tf'), 'resource "terraform_data" "inner" {\n  input = "inner"\n}\n');
    const engine = new EngineClient({ ...engineDeps(), workdir: dir, scopeId: 'plan-state' });
    await engine.apply();
    const planFile = join(dir, 'again.tfplan');
    const plan = await engine.plan({ out: planFile });
    expect(plan.hasChanges).toBe(false);

    const fromState = readPlanStateResources(planFile);
    const jsonFile = join(dir, 'again.json');
    await engine.showJson(planFile, jsonFile);
    const fromShow: StateResource[] = [];
    await readPlanForDrift(jsonFile, (r) => fromShow.push(r));

    const addresses = (rs: StateResource[]) => rs.map((r) => r.address).sort();
    expect(addresses(fromState)).toEqual([
      'module.m[0].terraform_data.inner',
      'module.m[1].terraform_data.inner',
      'terraform_data.counted[0]',
      'terraform_data.counted[1]',
      'terraform_data.keyed["db \\"main\\""]',
      'terraform_data.keyed["web"]',
      'terraform_data.one',
    ]);
    expect(addresses(fromState)).toEqual(addresses(fromShow));
    const ids = sorted(cloudIdsOfState(fromState));
    expect(ids).toHaveLength(7);
    expect(ids).toEqual(sorted(cloudIdsOfState(fromShow)));
  });
});

describe('readPlanStateResources', () => {
  const planWith = (files: Record<string, string>) => {
    const file = join(mkdtempSync(join(tmpdir(), 'kumoss-plan-zip-')), 'p.tfplan');
    writeFileSync(file, zipSync(Object.fromEntries(Object.entries(files).map(([k, v]) => [k, strToU8(v)]))));
    return file;
  };

  it('leaves out what the state marks sensitive, deposed objects and data sources', () => {
    const state = {
      version: 4,
      serial: 3,
      lineage: 'l',
      resources: [
        {
          mode: 'managed',
          type: 'aws_iam_role',
          name: 'r',
          instances: [
            {
              attributes: {
                id: 'r',
                arn: 'arn:aws:iam::123456789012:role/r',
                name: 'r',
                secret: 'KUMOSS-SECRET-x',
              },
              sensitive_attributes: [
                [{ type: 'get_attr', value: 'arn' }],
                [
                  { type: 'get_attr', value: 'name' },
                  { type: 'index', value: { value: 0, type: 'number' } },
                ],
              ],
            },
            { deposed: 'abc', attributes: { id: 'old' } },
          ],
        },
        {
          mode: 'data',
          type: 'aws_caller_identity',
          name: 'me',
          instances: [{ attributes: { id: '123456789012' } }],
        },
      ],
    };
    const file = planWith({ tfplan: 'binary', tfstate: JSON.stringify(state), 'tfstate-prev': '{}' });
    // `arn` is sensitive as a whole: out; a path inside `name` leaves `name` in; nothing but the id
    // fields is read.
    expect(readPlanStateResources(file)).toEqual([
      { address: 'aws_iam_role.r', type: 'aws_iam_role', values: { id: 'r', name: 'r' } },
    ]);
  });

  it('refuses a file that carries no state of format version 4', () => {
    expect(() => readPlanStateResources(planWith({ tfplan: 'binary' }))).toThrow(/carries no state snapshot/);
    expect(() => readPlanStateResources(planWith({ tfstate: '{"version":3}' }))).toThrow();
  });
});
