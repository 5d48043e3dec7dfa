// Real-root test beds: Terraform roots that read like a platform team's — security groups with
// ingress blocks, tag maps, buckets with versioning, IAM roles with jsonencode policies, instances
// with count and for_each, values from variables, tfvars and locals, resources inside local
// modules — applied with the `kumoss/aws` provider (our double of hashicorp/aws) into moto, then
// changed the way a person in the console changes them: through the AWS APIs. Each drift case
// says what Kumoss should do about it: fix the code, or leave it to a person with a reason.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  AuthorizeSecurityGroupEgressCommand,
  AuthorizeSecurityGroupIngressCommand,
  CreateTagsCommand,
  DeleteSecurityGroupCommand,
  EC2Client,
  ModifyInstanceAttributeCommand,
  ModifySecurityGroupRulesCommand,
  RevokeSecurityGroupIngressCommand,
  TerminateInstancesCommand,
  UpdateSecurityGroupRuleDescriptionsIngressCommand,
  type IpPermission,
} from '@aws-sdk/client-ec2';
import { IAMClient, UpdateAssumeRolePolicyCommand, UpdateRoleCommand } from '@aws-sdk/client-iam';
import {
  DeleteBucketCommand,
  PutBucketTaggingCommand,
  PutBucketVersioningCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { EngineClient } from '../../activities/engine';
import { testCloudDir } from './test-cloud';
import { MANAGED_BACKEND_FILE, type ManagedState } from '../../activities/managed-state';
import { stateProjectId } from '../../shared/infra/db/sessions';
import type { EngineDeps } from '../../activities/drift-detection';
import type { GitClient } from '../../activities/git';
import { waitForTool } from '../../shared/infra/tools.mjs';

export interface AwsClients {
  ec2: EC2Client;
  s3: S3Client;
  iam: IAMClient;
}

export function awsClients(endpoint: string): AwsClients {
  const cfg = {
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'kumoss-emulator', secretAccessKey: 'kumoss-emulator' },
  };
  return {
    ec2: new EC2Client(cfg),
    s3: new S3Client({ ...cfg, forcePathStyle: true }),
    iam: new IAMClient(cfg),
  };
}

/** What a drift injection may look up: cloud ids and attributes from the applied state. */
export interface InjectContext {
  aws: AwsClients;
  /** The `id` of a resource instance in the applied state. */
  id(address: string): string;
  attr(address: string, name: string): unknown;
  /** Unique suffix of this bed's cloud names. */
  suffix: string;
}

export interface DriftCase {
  id: string;
  /** The shape of code the case exercises (the README table's rows). */
  shape: string;
  /** What drifted, as a person would describe it. */
  drift: string;
  /** The drifted resource instance. */
  address: string;
  expect: 'fixed' | 'left';
  /** For `left`: the reason the report must give. */
  reason?: RegExp;
  /** For `fixed`: the files the fix may touch (default: any). */
  files?: string[];
  inject(ctx: InjectContext): Promise<void>;
}

export interface RootSpec {
  name: string;
  files(suffix: string): Record<string, string>;
  cases: DriftCase[];
}

export const PROVIDER = `terraform {
  required_version = ">= 1.5.0"
  required_providers {
    aws = {
      source  = "kumoss/aws"
      version = "0.1.0"
    }
  }
  backend "local" {
    path = "STATE_PATH"
  }
}

provider "aws" {
  region = "us-east-1"
}
`;

/** A module's own versions.tf, as real modules have (naming the provider double's source). */
const MODULE_VERSIONS = `terraform {
  required_providers {
    aws = {
      source = "kumoss/aws"
    }
  }
}
`;

const tcp = (port: number, cidr = '0.0.0.0/0', description?: string): IpPermission => ({
  IpProtocol: 'tcp',
  FromPort: port,
  ToPort: port,
  IpRanges: [{ CidrIp: cidr, ...(description ? { Description: description } : {}) }],
});

