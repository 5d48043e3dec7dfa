// Formatting only what an edit changed (activities/fmt-regions.ts), against the real engine's fmt:
// the new text with its changed paragraphs formatted is what fmt makes of the whole file, while fmt
// reads a small part of it; the parts of a file that were not canonical are left alone.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EngineClient } from '../../activities/engine';
import { withHcl } from '../../activities/hcl';
import {
  applyReplacements,
  changedRegion,
  formatChanged,
  newFmtCache,
  paragraphsOf,
  replacementOf,
} from '../../activities/fmt-regions';
import { DEMO_ROOT, REAL_ROOTS } from '../support/aws-test-bed';
import { engineDeps } from '../support/stack';

/** A root file in canonical form: nested blocks, aligned attributes, comments, a heredoc with rows
 * that look like the top level, one-line blocks on adjacent rows. */
const ORIGINAL = `# The web tier.
terraform {
  required_version = ">= 1.5"
}

resource "aws_security_group" "web" {
  name        = "web"
  description = "the web tier"

  ingress {
    from_port   = 443
    to_port     = 443
    cidr_blocks = ["10.0.0.0/8"]
  }
  tags = {
    Team = "edge"
  }
}

resource "aws_iam_role" "r" {
  name               = "r"
  assume_role_policy = <<EOF
{
  "Version": "2012-10-17"

}

resource "not" "a_block" {
EOF
}

// Two one-line blocks.
variable "a" { default = 1 }
variable "bbbb" { default = 2 }

output "x" {
  value = aws_iam_role.r.name
}
`;

function engine(): EngineClient {
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-fmt-regions-'));
  mkdirSync(join(dir, '.git'));
  return new EngineClient({ ...engineDeps(), workdir: dir, scopeId: 'fmt-regions' });
}

/** The engine, counting the characters its fmt reads. */
function counting(e: EngineClient) {
  const seen = { chars: 0, calls: 0 };
  return {
    seen,
    fmtMany: (texts: { text: string; tfvars?: boolean }[]) => {
      seen.calls += 1;
      seen.chars += texts.reduce((n, t) => n + t.text.length, 0);
      return e.fmtMany(texts);
    },
  };
}

const EDITS: [string, (t: string) => string][] = [
  ['a value changed, out of alignment', (t) => t.replace('  name        = "web"', '  name = "web-2"')],
  [
    'an attribute added with a longer name',
    (t) =>
      t.replace(
        '  description = "the web tier"',
        '  description = "the web tier"\n  revoke_rules_on_delete=true',
      ),
  ],
  ['a nested block re-indented', (t) => t.replace('    from_port   = 443\n', '      from_port=443\n')],
  [
    'a row inside the heredoc',
    (t) => t.replace('"Version": "2012-10-17"\n', '"Version": "2012-10-17",\n"Id":   "x"\n'),
  ],
  [
    'a block added between two paragraphs',
    (t) =>
      t.replace(
        '// Two one-line blocks.',
        'resource "aws_s3_bucket" "b" {\nbucket="b"\n  tags = { Team="x" }\n}\n\n// Two one-line blocks.',
      ),
  ],
  ['a block removed', (t) => t.replace('output "x" {\n  value = aws_iam_role.r.name\n}\n', '')],
  [
    'a one-line block widened',
    (t) => t.replace('variable "a" { default = 1 }', 'variable "a" { default  =  11 }'),
  ],
  [
    'the first and the last block',
    (t) =>
      t
        .replace('required_version = ">= 1.5"', 'required_version=">= 1.6"')
        .replace('value = aws', 'value =  aws'),
  ],
  ['a block added after the last one', (t) => `${t}\nlocals {\nx=1\n}\n`],
  [
    'a heredoc opened in one paragraph and closed in the next',
    (t) =>
      t
        .replace('// Two one-line blocks.\n', '// Two one-line blocks.\nlocals {\nh = <<EOT\n')
        .replace('output "x" {', 'EOT\n}\noutput "x" {'),
  ],
];

