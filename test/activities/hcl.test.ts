import { describe, expect, it } from 'vitest';
import { parseHcl, renderHcl, syntaxErrors, topBlocks } from '../../activities/hcl';
import { attributeExpr, bodyOf, evalLiteral, referenceOf } from '../../activities/terraform-config';

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
  it('evaluates literal values and reads references, telling them from computed expressions', async () => {
    const root = await parseHcl(SRC);
    const [sg, computed] = topBlocks(root).map((b) => bodyOf(b));
    const data = attributeExpr(sg, 'data');
    expect(data && evalLiteral(data)).toEqual({ ok: true, value: '{"id":"sg","ports":[443]}' });
    const path = attributeExpr(computed, 'path');
    expect(path && evalLiteral(path)).toEqual({ ok: false });
    expect(path && referenceOf(path)).toBeUndefined();
    const ref = (await parseHcl('x = var.settings.size\n')).namedChildren[0]?.namedChildren[0];
    const expr = ref?.namedChildren.find((c) => c?.type === 'expression');
    expect(expr && referenceOf(expr)).toEqual({ root: 'var', parts: ['settings', 'size'] });
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