/** Console-style changes, as one call each. */
const tagEc2 = (address: string, Key: string, Value: string) => async (c: InjectContext) =>
  void (await c.aws.ec2.send(new CreateTagsCommand({ Resources: [c.id(address)], Tags: [{ Key, Value }] })));
const resize = (address: string, type: string) => async (c: InjectContext) =>
  void (await c.aws.ec2.send(
    new ModifyInstanceAttributeCommand({ InstanceId: c.id(address), InstanceType: { Value: type } }),
  ));
const tagBucket = (address: string, tags: Record<string, string>) => async (c: InjectContext) =>
  void (await c.aws.s3.send(
    new PutBucketTaggingCommand({
      Bucket: c.id(address),
      Tagging: { TagSet: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) },
    }),
  ));
const openIngress = (address: string, permission: IpPermission) => async (c: InjectContext) =>
  void (await c.aws.ec2.send(
    new AuthorizeSecurityGroupIngressCommand({ GroupId: c.id(address), IpPermissions: [permission] }),
  ));
const setTrust = (address: string, service: string) => async (c: InjectContext) =>
  void (await c.aws.iam.send(
    new UpdateAssumeRolePolicyCommand({ RoleName: c.id(address), PolicyDocument: trustPolicy(service) }),
  ));

const DELETED =
  /no longer exists; whether to recreate it or remove it from the code is a decision for a person/;

