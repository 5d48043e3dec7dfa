// Synthetic `show -json` plans shaped like the engines' output: planned_values, resource_drift,
// resource_changes, prior_state and configuration, with 1% of the resources drifted.
import { createWriteStream } from 'node:fs';

function values(i: number, drifted: boolean) {
  return {
    id: `obj-${i}`,
    name: `object-${i}`,
    path: '/api/objects',
    data: JSON.stringify({
      id: `obj-${i}`,
      replicas: drifted ? 5 : 2,
      tier: 'web',
      ports: [443],
      owner: 'platform-team',
    }),
    tags: { env: 'prod', team: 'platform', cost_center: `cc-${i % 17}` },
  };
}

export async function writeSyntheticPlan(
  path: string,
  resources: number,
  driftShare = 0.01,
): Promise<number> {
  const out = createWriteStream(path);
  const write = (s: string) =>
    new Promise<void>((res) => (out.write(s) ? res() : out.once('drain', () => res())));
  const every = Math.max(1, Math.round(1 / driftShare));
  const isDrifted = (i: number) => i % every === 0;
  const rc = (i: number, actions: string[], before: unknown, after: unknown) =>
    JSON.stringify({
      address: `rest_object.r${i}`,
      mode: 'managed',
      type: 'rest_object',
      name: `r${i}`,
      provider_name: 'registry.terraform.io/kumoss/rest',
      change: { actions, before, after, after_unknown: {}, before_sensitive: {}, after_sensitive: {} },
    });
  await write(
    '{"format_version":"1.2","terraform_version":"1.5.7","planned_values":{"root_module":{"resources":[',
  );
  for (let i = 0; i < resources; i++) {
    await write(
      `${i ? ',' : ''}${JSON.stringify({ address: `rest_object.r${i}`, mode: 'managed', type: 'rest_object', name: `r${i}`, values: values(i, false) })}`,
    );
  }
  await write(']}},"resource_drift":[');
  let first = true;
  for (let i = 0; i < resources; i++) {
    if (!isDrifted(i)) continue;
    await write(`${first ? '' : ','}${rc(i, ['update'], values(i, false), values(i, true))}`);
    first = false;
  }
  await write('],"resource_changes":[');
  for (let i = 0; i < resources; i++) {
    const d = isDrifted(i);
    await write(`${i ? ',' : ''}${rc(i, [d ? 'update' : 'no-op'], values(i, d), values(i, false))}`);
  }
  await write('],"prior_state":{"format_version":"1.0","values":{"root_module":{"resources":[');
  for (let i = 0; i < resources; i++) {
    await write(
      `${i ? ',' : ''}${JSON.stringify({ address: `rest_object.r${i}`, mode: 'managed', type: 'rest_object', name: `r${i}`, values: values(i, isDrifted(i)) })}`,
    );
  }
  await write(']}}},"configuration":{"provider_config":{"rest":{"name":"rest"}},"root_module":{}}}');
  await new Promise<void>((res) => out.end(() => res()));
  return Math.floor(resources / every) + (resources % every ? 1 : 0);
}
