import { describe, expect, it } from 'vitest';
import { renderHcl, syntaxErrors, topBlocks, withHcl } from '../../activities/hcl';
import {
  attributeExpr,
  bodyOf,
  evalLiteral,
  heldTreeCount,
  referenceOf,
  TerraformConfig,
} from '../../activities/terraform-config';

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
    await withHcl(SRC, (root) => {
      const [sg, computed] = topBlocks(root).map((b) => bodyOf(b));
      const data = attributeExpr(sg, 'data');
      expect(data && evalLiteral(data)).toEqual({ ok: true, value: '{"id":"sg","ports":[443]}' });
      const path = attributeExpr(computed, 'path');
      expect(path && evalLiteral(path)).toEqual({ ok: false });
      expect(path && referenceOf(path)).toBeUndefined();
    });
    await withHcl('x = var.settings.size\n', (root) => {
      const ref = root.namedChildren[0]?.namedChildren[0];
      const expr = ref?.namedChildren.find((c) => c?.type === 'expression');
      expect(expr && referenceOf(expr)).toEqual({ root: 'var', parts: ['settings', 'size'] });
    });
  });

  it('frees the syntax trees of a configuration disposed of: parsing again and again does not grow', async () => {
    // ~9 KiB of HCL: a tree of it left in the parser's WASM memory holds ~0.8 MiB there, and that
    // memory is never returned — 300 undeleted trees would add ~250 MiB to the process.
    const text = Array.from(
      { length: 100 },
      (_, i) =>
        `resource "aws_s3_bucket" "b${i}" {\n  bucket = "bucket-${i}"\n  tags = {\n    Name = "n${i}"\n  }\n}\n`,
    ).join('\n');
    let n = 0;
    const round = async () => {
      // As a round reads its configuration: every file parsed, one edited and parsed again — texts
      // no earlier round had (a tree nobody holds is deleted at the end of the turn).
      const own = `${text}# round ${n++}\n`;
      const config = TerraformConfig.of([
        { path: 'main.tf', content: own },
        { path: 'more.tf', content: own.replaceAll('b', 'c') },
      ]);
      expect(await config.blocks('', 'resource')).toHaveLength(200);
      config.files.set('main.tf', `${own}\n# edited\n`);
      expect(await config.blocks('', 'resource')).toHaveLength(200);
      config.dispose();
      expect(heldTreeCount()).toBe(0);
      expect(await syntaxErrors(own)).toEqual([]);
      await new Promise((resolve) => setImmediate(resolve));
    };
    // The parser's memory grows to what one round needs, then stays there.
    for (let i = 0; i < 20; i++) await round();
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 100; i++) await round();
    const grownMiB = (process.memoryUsage().rss - before) / 2 ** 20;
    expect(grownMiB).toBeLessThan(64);
  });

  it('parses a text once for the configurations holding it at the same time', async () => {
    const files = [
      { path: 'main.tf', content: 'resource "null_resource" "a" {}\n' },
      { path: 'more.tf', content: 'resource "null_resource" "b" {}\n' },
    ];
    const first = TerraformConfig.of(files);
    const second = TerraformConfig.of(files);
    const [a, b] = [await first.tree('main.tf'), await second.tree('main.tf')];
    // One tree, two holders: the first configuration's dispose leaves it to the second.
    expect(a.tree).toBe(b.tree);
    expect(heldTreeCount()).toBe(1);
    first.dispose();
    await new Promise((resolve) => setImmediate(resolve));
    expect((await second.blocks('', 'resource')).map((x) => x.labels[1])).toEqual(['a', 'b']);
    expect(heldTreeCount()).toBe(2);
    second.dispose();
    expect(heldTreeCount()).toBe(0);
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