// ---------------------------------------------------------------- root: network (security groups)
const network: RootSpec = {
  name: 'network',
  files: (s) => ({
    'main.tf': `${PROVIDER}
resource "aws_security_group" "web" {
  name        = "web-${s}"
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
`,
    'database.tf': `resource "aws_security_group" "db" {
  name        = "db-${s}"
  description = "database"

  ingress {
    description = "postgres from the app subnets"
    from_port   = 5432
    to_port     = 5432
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/16"]
  }

  ingress {
    description = "ssh from the bastion"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = ["10.0.9.0/24"]
  }
}

resource "aws_security_group" "cache" {
  name        = "cache-${s}"
  description = "redis"

  ingress {
    from_port   = 6379
    to_port     = 6379
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/16"]
  }
}

resource "aws_security_group" "app" {
  name        = "app-${s}"
  description = "app servers"

  egress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}
`,
    'tags.tf': `resource "aws_security_group" "tagged" {
  name        = "tagged-${s}"
  description = "tagged"

  tags = {
    Name = "tagged-${s}"
    Team = "web" # the owning team
  }
}

resource "aws_security_group" "bare" {
  name        = "bare-${s}"
  description = "no tags in code"
}

resource "aws_security_group" "described" {
  name        = "described-${s}"
  description = "rule descriptions"

  ingress {
    description = "https"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}
`,
    'rules.tf': `resource "aws_security_group" "admin" {
  name        = "admin-${s}"
  description = "rules managed on their own"
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  security_group_id = aws_security_group.admin.id
  description       = "ssh from the office"
  cidr_ipv4         = "192.0.2.0/24"
  from_port         = 22
  to_port           = 22
  ip_protocol       = "tcp"
}

resource "aws_security_group" "scratch" {
  name        = "scratch-${s}"
  description = "a group someone deletes"
}

resource "aws_security_group" "temp" {
  name        = "temp-${s}"
  description = "a group whose separate rule someone revokes"
}

resource "aws_vpc_security_group_ingress_rule" "temp_http" {
  security_group_id = aws_security_group.temp.id
  cidr_ipv4         = "0.0.0.0/0"
  from_port         = 80
  to_port           = 80
  ip_protocol       = "tcp"
}
`,
  }),
  cases: [
    {
      id: 'sg-ingress-added',
      shape: 'nested block set: a rule added in the console',
      drift: 'port 8080 opened on sg-web-demo',
      address: 'aws_security_group.web',
      expect: 'fixed',
      files: ['main.tf'],
      inject: openIngress('aws_security_group.web', tcp(8080)),
    },
    {
      id: 'sg-ingress-revoked',
      shape: 'nested block set: a rule revoked in the console',
      drift: 'the ssh rule of the database group revoked',
      address: 'aws_security_group.db',
      expect: 'fixed',
      files: ['database.tf'],
      inject: async (c) =>
        void (await c.aws.ec2.send(
          new RevokeSecurityGroupIngressCommand({
            GroupId: c.id('aws_security_group.db'),
            IpPermissions: [tcp(22, '10.0.9.0/24', 'ssh from the bastion')],
          }),
        )),
    },
    {
      id: 'sg-ingress-cidr-changed',
      shape: 'nested block set: a rule changed in place',
      drift: 'the redis rule narrowed to 10.0.4.0/24',
      address: 'aws_security_group.cache',
      expect: 'fixed',
      files: ['database.tf'],
      inject: async (c) => {
        const GroupId = c.id('aws_security_group.cache');
        await c.aws.ec2.send(
          new RevokeSecurityGroupIngressCommand({ GroupId, IpPermissions: [tcp(6379, '10.0.0.0/16')] }),
        );
        await c.aws.ec2.send(
          new AuthorizeSecurityGroupIngressCommand({ GroupId, IpPermissions: [tcp(6379, '10.0.4.0/24')] }),
        );
      },
    },
    {
      id: 'sg-egress-added',
      shape: 'nested block set: an egress rule added',
      drift: 'DNS egress opened on the app group',
      address: 'aws_security_group.app',
      expect: 'fixed',
      inject: async (c) =>
        void (await c.aws.ec2.send(
          new AuthorizeSecurityGroupEgressCommand({
            GroupId: c.id('aws_security_group.app'),
            IpPermissions: [
              { IpProtocol: 'udp', FromPort: 53, ToPort: 53, IpRanges: [{ CidrIp: '0.0.0.0/0' }] },
            ],
          }),
        )),
    },
    {
      id: 'sg-tag-changed',
      shape: 'map: a tag value changed',
      drift: 'Team tag changed to platform',
      address: 'aws_security_group.tagged',
      expect: 'fixed',
      files: ['tags.tf'],
      inject: tagEc2('aws_security_group.tagged', 'Team', 'platform'),
    },
    {
      id: 'sg-tags-added-to-untagged',
      shape: 'map: tags added to a resource whose code sets none',
      drift: 'an Owner tag added',
      address: 'aws_security_group.bare',
      expect: 'fixed',
      files: ['tags.tf'],
      inject: tagEc2('aws_security_group.bare', 'Owner', 'console-user'),
    },
    {
      id: 'sg-rule-description-changed',
      shape: 'nested block: a string inside a block',
      drift: 'a rule description reworded',
      address: 'aws_security_group.described',
      expect: 'fixed',
      inject: async (c) =>
        void (await c.aws.ec2.send(
          new UpdateSecurityGroupRuleDescriptionsIngressCommand({
            GroupId: c.id('aws_security_group.described'),
            IpPermissions: [tcp(443, '0.0.0.0/0', 'HTTPS from anywhere')],
          }),
        )),
    },
    {
      id: 'ingress-rule-cidr-changed',
      shape: 'string attribute of a standalone rule',
      drift: 'the office CIDR of a rule changed',
      address: 'aws_vpc_security_group_ingress_rule.ssh',
      expect: 'fixed',
      files: ['rules.tf'],
      inject: async (c) =>
        void (await c.aws.ec2.send(
          new ModifySecurityGroupRulesCommand({
            GroupId: c.id('aws_security_group.admin'),
            SecurityGroupRules: [
              {
                SecurityGroupRuleId: c.id('aws_vpc_security_group_ingress_rule.ssh'),
                SecurityGroupRule: {
                  IpProtocol: 'tcp',
                  FromPort: 22,
                  ToPort: 22,
                  CidrIpv4: '198.51.100.0/24',
                  Description: 'ssh from the office',
                },
              },
            ],
          }),
        )),
    },
    {
      id: 'ingress-rule-revoked',
      shape: 'deleted resource (a standalone rule)',
      drift: 'the port 80 rule revoked',
      address: 'aws_vpc_security_group_ingress_rule.temp_http',
      expect: 'left',
      reason: DELETED,
      inject: async (c) =>
        void (await c.aws.ec2.send(
          new RevokeSecurityGroupIngressCommand({
            GroupId: c.id('aws_security_group.temp'),
            SecurityGroupRuleIds: [c.id('aws_vpc_security_group_ingress_rule.temp_http')],
          }),
        )),
    },
    {
      id: 'sg-deleted',
      shape: 'deleted resource (a security group)',
      drift: 'a security group deleted',
      address: 'aws_security_group.scratch',
      expect: 'left',
      reason: DELETED,
      inject: async (c) =>
        void (await c.aws.ec2.send(
          new DeleteSecurityGroupCommand({ GroupId: c.id('aws_security_group.scratch') }),
        )),
    },
  ],
};

