// The offline remediation's code edits, on the shapes real roots have: nested block sets, maps,
// local modules, variables, locals, count and for_each. Pure: file texts in, file texts out (the
// real rounds on moto in test/workflows/real-roots.test.ts prove the edits with the engine).
import { describe, expect, it } from 'vitest';
import { OfflineModel } from '../../activities/model/offline';
import { diffValues, type DriftOperation } from '../../shared/drift';

function op(
  address: string,
  attributes: Record<string, [unknown, unknown]>,
  extra: Partial<DriftOperation> = {},
): DriftOperation {
  const m = /^(?:(.*)\.)?([a-z0-9_]+)\.([A-Za-z0-9_-]+)(\[.*\])?$/.exec(address);
  const modulePart = m?.[1];
  const attrs: DriftOperation['attributes'] = {};
  const changes = [];
  for (const [k, [declared, actual]] of Object.entries(attributes)) {
    attrs[k] = { declared, actual };
    changes.push(...diffValues(declared, actual, k));
  }
  return {
    address,
    type: m?.[2] ?? '',
    name: m?.[3] ?? '',
    ...(modulePart ? { module_address: modulePart } : {}),
    drift_actions: ['update'],
    planned_actions: ['update'],
    changes,
    attributes: attrs,
    ...extra,
  };
}

async function remediate(files: Record<string, string>, ops: DriftOperation[], related?: DriftOperation[]) {
  const r = await new OfflineModel().remediate({
    operations: ops,
    files: Object.entries(files).map(([path, content]) => ({ path, content })),
    ...(related ? { related } : {}),
  });
  const out = { ...files };
  for (const e of r.edits) out[e.path] = e.content;
  return { files: out, unremediable: r.unremediable, edited: r.edits.map((e) => e.path).sort() };
}

const rule = (from: number, cidrs = ['0.0.0.0/0'], description = '') => ({
  cidr_blocks: cidrs,
  description,
  from_port: from,
  ipv6_cidr_blocks: [],
  prefix_list_ids: [],
  protocol: 'tcp',
  security_groups: [],
  self: false,
  to_port: from,
});

const SG = `resource "aws_security_group" "web" {
  name        = "sg-web-demo"
  description = "web tier"

  # HTTPS from anywhere
  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  ingress {
    description = "ssh from the office"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/8"]
  }

  tags = {
    Name = "sg-web-demo"
    Team = "web" # owner
  }
}
`;

