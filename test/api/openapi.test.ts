import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openApiDocument } from '../../api/openapi';
import { projectRoot } from '../../shared/infra/config';
import { renderWebTypes } from '../../scripts/web-types';

describe('OpenAPI document', () => {
  it('describes the routes and takes its request schemas from the zod contracts', () => {
    const doc = openApiDocument() as {
      openapi: string;
      paths: Record<string, unknown>;
      components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
    };
    expect(doc.openapi).toBe('3.0.3');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/api/v1/drift/partial',
        '/api/v1/drift/full',
        '/api/v1/sessions/{id}',
        '/api/v1/events/subscribe/{id}',
        '/api/v1/stacks',
        '/api/v1/stacks/{id}/pause',
        '/api/v1/drift-items',
      ]),
    );
    // A round's body is a first request or a follow-up, as the route validates it.
    const round = (
      doc.paths['/api/v1/drift/partial'] as {
        post: {
          requestBody: {
            content: {
              'application/json': { schema: { anyOf: { properties: object; required: string[] }[] } };
            };
          };
        };
      }
    ).post.requestBody.content['application/json'].schema.anyOf;
    const [first, followUp] = round;
    expect(Object.keys(first?.properties ?? {}).sort()).toEqual([
      'cloud',
      'iac_path',
      'repository_url',
      'scope_id',
      'text',
    ]);
    expect(first?.required.sort()).toEqual(['cloud', 'repository_url', 'scope_id', 'text']);
    expect(followUp?.required.sort()).toEqual(['session_id', 'text']);
    expect(doc.components.schemas.Error?.required).toEqual(['error']);
    // A stack carries the fields of a first request but the text, and its schedule (its request
    // body, declared beside its route: api/routes/stacks.ts).
    const createStack = (
      doc.paths['/api/v1/stacks'] as {
        post: { requestBody: { content: { 'application/json': { schema: { required?: string[] } } } } };
      }
    ).post.requestBody.content['application/json'].schema;
    expect(createStack.required?.sort()).toEqual(['cloud', 'name', 'repository_url', 'schedule', 'scope_id']);
  });

  it("is what the web application's API types were generated from (npm run web:types)", async () => {
    const committed = readFileSync(join(projectRoot, 'web', 'src', 'api', 'schema.d.ts'), 'utf8');
    expect(committed).toBe(await renderWebTypes());
  });
});