// ---------------------------------------------------------------- root: storage and identity
/** An assume-role policy letting one AWS service assume the role. */
export const trustPolicy = (service: string) =>
  JSON.stringify({
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', Principal: { Service: service }, Action: 'sts:AssumeRole' }],
  });

const storage: RootSpec = {
  name: 'storage',
  files: (s) => ({
    'main.tf': `${PROVIDER}
resource "aws_s3_bucket" "logs" {
  bucket = "acme-logs-${s}"

  tags = {
    Team = "ops"
    Env  = "prod"
  }
}

resource "aws_s3_bucket_versioning" "logs" {
  bucket = aws_s3_bucket.logs.id

  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket" "assets" {
  bucket = "acme-assets-${s}"

  tags = {
    Team        = "web"
    Environment = "prod"
  }
}

resource "aws_s3_bucket" "tmp" {
  bucket = "acme-tmp-${s}"
}

resource "aws_s3_bucket" "reports" {
  bucket = "acme-reports-${s}"

  tags = {
    Name = "reports-\${var.env}"
  }
}

resource "aws_s3_bucket" "archive" {
  bucket = "acme-archive-${s}"

  tags = {
    CostCenter = var.cost_center
  }
}

resource "aws_s3_bucket" "backups" {
  bucket = "acme-backups-${s}"

  tags = {
    CostCenter = var.cost_center
  }
}
`,
    'iam.tf': `resource "aws_iam_role" "app" {
  name = "app-${s}"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role" "worker" {
  name               = "worker-${s}"
  description        = "batch workers"
  assume_role_policy = jsonencode(local.worker_trust)
}

resource "aws_iam_role" "ci" {
  name               = "ci-${s}"
  assume_role_policy = jsonencode(local.ci_trust)
}

locals {
  worker_trust = {
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ecs-tasks.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  }
  ci_trust = {
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "codebuild.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  }
}
`,
    'variables.tf': `variable "env" {
  type    = string
  default = "prod"
}

variable "cost_center" {
  type    = string
  default = "cc-100"
}
`,
  }),
  cases: [
    {
      id: 'bucket-tag-changed',
      shape: 'map: a tag value changed',
      drift: 'Team tag of the logs bucket changed',
      address: 'aws_s3_bucket.logs',
      expect: 'fixed',
      inject: tagBucket('aws_s3_bucket.logs', { Team: 'sre', Env: 'prod' }),
    },
    {
      id: 'bucket-tag-removed',
      shape: 'map: a tag removed',
      drift: 'Environment tag removed from the assets bucket',
      address: 'aws_s3_bucket.assets',
      expect: 'fixed',
      inject: tagBucket('aws_s3_bucket.assets', { Team: 'web' }),
    },
    {
      id: 'versioning-suspended',
      shape: 'single nested block (versioning_configuration)',
      drift: 'versioning suspended on the logs bucket',
      address: 'aws_s3_bucket_versioning.logs',
      expect: 'fixed',
      inject: async (c) =>
        void (await c.aws.s3.send(
          new PutBucketVersioningCommand({
            Bucket: c.id('aws_s3_bucket.logs'),
            VersioningConfiguration: { Status: 'Suspended' },
          }),
        )),
    },
    {
      id: 'role-trust-edited',
      shape: 'jsonencode of a literal policy',
      drift: 'the trust policy now names lambda',
      address: 'aws_iam_role.app',
      expect: 'fixed',
      files: ['iam.tf'],
      inject: setTrust('aws_iam_role.app', 'lambda.amazonaws.com'),
    },
    {
      id: 'role-description-changed',
      shape: 'string attribute',
      drift: 'the role description changed',
      address: 'aws_iam_role.worker',
      expect: 'fixed',
      inject: async (c) =>
        void (await c.aws.iam.send(
          new UpdateRoleCommand({
            RoleName: c.id('aws_iam_role.worker'),
            Description: 'batch and cron workers',
          }),
        )),
    },
    {
      id: 'role-trust-from-local',
      shape: 'local used once (jsonencode(local.x))',
      drift: 'the CI role trust now names codepipeline',
      address: 'aws_iam_role.ci',
      expect: 'fixed',
      files: ['iam.tf'],
      inject: setTrust('aws_iam_role.ci', 'codepipeline.amazonaws.com'),
    },
    {
      id: 'role-session-duration',
      shape: 'number the code leaves to its default',
      drift: 'max session duration raised to 2 hours',
      address: 'aws_iam_role.app',
      expect: 'fixed',
      files: ['iam.tf'],
      inject: async (c) =>
        void (await c.aws.iam.send(
          new UpdateRoleCommand({ RoleName: c.id('aws_iam_role.app'), MaxSessionDuration: 7200 }),
        )),
    },
    {
      id: 'bucket-tag-from-template',
      shape: 'value from a template expression',
      drift: 'the Name tag of the reports bucket renamed',
      address: 'aws_s3_bucket.reports',
      expect: 'left',
      reason: /computed from expressions/,
      inject: tagBucket('aws_s3_bucket.reports', { Name: 'reports-q4' }),
    },
    {
      id: 'bucket-tag-from-shared-variable',
      shape: 'variable used in several places',
      drift: 'the CostCenter tag of the archive bucket changed',
      address: 'aws_s3_bucket.archive',
      expect: 'left',
      reason: /comes from var\.cost_center, which is used in 2 places/,
      inject: tagBucket('aws_s3_bucket.archive', { CostCenter: 'cc-200' }),
    },
    {
      id: 'bucket-deleted',
      shape: 'deleted resource (a bucket)',
      drift: 'the tmp bucket deleted',
      address: 'aws_s3_bucket.tmp',
      expect: 'left',
      reason: DELETED,
      inject: async (c) =>
        void (await c.aws.s3.send(new DeleteBucketCommand({ Bucket: c.id('aws_s3_bucket.tmp') }))),
    },
  ],
};