describe('offline remediation of nested blocks and maps', () => {
  it('adds an ingress block for a rule opened in the console, keeping the others and their comments', async () => {
    const declared = [rule(443), rule(22, ['10.0.0.0/8'], 'ssh from the office')];
    const { files, unremediable } = await remediate({ 'main.tf': SG }, [
      op('aws_security_group.web', { ingress: [declared, [...declared, rule(8080)]] }),
    ]);
    expect(unremediable).toEqual([]);
    expect(files['main.tf']).toBe(
      SG.replace(
        '    cidr_blocks = ["10.0.0.0/8"]\n  }\n',
        '    cidr_blocks = ["10.0.0.0/8"]\n  }\n\n  ingress {\n    from_port   = 8080\n    to_port     = 8080\n    protocol    = "tcp"\n    cidr_blocks = ["0.0.0.0/0"]\n  }\n',
      ),
    );
  });

  it('removes the block of a rule revoked in the console and leaves one blank line', async () => {
    const declared = [rule(443), rule(22, ['10.0.0.0/8'], 'ssh from the office')];
    const { files } = await remediate({ 'main.tf': SG }, [
      op('aws_security_group.web', { ingress: [declared, [rule(443)]] }),
    ]);
    expect(files['main.tf']).not.toContain('from_port   = 22');
    expect(files['main.tf']).toContain('# HTTPS from anywhere');
    expect(files['main.tf']).not.toMatch(/\n\n\n/);
  });

  it('edits a changed rule in place (a CIDR narrowed by hand)', async () => {
    const declared = [rule(443), rule(22, ['10.0.0.0/8'], 'ssh from the office')];
    const { files } = await remediate({ 'main.tf': SG }, [
      op('aws_security_group.web', {
        ingress: [declared, [rule(443), rule(22, ['10.1.0.0/16'], 'ssh from the office')]],
      }),
    ]);
    expect(files['main.tf']).toBe(SG.replace('["10.0.0.0/8"]', '["10.1.0.0/16"]'));
  });

  it('changes one tag, adds one, keeps the comment of another', async () => {
    const { files } = await remediate({ 'main.tf': SG }, [
      op('aws_security_group.web', {
        tags: [
          { Name: 'sg-web-demo', Team: 'web' },
          { Name: 'sg-web-demo', Team: 'web', CostCenter: '42' },
        ],
        tags_all: [
          { Name: 'sg-web-demo', Team: 'web' },
          { Name: 'sg-web-demo', Team: 'web', CostCenter: '42' },
        ],
      }),
    ]);
    expect(files['main.tf']).toContain('    Team = "web" # owner\n    CostCenter = "42"\n  }');
  });

  it('writes an attribute the code leaves to its default', async () => {
    const src = 'resource "aws_s3_bucket" "logs" {\n  bucket = "acme-logs"\n}\n';
    const { files } = await remediate({ 'main.tf': src }, [
      op('aws_s3_bucket.logs', { tags: [null, { Owner: 'ops' }], tags_all: [{}, { Owner: 'ops' }] }),
    ]);
    expect(files['main.tf']).toBe(
      'resource "aws_s3_bucket" "logs" {\n  bucket = "acme-logs"\n\n  tags = {\n    Owner = "ops"\n  }\n}\n',
    );
  });

  it('edits one path inside jsonencode of a policy', async () => {
    const src = `resource "aws_iam_role" "app" {
  name = "app"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}
`;
    const declared = JSON.stringify({
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Principal: { Service: 'ec2.amazonaws.com' }, Action: 'sts:AssumeRole' }],
    });
    const actual = JSON.stringify({
      Version: '2012-10-17',
      Statement: [
        { Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' },
      ],
    });
    const { files, unremediable } = await remediate({ 'main.tf': src }, [
      op('aws_iam_role.app', { assume_role_policy: [declared, actual] }),
    ]);
    expect(unremediable).toEqual([]);
    // One changed string, one changed line.
    expect(files['main.tf']).toBe(src.replace('ec2.amazonaws.com', 'lambda.amazonaws.com'));
  });

  it('leaves rules generated by a dynamic block to a person', async () => {
    const src = `resource "aws_security_group" "dyn" {
  dynamic "ingress" {
    for_each = var.ports
    content {
      from_port   = ingress.value
      to_port     = ingress.value
      protocol    = "tcp"
      cidr_blocks = ["0.0.0.0/0"]
    }
  }
}
`;
    const { unremediable, edited } = await remediate({ 'main.tf': src }, [
      op('aws_security_group.dyn', { ingress: [[rule(443)], [rule(443), rule(8080)]] }),
    ]);
    expect(edited).toEqual([]);
    expect(unremediable[0]?.reason).toBe(
      'ingress is generated by a dynamic block; rewriting it needs a person.',
    );
  });

  it('never copies a sensitive value into code', async () => {
    const { unremediable, edited } = await remediate(
      { 'main.tf': 'resource "aws_iam_role" "r" {\n  description = "x"\n}\n' },
      [op('aws_iam_role.r', { description: ['(sensitive)', '(sensitive)'] })],
    );
    expect(edited).toEqual([]);
    expect(unremediable[0]?.reason).toMatch(/sensitive; its value is never copied into code/);
  });

  it('leaves a value built from an expression to a person, naming it', async () => {
    const src = 'resource "aws_instance" "app" {\n  instance_type = "t3.${var.size}"\n}\n';
    const { unremediable, edited } = await remediate({ 'main.tf': src }, [
      op('aws_instance.app', { instance_type: ['t3.micro', 't3.large'] }),
    ]);
    expect(edited).toEqual([]);
    expect(unremediable[0]?.reason).toMatch(/computed from expressions/);
  });
});

