import { describe, expect, it } from 'vitest';
import { findAttribute, listResources, renderHcl, syntaxErrors } from '../../activities/hcl';

const SRC = `# the web tier
resource "rest_object" "sg" {
  path = "/api/objects" # where
  data = jsonencode({ id = "sg", ports = [443] })
}

resource "rest_object" "computed" {
  path = "/api/\${var.kind}"
  data = jsonencode({ id = var.id })
}
`;

describe('HCL reading and editing', () => {
  it('lists resource blocks with their lines', async () => {
    const rs = await listResources(SRC);
    expect(rs.map((r) => [r.address, r.startLine, r.endLine])).toEqual([
      ['rest_object.sg', 2, 5],
      ['rest_object.computed', 7, 10],
    ]);
  });

  it('finds an attribute and tells a literal value from one computed from expressions', async () => {
    const lit = await findAttribute(SRC, 'rest_object', 'sg', 'data');
    expect(lit).toMatchObject({ literal: true, jsonencoded: true, indent: 2 });
    expect(lit?.text).toBe('jsonencode({ id = "sg", ports = [443] })');
    expect((await findAttribute(SRC, 'rest_object', 'computed', 'data'))?.literal).toBe(false);
    expect((await findAttribute(SRC, 'rest_object', 'computed', 'path'))?.literal).toBe(false);
    expect(await findAttribute(SRC, 'rest_object', 'sg', 'missing')).toBeUndefined();
  });

  it('renders JSON as HCL, escaping template sequences and keeping the declared key order', () => {
    expect(renderHcl({ b: 1, a: 'x${y}', 'not-ident key': true }, 0, { a: 0, b: 0 })).toBe(
      '{\n  a               = "x$${y}"\n  b               = 1\n  "not-ident key" = true\n}',
    );
    expect(renderHcl(['a', 'b'])).toBe('["a", "b"]');
    expect(renderHcl(null)).toBe('null');
  });

  it('reports syntax errors', async () => {
    expect(await syntaxErrors(SRC)).toEqual([]);
    expect((await syntaxErrors('resource "a" "b" {\n  x = \n')).length).toBeGreaterThan(0);
  });
});