// ---------------------------------------------------------------- root: compute (variables, count, for_each)
export const AMI = 'ami-03cf127a'; // one of the images moto serves

const compute: RootSpec = {
  name: 'compute',
  files: (s) => ({
    'main.tf': `${PROVIDER}
resource "aws_instance" "api" {
  ami           = "${AMI}"
  instance_type = var.api_instance_type

  tags = {
    Name = "api-${s}"
  }
}

resource "aws_instance" "batch" {
  ami           = "${AMI}"
  instance_type = var.batch_instance_type

  tags = {
    Name = "batch-${s}"
  }
}

resource "aws_instance" "cron" {
  ami           = "${AMI}"
  instance_type = local.cron_size
}

resource "aws_instance" "bastion" {
  ami           = "${AMI}"
  instance_type = "t3.nano"
}

locals {
  cron_size = "t3.micro"
}
`,
    'workers.tf': `resource "aws_instance" "worker" {
  count         = 3
  ami           = "${AMI}"
  instance_type = "t3.micro"

  tags = {
    Name = "worker-${s}-\${count.index}"
    Pool = "default"
  }
}

resource "aws_instance" "queue" {
  for_each      = {
    orders   = { size = "t3.small", owner = "shop" }
    invoices = { size = "t3.small", owner = "billing" }
  }
  ami           = "${AMI}"
  instance_type = each.value.size

  tags = {
    Name  = "queue-${s}-\${each.key}"
    Owner = each.value.owner
    Tier  = "queue"
  }
}
`,
    'variables.tf': `variable "api_instance_type" {
  type        = string
  description = "Instance type of the API server"
  default     = "t3.micro"
}

variable "batch_instance_type" {
  type        = string
  description = "Instance type of the batch server"
  default     = "t3.micro"
}
`,
    'terraform.tfvars': `api_instance_type = "t3.small"
`,
  }),
  cases: [
    {
      id: 'var-in-tfvars',
      shape: 'variable used once, set in terraform.tfvars',
      drift: 'the API server resized to t3.medium',
      address: 'aws_instance.api',
      expect: 'fixed',
      files: ['terraform.tfvars'],
      inject: resize('aws_instance.api', 't3.medium'),
    },
    {
      id: 'var-default',
      shape: 'variable used once, from its default',
      drift: 'the batch server resized to t3.large',
      address: 'aws_instance.batch',
      expect: 'fixed',
      files: ['variables.tf'],
      inject: resize('aws_instance.batch', 't3.large'),
    },
    {
      id: 'local-used-once',
      shape: 'local used once',
      drift: 'the cron server resized to t3.small',
      address: 'aws_instance.cron',
      expect: 'fixed',
      files: ['main.tf'],
      inject: resize('aws_instance.cron', 't3.small'),
    },
    {
      id: 'count-all-alike',
      shape: 'count: every instance drifted the same way',
      drift: 'all three workers resized to t3.small',
      address: 'aws_instance.worker[1]',
      expect: 'fixed',
      files: ['workers.tf'],
      inject: async (c) => {
        for (const i of [0, 1, 2])
          await c.aws.ec2.send(
            new ModifyInstanceAttributeCommand({
              InstanceId: c.id(`aws_instance.worker[${i}]`),
              InstanceType: { Value: 't3.small' },
            }),
          );
      },
    },
    {
      id: 'count-one-instance',
      shape: 'count: one instance of three drifted',
      drift: 'the Pool tag of worker 2 changed',
      address: 'aws_instance.worker[2]',
      expect: 'left',
      reason: /shared by all 3 instances \(count\), but only 1 of them drifted this way/,
      inject: tagEc2('aws_instance.worker[2]', 'Pool', 'gpu'),
    },
    {
      id: 'for-each-entry',
      shape: 'for_each: the instance’s literal map entry',
      drift: 'the invoices queue handed to the finance team',
      address: 'aws_instance.queue["invoices"]',
      expect: 'fixed',
      files: ['workers.tf'],
      inject: tagEc2('aws_instance.queue["invoices"]', 'Owner', 'finance'),
    },
    {
      id: 'for-each-shared-literal',
      shape: 'for_each: a literal shared by every instance, one drifted',
      drift: 'the Tier tag of the orders queue changed',
      address: 'aws_instance.queue["orders"]',
      expect: 'left',
      reason: /shared by all 2 instances \(for_each\), but only 1 of them drifted this way/,
      inject: tagEc2('aws_instance.queue["orders"]', 'Tier', 'stream'),
    },
    {
      id: 'instance-terminated',
      shape: 'deleted resource (an instance)',
      drift: 'the bastion terminated',
      address: 'aws_instance.bastion',
      expect: 'left',
      reason: DELETED,
      inject: async (c) =>
        void (await c.aws.ec2.send(
          new TerminateInstancesCommand({ InstanceIds: [c.id('aws_instance.bastion')] }),
        )),
    },
  ],
};