describe('offline remediation through modules, variables and locals', () => {
  const root = {
    'main.tf': `module "web" {
  source = "./modules/web"
  name   = "sg-web-demo"
}
`,
    'modules/web/main.tf': `variable "name" {
  type = string
}

resource "aws_security_group" "this" {
  name = var.name
  tags = {
    Tier = "web"
  }
}
`,
  };

  it("edits the module's own file when the module is called once", async () => {
    const { files, unremediable } = await remediate(root, [
      op('module.web.aws_security_group.this', { tags: [{ Tier: 'web' }, { Tier: 'frontend' }] }),
    ]);
    expect(unremediable).toEqual([]);
    expect(files['modules/web/main.tf']).toContain('Tier = "frontend"');
    expect(files['main.tf']).toBe(root['main.tf']);
  });

  it('follows a module variable to the argument of the module call', async () => {
    const withTags = {
      ...root,
      'modules/web/main.tf': root['modules/web/main.tf'].replace(
        'name = var.name',
        'name = "x"\n  description = var.name',
      ),
    };
    const { files } = await remediate(withTags, [
      op('module.web.aws_security_group.this', { description: ['sg-web-demo', 'web servers'] }),
    ]);
    expect(files['main.tf']).toContain('name   = "web servers"');
  });

  it('leaves a module called twice to a person', async () => {
    const twice = {
      ...root,
      'main.tf': `${root['main.tf']}
module "api" {
  source = "./modules/web"
  name   = "sg-api"
}
`,
    };
    const { unremediable, edited } = await remediate(twice, [
      op('module.web.aws_security_group.this', { tags: [{ Tier: 'web' }, { Tier: 'frontend' }] }),
    ]);
    expect(edited).toEqual([]);
    expect(unremediable[0]?.reason).toMatch(/called 2 times \(module\.web, module\.api\)/);
  });

  it('leaves a registry module to a person', async () => {
    const { unremediable } = await remediate(
      { 'main.tf': 'module "vpc" {\n  source  = "terraform-aws-modules/vpc/aws"\n  version = "5.0.0"\n}\n' },
      [op('module.vpc.aws_vpc.this', { tags: [{}, { a: 'b' }] })],
    );
    expect(unremediable[0]?.reason).toMatch(
      /comes from terraform-aws-modules\/vpc\/aws; its code is not in this repository/,
    );
  });

  const varRoot = {
    'main.tf': `resource "aws_instance" "app" {
  ami           = "ami-1"
  instance_type = var.instance_type
}
`,
    'variables.tf': `variable "instance_type" {
  type    = string
  default = "t3.micro"
}
`,
  };

  it("changes the variable's tfvars entry when it is set there", async () => {
    const { files } = await remediate({ ...varRoot, 'terraform.tfvars': 'instance_type = "t3.small"\n' }, [
      op('aws_instance.app', { instance_type: ['t3.small', 't3.large'] }),
    ]);
    expect(files['terraform.tfvars']).toBe('instance_type = "t3.large"\n');
    expect(files['variables.tf']).toBe(varRoot['variables.tf']);
  });

  it("changes the variable's default when no tfvars sets it", async () => {
    const { files } = await remediate(varRoot, [
      op('aws_instance.app', { instance_type: ['t3.micro', 't3.large'] }),
    ]);
    expect(files['variables.tf']).toContain('default = "t3.large"');
  });

  it('leaves a variable used in several places to a person, saying how many', async () => {
    const shared = {
      ...varRoot,
      'other.tf':
        'resource "aws_instance" "b" {\n  ami           = "ami-1"\n  instance_type = var.instance_type\n}\n',
    };
    const { unremediable } = await remediate(shared, [
      op('aws_instance.app', { instance_type: ['t3.micro', 't3.large'] }),
    ]);
    expect(unremediable[0]?.reason).toBe(
      'instance_type comes from var.instance_type, which is used in 2 places; changing it would change them all.',
    );
  });

  it('changes a local used once', async () => {
    const src = `locals {
  size = "t3.micro"
}

resource "aws_instance" "app" {
  ami           = "ami-1"
  instance_type = local.size
}
`;
    const { files } = await remediate({ 'main.tf': src }, [
      op('aws_instance.app', { instance_type: ['t3.micro', 't3.large'] }),
    ]);
    expect(files['main.tf']).toContain('size = "t3.large"');
  });
});

describe('offline remediation of count and for_each instances', () => {
  const counted = `resource "aws_instance" "worker" {
  count         = 3
  ami           = "ami-1"
  instance_type = "t3.micro"
}
`;
  const drifted = (i: number) => op(`aws_instance.worker[${i}]`, { instance_type: ['t3.micro', 't3.small'] });

  it('edits the block when every instance drifted the same way', async () => {
    const all = [drifted(0), drifted(1), drifted(2)];
    const { files, unremediable } = await remediate({ 'main.tf': counted }, all, all);
    expect(unremediable).toEqual([]);
    expect(files['main.tf']).toBe(counted.replace('"t3.micro"', '"t3.small"'));
  });

  it('leaves one drifted instance of three to a person', async () => {
    const { unremediable, edited } = await remediate({ 'main.tf': counted }, [drifted(1)], [drifted(1)]);
    expect(edited).toEqual([]);
    expect(unremediable[0]?.reason).toBe(
      'instance_type is shared by all 3 instances (count), but only 1 of them drifted this way; changing it would change the others.',
    );
  });

  it('edits the for_each entry of the instance that drifted', async () => {
    const src = `resource "aws_s3_bucket" "data" {
  for_each = {
    logs   = { owner = "ops" }
    assets = { owner = "web" }
  }
  bucket = "acme-\${each.key}"
  tags = {
    Owner = each.value.owner
  }
}
`;
    const { files, unremediable } = await remediate({ 'main.tf': src }, [
      op('aws_s3_bucket.data["logs"]', { tags: [{ Owner: 'ops' }, { Owner: 'sre' }] }),
    ]);
    expect(unremediable).toEqual([]);
    expect(files['main.tf']).toContain('logs   = { owner = "sre" }');
    expect(files['main.tf']).toContain('assets = { owner = "web" }');
  });
});
