// Writes the published JSON Schemas (schemas/*.schema.json) from the zod contracts.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../shared/infra/config';
import { driftReportJsonSchema } from '../shared/drift-report';

export const SCHEMAS: Record<string, () => unknown> = {
  'drift-report.schema.json': driftReportJsonSchema,
};

export function renderSchema(name: string): string {
  const make = SCHEMAS[name];
  if (!make) throw new Error(`unknown schema ${name}`);
  return `${JSON.stringify(make(), null, 2)}\n`;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  for (const name of Object.keys(SCHEMAS)) {
    writeFileSync(join(projectRoot, 'schemas', name), renderSchema(name));
    console.log(`wrote schemas/${name}`);
  }
}