// ---------------------------------------------------------------- root: modules
const modules: RootSpec = {
  name: 'modules',
  files: (s) => ({
    'main.tf': `${PROVIDER}
module "edge" {
  source = "./modules/edge"
  name   = "edge-${s}"
  team   = "edge"
}

module "media" {
  source = "../shared/bucket"
  bucket = "acme-media-${s}"
}

module "exports" {
  source = "../shared/bucket"
  bucket = "acme-exports-${s}"
}
`,
    'modules/edge/versions.tf': MODULE_VERSIONS,
    '../shared/bucket/versions.tf': MODULE_VERSIONS,
    'modules/edge/main.tf': `variable "name" {
  type = string
}

variable "team" {
  type = string
}

resource "aws_security_group" "this" {
  name        = var.name
  description = "edge proxies"

  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  tags = {
    Team = var.team
  }
}
`,
    '../shared/bucket/main.tf': `variable "bucket" {
  type = string
}

resource "aws_s3_bucket" "this" {
  bucket = var.bucket

  tags = {
    Managed = "shared-module"
  }
}
`,
  }),
  cases: [
    {
      id: 'module-once-block',
      shape: 'local module called once: a block inside it',
      drift: 'port 8443 opened on the edge group',
      address: 'module.edge.aws_security_group.this',
      expect: 'fixed',
      files: ['modules/edge/main.tf'],
      inject: openIngress('module.edge.aws_security_group.this', tcp(8443)),
    },
    {
      id: 'module-variable-argument',
      shape: 'local module called once: a value from its variable, set in the call',
      drift: 'the edge group handed to the platform team',
      address: 'module.edge.aws_security_group.this',
      expect: 'fixed',
      files: ['main.tf'],
      inject: tagEc2('module.edge.aws_security_group.this', 'Team', 'platform'),
    },
    {
      id: 'module-called-twice',
      shape: 'module called several times (outside the root directory)',
      drift: 'the Managed tag of one bucket changed',
      address: 'module.media.aws_s3_bucket.this',
      expect: 'left',
      reason: /is called 2 times \(module\.media, module\.exports\); editing it would change every call/,
      inject: tagBucket('module.media.aws_s3_bucket.this', { Managed: 'by-hand' }),
    },
  ],
};

