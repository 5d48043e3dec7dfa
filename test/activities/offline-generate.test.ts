// The offline model's generate set: each stated request edits the code the way a person would;
// anything else is declined with "needs a language model", never guessed.
import { describe, expect, it } from 'vitest';
import { NEEDS_MODEL, offlineGenerate, parseGenerateRequest } from '../../activities/model/offline-generate';
import { offlineGenerateFilter } from '../../activities/model/offline';
import type { ConfigResource, StateResource } from '../../activities/model/port';
import { GENERATE_MISMATCH } from '../../shared/contracts';

const MAIN = `resource "aws_security_group" "web" {
  name        = "web-abc"
  description = "web tier"

  # HTTPS from anywhere
  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  tags = {
    Name = "sg-web-demo"
  }
}

resource "aws_instance" "worker" {
  count         = 2
  ami           = "ami-123"
  instance_type = var.size
}

variable "size" {
  default = "t3.micro"
}
`;

const rule = (from: number, cidr: string) => ({
  from_port: from,
  to_port: from,
  protocol: 'tcp',
  cidr_blocks: [cidr],
  description: '',
  ipv6_cidr_blocks: [],
  prefix_list_ids: [],
  security_groups: [],
  self: false,
});

const resources: ConfigResource[] = [
  {
    address: 'aws_security_group.web',
    type: 'aws_security_group',
    name: 'web',
    file: 'main.tf',
    source: '',
    identifiers: ['sg-web-demo', 'sg-0001'],
  },
  { address: 'aws_instance.worker', type: 'aws_instance', name: 'worker', file: 'main.tf', source: '' },
];
const state: StateResource[] = [
  {
    address: 'aws_security_group.web',
    type: 'aws_security_group',
    values: {
      id: 'sg-0001',
      name: 'web-abc',
      description: 'web tier',
      ingress: [rule(443, '0.0.0.0/0')],
      tags: { Name: 'sg-web-demo' },
    },
  },
  {
    address: 'aws_instance.worker[0]',
    type: 'aws_instance',
    values: { instance_type: 't3.micro', ami: 'ami-123' },
  },
  {
    address: 'aws_instance.worker[1]',
    type: 'aws_instance',
    values: { instance_type: 't3.micro', ami: 'ami-123' },
  },
];
const generate = (text: string) =>
  offlineGenerate({ text, files: [{ path: 'main.tf', content: MAIN }], resources, state });
const diff = (after: string): string[] => {
  const before = new Set(MAIN.split('\n'));
  return after.split('\n').filter((l) => !before.has(l));
};

