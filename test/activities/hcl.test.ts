import { describe, expect, it } from 'vitest';
import {
  parseHclTree,
  renderHcl,
  syntaxErrors,
  textEdit,
  topBlocks,
  withHcl,
  type HclNode,
} from '../../activities/hcl';
import {
  attributeExpr,
  bodyOf,
  evalLiteral,
  heldTreeCount,
  LINGER_CHARS,
  referenceOf,
  TerraformConfig,
  treeCounts,
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
      // no earlier round had (a tree nobody holds lingers within a budget of text, then is deleted).
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

  it('parses an edited text from its earlier tree to the tree a fresh parse gives', async () => {
    /** Every node's kind and range, in document order. */
    const shape = (n: HclNode): string[] => [
      `${n.type} ${n.startIndex}-${n.endIndex} ${n.startPosition.row}:${n.startPosition.column}-${n.endPosition.row}:${n.endPosition.column}`,
      ...n.children.flatMap((c) => (c ? shape(c) : [])),
    ];
    const before = `${SRC}\nlocals {\n  owner = "équipe 🚀"\n  note  = <<EOT\nplain\nEOT\n}\n`;
    const edits: [string, string][] = [
      ['ports = [443]', 'ports = [443, 8443]'], // a value grows
      ['# where', ''], // a comment goes
      ['équipe 🚀', 'équipe 🚀🚀'], // past characters of two code units
      ['plain\n', 'plain\nand more\nlines\n'], // new lines inside a heredoc
      ['resource "rest_object" "computed" {', 'resource "rest_object" "computed" {\n  count = 2'],
      ['"/api/objects"', '"/api/objects'], // a syntax error
    ];
    const earlier = await parseHclTree(before);
    const beforeShape = shape(earlier.rootNode);
    for (const [from, to] of edits) {
      const after = before.replace(from, to);
      expect(after).not.toBe(before);
      const incremental = await parseHclTree(after, { text: before, tree: earlier });
      const fresh = await parseHclTree(after);
      expect(shape(incremental.rootNode)).toEqual(shape(fresh.rootNode));
      expect(incremental.rootNode.text).toBe(after);
      incremental.delete();
      fresh.delete();
      // The earlier tree, which others may hold, is as it was.
      expect(shape(earlier.rootNode)).toEqual(beforeShape);
    }
    earlier.delete();
    // The changed range: the common start and end left out, positions in UTF-16 code units.
    expect(textEdit('a = "é🚀"\nb = 1\n', 'a = "é🚀"\nb = 22\n')).toEqual({
      startIndex: 14,
      oldEndIndex: 15,
      newEndIndex: 16,
      startPosition: { row: 1, column: 4 },
      oldEndPosition: { row: 1, column: 5 },
      newEndPosition: { row: 1, column: 6 },
    });
  });

  it('reads an edited file of a configuration as it is now', async () => {
    const config = TerraformConfig.of([{ path: 'main.tf', content: SRC }]);
    expect((await config.blocks('', 'resource')).map((b) => b.labels[1])).toEqual(['sg', 'computed']);
    config.files.set('main.tf', SRC.replace('"computed"', '"renamed"').replace('# the web tier\n', ''));
    expect((await config.blocks('', 'resource')).map((b) => [b.labels[1], b.node.startIndex])).toEqual([
      ['sg', 0],
      ['renamed', SRC.indexOf('resource "rest_object" "computed"') - '# the web tier\n'.length],
    ]);
    config.dispose();
    expect(heldTreeCount()).toBe(0);
  });

  it('takes up again a tree a configuration let go of, within a budget of text', async () => {
    const files = [
      { path: 'main.tf', content: 'resource "null_resource" "kept" {}\n' },
      { path: 'more.tf', content: 'resource "null_resource" "also" {}\n' },
    ];
    const names = async (c: TerraformConfig) => (await c.blocks('', 'resource')).map((b) => b.labels[1]);
    const first = TerraformConfig.of(files);
    expect(await names(first)).toEqual(['kept', 'also']);
    first.dispose();
    const before = treeCounts();
    expect(before.held).toBe(0);
    // The next step reading the same files parses nothing.
    const next = TerraformConfig.of(files);
    expect(await names(next)).toEqual(['kept', 'also']);
    expect(treeCounts().parses).toBe(before.parses);
    // A new text of a path: one parse (from the tree of the path's last text).
    next.files.set('main.tf', 'resource "null_resource" "renamed" {}\n');
    expect(await names(next)).toEqual(['renamed', 'also']);
    expect(treeCounts().parses).toBe(before.parses + 1);
    next.dispose();
    // Trees nobody holds stay within the budget: a text longer than it goes at once.
    const long = 'resource "null_resource" "x" {}\n'.repeat(Math.ceil(LINGER_CHARS / 30));
    const big = TerraformConfig.of([{ path: 'main.tf', content: long }]);
    expect(await big.blocks('', 'resource')).toHaveLength(Math.ceil(LINGER_CHARS / 30));
    big.dispose();
    expect(treeCounts().lingeringChars).toBeLessThanOrEqual(LINGER_CHARS);
    expect(treeCounts().held).toBe(0);
    const again = TerraformConfig.of([{ path: 'main.tf', content: long }]);
    const parses = treeCounts().parses;
    await again.tree('main.tf');
    expect(treeCounts().parses).toBe(parses + 1);
    again.dispose();
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