export const REAL_ROOTS: RootSpec[] = [network, storage, compute, modules];

/** The demo's root: the seed's security group on its own. */
export const DEMO_ROOT: RootSpec = {
  name: 'demo',
  files: (s) => ({ 'main.tf': network.files(s)['main.tf'] as string }),
  cases: network.cases.filter((c) => c.id === 'sg-ingress-added'),
};

export interface AwsTestBed {
  spec: RootSpec;
  repoUrl: string;
  /** The repository directory the root lives in (`iac_path` inside it). */
  iacPath: string;
  suffix: string;
  /** Resource instance ids by address, from the applied state. */
  ids: Map<string, string>;
  injectAll(aws: AwsClients): Promise<void>;
  inject(caseId: string, aws: AwsClients): Promise<void>;
  destroy(): Promise<void>;
}

interface StateResource {
  address: string;
  values: Record<string, unknown>;
}

function stateResources(json: unknown): StateResource[] {
  const out: StateResource[] = [];
  const walk = (m: { resources?: StateResource[]; child_modules?: unknown[] } | undefined) => {
    for (const r of m?.resources ?? []) out.push(r);
    for (const c of m?.child_modules ?? []) walk(c as typeof m);
  };
  walk((json as { values?: { root_module?: { resources?: StateResource[] } } }).values?.root_module);
  return out;
}