describe('offline generation', () => {
  it('adds a tag to the tags map of the resource named by its Name tag', async () => {
    const g = await generate('Add tag Team=platform to sg-web-demo');
    expect(g.declined).toBeUndefined();
    expect(g.summary).toBe('Added the tag Team=platform to aws_security_group.web.');
    expect(diff(g.edits[0]?.content ?? '')).toEqual(['    Team = "platform"']);
  });

  it('removes a tag', async () => {
    const g = await generate('remove tag Name from aws_security_group.web');
    expect(g.edits[0]?.content).not.toContain('sg-web-demo');
  });

  it('adds and removes an ingress rule as blocks', async () => {
    const added = await generate('Add an ingress rule tcp 8443 from 10.0.0.0/8 to aws_security_group.web');
    expect(added.declined).toBeUndefined();
    const text = added.edits[0]?.content ?? '';
    expect(text).toMatch(/from_port\s+= 8443/);
    expect(text).toContain('"10.0.0.0/8"');
    expect(text).toMatch(/from_port\s+= 443/);
    const removed = await generate('remove the ingress rule tcp 443 from aws_security_group.web');
    expect(removed.edits[0]?.content).not.toMatch(/from_port\s+= 443/);
  });

  it('sets an attribute where its value comes from (the variable default), for every instance of the block', async () => {
    const g = await generate('Set instance_type of aws_instance.worker to t3.small');
    expect(g.declined).toBeUndefined();
    expect(diff(g.edits[0]?.content ?? '')).toEqual(['  default = "t3.small"']);
    // One instance alone cannot change a value all of them share.
    const one = await generate('Set instance_type of aws_instance.worker[0] to t3.small');
    expect(one.edits).toEqual([]);
    expect(one.declined).toMatch(/shared by all 2 instances/);
  });

  it('changes a literal count', async () => {
    const g = await generate('change the count of aws_instance.worker to 3');
    expect(diff(g.edits[0]?.content ?? '')).toEqual(['  count         = 3']);
  });

  it('declines what is outside its set, and unknown resources, without editing anything', async () => {
    for (const text of [
      'Create an S3 bucket for the logs',
      'Make the web tier highly available',
      'Add tag Team=platform to aws_s3_bucket.logs',
    ]) {
      const g = await generate(text);
      expect(g.edits).toEqual([]);
      expect(g.declined).toBeTruthy();
    }
    // Declining, it says what it does carry out, with examples from this root's own resources.
    const examples =
      'It carries out requests such as "add the tag Team = platform to sg-web-demo"; "remove the tag Team from aws_security_group.web"; "open port 8080 from 10.0.0.0/16 on aws_security_group.web"; "remove the ingress rule tcp 8080 from aws_security_group.web"; "resize aws_instance.worker to t3.small"; "set the count of aws_instance.worker to 3" — naming a resource by its address, its Name tag, its cloud name or a few words of its name and kind.';
    expect((await generate('Create an S3 bucket for the logs')).declined).toBe(`${NEEDS_MODEL} ${examples}`);
    expect((await generate('Add tag Team=platform to aws_s3_bucket.logs')).declined).toBe(
      `No resource aws_s3_bucket.logs exists in the root. ${examples}`,
    );
    expect(parseGenerateRequest('set count of x to many')).toBeUndefined();
  });

  it('meets people halfway: the phrasings people type, and resources named by a few words of their name and kind', async () => {
    const tagged = await generate('Please add the tag CostCenter = cc-1234 to the web security group.');
    expect(tagged.declined).toBeUndefined();
    expect(tagged.summary).toBe('Added the tag CostCenter=cc-1234 to aws_security_group.web.');
    expect(diff(tagged.edits[0]?.content ?? '')).toEqual(['    CostCenter = "cc-1234"']);
    expect((await generate('Tag sg-web-demo with Team=platform')).summary).toBe(
      'Added the tag Team=platform to aws_security_group.web.',
    );
    expect((await generate('set the tag Team to platform on aws_security_group.web')).summary).toBe(
      'Added the tag Team=platform to aws_security_group.web.',
    );
    const opened = await generate('Open port 8080 from 10.0.0.0/16 on the web security group');
    expect(opened.summary).toBe('Added an ingress rule tcp 8080 from 10.0.0.0/16 to aws_security_group.web.');
    expect((await generate('close port 443 on sg-web-demo')).summary).toBe(
      'Removed the ingress rule tcp 443 from aws_security_group.web.',
    );
    const resized = await generate('Resize the worker instances to t3.small');
    expect(resized.declined).toBeUndefined();
    expect(diff(resized.edits[0]?.content ?? '')).toEqual(['  default = "t3.small"']);
    expect(diff((await generate('scale aws_instance.worker to 4')).edits[0]?.content ?? '')).toEqual([
      '  count         = 4',
    ]);
    // Words that name no resource, or only a kind, are not guessed.
    expect((await generate('add the tag A = b to the database security group')).declined).toMatch(
      /^No resource the database security group exists in the root\./,
    );
    expect((await generate('add the tag A = b to the security group')).edits).toEqual([]);
  });

  it("generate mode's filter is drift mode's mirror", () => {
    for (const text of [
      'Add tag Team=platform to sg-web-demo',
      'Tag sg-web-demo with Team=platform',
      'Open port 8080 from 10.0.0.0/16 on the web security group',
      'close port 443 on sg-web-demo',
    ])
      expect(offlineGenerateFilter(text).accepted).toBe(true);
    expect(offlineGenerateFilter('Resolve the drift on sg-web-demo')).toEqual({
      accepted: false,
      reason: GENERATE_MISMATCH,
    });
  });
});