describe('formatting only the paragraphs an edit changed', () => {
  const e = engine();

  it('the original is in canonical form (the premise of the cases below)', async () => {
    expect(await e.fmt(ORIGINAL)).toBe(ORIGINAL);
  });

  it.each(EDITS)('%s: the new text is what fmt makes of the whole file', async (_name, edit) => {
    const next = edit(ORIGINAL);
    expect(next).not.toBe(ORIGINAL);
    const [r] = await formatChanged(e, [{ original: ORIGINAL, text: next, tfvars: false }]);
    expect(r).toEqual({ canonical: true, formatted: await e.fmt(next) });
  });

  it('every paragraph of the test bed roots, edited: the same as fmt of the whole file', async () => {
    const files = [...REAL_ROOTS, DEMO_ROOT].flatMap((spec) =>
      Object.entries(spec.files('x')).filter(([name]) => name.endsWith('.tf')),
    );
    const originals = await e.fmtMany(files.map(([, text]) => ({ text })));
    const jobs: { original: string; text: string; tfvars: boolean }[] = [];
    for (const original of originals) {
      if (original === undefined) throw new Error('a test bed file fmt cannot read');
      const rows = original.split('\n');
      // After each paragraph's first row that opens a block, a row out of alignment.
      for (const p of (await paragraphsOf(original)) ?? []) {
        const open = rows.findIndex((r, i) => i >= p.start && i < p.end && r.endsWith('{'));
        if (open === -1) continue;
        const next = [...rows.slice(0, open + 1), 'kumoss_probe=1', ...rows.slice(open + 1)].join('\n');
        jobs.push({ original, text: next, tfvars: false });
      }
    }
    expect(jobs.length).toBeGreaterThan(40);
    const whole = await e.fmtMany(jobs.map((j) => ({ text: j.text })));
    const parts = await formatChanged(e, jobs);
    for (const [i, r] of parts.entries()) expect(r).toEqual({ canonical: true, formatted: whole[i] });
  });

  it('fmt reads the changed paragraphs, not the files, and each original paragraph once', async () => {
    const c = counting(e);
    const cache = newFmtCache();
    const edits = EDITS.slice(0, 4).map(([, edit]) => edit(ORIGINAL));
    const out = await formatChanged(
      c,
      edits.map((text) => ({ original: ORIGINAL, text, tfvars: false })),
      cache,
    );
    for (const [i, text] of edits.entries()) expect(out[i]?.formatted).toBe(await e.fmt(text));
    expect(c.seen.calls).toBe(1);
    // Four edits of two paragraphs: those two paragraphs before, and the four after — under half
    // of what fmt of the files read (the original and the four new texts).
    expect(c.seen.chars).toBeLessThan((ORIGINAL.length * 5) / 2);
    expect(c.seen.chars).toBeGreaterThan(0);
    // Another answer editing the same paragraph: only its new text is read.
    const more = ORIGINAL.replace('  name        = "web"', '  name   = "web-3"');
    const before = c.seen.chars;
    const [again] = await formatChanged(c, [{ original: ORIGINAL, text: more, tfvars: false }], cache);
    expect(again?.formatted).toBe(await e.fmt(more));
    expect(c.seen.chars - before).toBeLessThan(ORIGINAL.length / 2);
  });

  it('a paragraph that was not canonical is left as it was; one that was is formatted', async () => {
    const loose = ORIGINAL.replace('  name               = "r"', '  name = "r"');
    expect(await e.fmt(loose)).not.toBe(loose);
    // Changed where the original was canonical: that part formatted, the loose paragraph kept.
    const elsewhere = loose.replace('  name        = "web"', '  name = "web-2"');
    const [a] = await formatChanged(e, [{ original: loose, text: elsewhere, tfvars: false }]);
    expect(a?.canonical).toBe(true);
    expect(a?.formatted).toContain('  name        = "web-2"');
    expect(a?.formatted).toContain('  name = "r"\n');
    // Changed inside the loose paragraph: the original was not canonical there.
    const inside = loose.replace('  name = "r"', '  name = "r2"');
    const [b] = await formatChanged(e, [{ original: loose, text: inside, tfvars: false }]);
    expect(b?.canonical).toBe(false);
  });

  it('a tfvars file, a text that does not parse and an unchanged text go through whole or not at all', async () => {
    const c = counting(e);
    const tfvars = 'a    = 1\nbbbb = 2\n\nc = 3\n';
    const broken = `${ORIGINAL}resource "x" {\n`;
    const out = await formatChanged(c, [
      { original: tfvars, text: 'a    = 1\nbbbb = 2\n\nccccc=3\n', tfvars: true },
      { original: broken, text: broken.replace('name        = "web"', 'name = "w"'), tfvars: false },
      { original: ORIGINAL, text: ORIGINAL, tfvars: false },
    ]);
    expect(out[0]).toEqual({ canonical: true, formatted: 'a    = 1\nbbbb = 2\n\nccccc = 3\n' });
    // fmt rejects the broken file whole: not canonical, nothing formatted.
    expect(out[1]).toEqual({ canonical: false, formatted: undefined });
    expect(out[2]).toEqual({ canonical: false, formatted: ORIGINAL });
  });

  it('the changed region is the original around the changed paragraphs', async () => {
    const paragraphs = await paragraphsOf(ORIGINAL);
    // The heredoc's empty row and its top-level-looking rows stay inside the role's paragraph.
    expect(paragraphs?.map((p) => p.start)).toEqual([0, 5, 19, 31, 35]);
    for (const [, edit] of EDITS) {
      const next = edit(ORIGINAL);
      const r = changedRegion(ORIGINAL, next, paragraphs ?? []);
      if (!r) continue;
      expect(r.prefix + r.before + r.suffix).toBe(ORIGINAL);
      expect(r.prefix + r.after + r.suffix).toBe(next);
      expect(r.prefix === '' || r.prefix.endsWith('\n\n')).toBe(true);
      expect(r.suffix === '' || r.suffix.startsWith('\n')).toBe(true);
      expect(r.before.endsWith('\n')).toBe(true);
    }
    expect(await paragraphsOf('resource "x" {\n')).toBeUndefined();
  });

  it('edits of paragraphs apart are made together on the original; edits of one paragraph are not', async () => {
    const cache = newFmtCache();
    const web = EDITS[0]?.[1](ORIGINAL) ?? '';
    const role = EDITS[3]?.[1](ORIGINAL) ?? '';
    const added = EDITS[4]?.[1](ORIGINAL) ?? '';
    const alsoWeb = EDITS[1]?.[1](ORIGINAL) ?? '';
    const [a, b, c, d] = await Promise.all(
      [web, role, added, alsoWeb].map((t) => replacementOf(ORIGINAL, t, cache)),
    );
    if (!a || !b || !c || !d) throw new Error('an edit of paragraphs that is not a replacement');
    // Each alone is its own edit; three apart make what each made of its paragraphs.
    expect(applyReplacements(ORIGINAL, [a])).toBe(web);
    const together = applyReplacements(ORIGINAL, [c, a, b]);
    expect(together).toBe(
      ORIGINAL.replace('  name        = "web"', '  name = "web-2"')
        .replace('"Version": "2012-10-17"\n', '"Version": "2012-10-17",\n"Id":   "x"\n')
        .replace(
          '// Two one-line blocks.',
          'resource "aws_s3_bucket" "b" {\nbucket="b"\n  tags = { Team="x" }\n}\n\n// Two one-line blocks.',
        ),
    );
    // Two edits of the web tier's paragraph: not made together here (git merges them).
    expect(applyReplacements(ORIGINAL, [a, d])).toBeUndefined();
    // A change after the last paragraph is no replacement of paragraphs.
    expect(await replacementOf(ORIGINAL, `${ORIGINAL}\n# the end\n`, cache)).toBeUndefined();
  });

  it("reads an original's paragraphs from the tree its caller holds, once", async () => {
    let asked = 0;
    const next = EDITS[0]?.[1](ORIGINAL) ?? '';
    const again = EDITS[1]?.[1](ORIGINAL) ?? '';
    await withHcl(ORIGINAL, async (root) => {
      const cache = newFmtCache((text) => {
        asked += 1;
        return Promise.resolve(text === ORIGINAL ? root : undefined);
      });
      const out = await formatChanged(
        e,
        [next, again].map((text) => ({ original: ORIGINAL, text, tfvars: false })),
        cache,
      );
      expect(out.map((r) => r.formatted)).toEqual([await e.fmt(next), await e.fmt(again)]);
    });
    expect(asked).toBe(1);
  });
});