/** Applies a root spec into moto, pushes it to the git host (the root under `envs/<name>`). */
export async function createAwsTestBed(opts: {
  spec: RootSpec;
  gitHostUrl: string;
  git: GitClient;
  engine: EngineDeps;
  /** Repository name on the git host (default: roots-<root>-<suffix>). */
  name?: string;
  /**
   * A root without a backend whose state Kumoss manages (activities/managed-state.ts): applied
   * with that state, under the state project id of the bed's repository, IaC path and this scope.
   */
  /** Apply the root into Kumoss-managed state: the state of this organization's sessions on it. */
  managed?: { state: ManagedState; scopeId: string; organizationUuid: string };
}): Promise<AwsTestBed> {
  // Setup builds kumoss/aws in the background: the first bed of a fresh machine waits for it.
  await waitForTool('provider-aws');
  const dir = mkdtempSync(join(testCloudDir(), 'awsbed-'));
  const suffix = Math.random().toString(36).slice(2, 8);
  const repo = join(dir, 'repo');
  const iacPath = `envs/${opts.spec.name}`;
  const rootDir = join(repo, iacPath);
  const statePath = join(dir, 'state', 'terraform.tfstate');
  mkdirSync(rootDir, { recursive: true });
  mkdirSync(dirname(statePath), { recursive: true });
  for (const [name, text] of Object.entries(opts.spec.files(suffix))) {
    const target = join(rootDir, name);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(
      target,
      opts.managed
        ? text.replace(/\n {2}backend "local" \{\n[^}]*\}\n/, '\n')
        : text.replace('STATE_PATH', statePath),
    );
  }
  const name = opts.name ?? `roots-${opts.spec.name}-${suffix}`;
  const repoUrl = `${opts.gitHostUrl}/${name}.git`;
  const engine = new EngineClient({
    ...opts.engine,
    workdir: rootDir,
    scopeId: 'scope-test',
    ...(opts.managed
      ? {
          managedState: opts.managed.state,
          stateProjectId: stateProjectId(
            opts.managed.organizationUuid,
            repoUrl,
            iacPath,
            opts.managed.scopeId,
          ),
        }
      : {}),
  });
  // The roots are in canonical form, as a team that runs `terraform fmt` keeps them.
  for (const name of Object.keys(opts.spec.files(suffix))) {
    const target = join(rootDir, name);
    writeFileSync(target, await engine.fmt(readFileSync(target, 'utf8')));
  }
  writeFileSync(join(repo, '.gitignore'), '.terraform/\n*.tfplan\n.terraform.lock.hcl\n');
  await engine.init();
  await engine.apply();
  const statePlanFile = join(dir, 'state.json');
  if (opts.managed) {
    await engine.stateJson(statePlanFile);
    // Written for this checkout only; the pushed root declares no backend.
    rmSync(join(rootDir, MANAGED_BACKEND_FILE));
  } else await engine.showJson(statePath, statePlanFile);
  const resources = stateResources(JSON.parse(readFileSync(statePlanFile, 'utf8')));
  const ids = new Map(resources.map((r) => [r.address, String(r.values.id)]));
  const attrs = new Map(resources.map((r) => [r.address, r.values]));
  const git = (...args: string[]) => opts.git.run(args, repo);
  await git('init', '--quiet', '--initial-branch=main');
  await git('add', '--all');
  await git('commit', '--quiet', '-m', `Terraform root ${opts.spec.name}`);
  await git('push', '--quiet', repoUrl, 'main');
  const ctx = (aws: AwsClients): InjectContext => ({
    aws,
    suffix,
    id: (address) => {
      const v = ids.get(address);
      if (!v) throw new Error(`no ${address} in the applied state of ${opts.spec.name}`);
      return v;
    },
    attr: (address, n) => attrs.get(address)?.[n],
  });
  return {
    spec: opts.spec,
    repoUrl,
    iacPath,
    suffix,
    ids,
    async injectAll(aws) {
      for (const c of opts.spec.cases) await c.inject(ctx(aws));
    },
    async inject(caseId, aws) {
      const c = opts.spec.cases.find((x) => x.id === caseId);
      if (!c) throw new Error(`no drift case ${caseId} in ${opts.spec.name}`);
      await c.inject(ctx(aws));
    },
    destroy() {
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
  };
}
