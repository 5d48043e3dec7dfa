// The drift test bed: a Terraform root in a repository on the git host, applied against
// REST objects and local files, then changed out of band — an attribute of an object, an
// extra ingress rule (port 8080) on the object shaped like security group sg-web-demo, a deleted
// file. Used by the tests and by the demo. Objects live on a REST object server
// (scripts/embedded/object-api.ts) managed through the `kumoss/rest` provider; files through
// hashicorp/local; time_static proves the third pinned provider installs from the mirror.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { allowTestEgress, testCloudDir } from './test-cloud';
import { EngineClient, type EngineBinary } from '../../activities/engine';
import type { GitClient } from '../../activities/git';
import { startObjectApi, type ObjectApi } from '../../scripts/embedded/object-api';

export const APP_CONFIG = {
  id: 'app-config',
  name: 'app-config',
  replicas: 2,
  log_level: 'info',
};

export const SG_WEB_DEMO = {
  id: 'sg-web-demo',
  name: 'sg-web-demo',
  description: 'web tier',
  ingress: [{ protocol: 'tcp', from_port: 443, to_port: 443, cidr_blocks: ['0.0.0.0/0'] }],
};

export const MOTD_CONTENT = 'Welcome to the Kumoss drift test bed.\n';

/** Addresses each injection makes drift. */
export const DRIFT_ADDRESSES = {
  attribute: 'rest_object.app_config',
  ingress: 'rest_object.sg_web_demo',
  file: 'local_file.motd',
} as const;

export type DriftKind = keyof typeof DRIFT_ADDRESSES;

export const TIME_PROVIDER = `    time = {
      source  = "hashicorp/time"
      version = "0.14.2"
    }
`;

function hclJson(value: unknown): string {
  return `jsonencode(${JSON.stringify(value, null, 2).replace(/\n/g, '\n  ')})`;
}

export function rootFiles(opts: {
  apiUrl: string;
  filesDir: string;
  statePath: string;
  /** Declare hashicorp/time and a time_static (default true). */
  withTime?: boolean;
}): Record<string, string> {
  const withTime = opts.withTime ?? true;
  return {
    'main.tf': `terraform {
  required_version = ">= 1.5.0"
  required_providers {
    rest = {
      source  = "kumoss/rest"
      version = "0.1.0"
    }
    local = {
      source  = "hashicorp/local"
      version = "1.4.0"
    }
${withTime ? TIME_PROVIDER : ''}  }
  backend "local" {
    path = "${opts.statePath}"
  }
}

provider "rest" {
  uri = var.api_url
}

resource "rest_object" "app_config" {
  path = "/api/objects"
  data = ${hclJson(APP_CONFIG)}
}

resource "rest_object" "sg_web_demo" {
  path = "/api/objects"
  data = ${hclJson(SG_WEB_DEMO)}
}

resource "local_file" "motd" {
  filename = "\${var.files_dir}/motd.txt"
  content  = ${JSON.stringify(MOTD_CONTENT)}
}

${withTime ? 'resource "time_static" "created" {}\n' : ''}`,
    'variables.tf': `variable "api_url" {
  type        = string
  description = "Base URL of the REST API that holds the objects"
}

variable "files_dir" {
  type        = string
  description = "Directory of the managed files"
}

variable "kumoss_scope_id" {
  type        = string
  default     = ""
  description = "Scope id Kumoss passes to every engine call"
}
`,
    'terraform.tfvars': `api_url   = "${opts.apiUrl}"\nfiles_dir = "${opts.filesDir}"\n`,
    '.gitignore': '.terraform/\n*.tfplan\n',
  };
}

export interface DriftTestBed {
  repoUrl: string;
  /** Local checkout the root was applied from. */
  sourceDir: string;
  filesDir: string;
  api: ObjectApi;
  inject(kind: DriftKind): Promise<void>;
  destroy(): Promise<void>;
}

export async function createDriftTestBed(opts: {
  gitHostUrl: string;
  git: GitClient;
  engine: { kind: EngineBinary; binary: string; cliConfigFile: string };
  name?: string;
  scopeId?: string;
  withTime?: boolean;
  /** The bed's object API, when it must be up before the bed (a worker told its address at start). */
  objectApi?: ObjectApi;
}): Promise<DriftTestBed> {
  const dir = mkdtempSync(join(testCloudDir(), 'bed-'));
  const sourceDir = join(dir, 'src');
  const filesDir = join(dir, 'files');
  const stateDir = join(dir, 'state');
  for (const d of [sourceDir, filesDir, stateDir]) mkdirSync(d, { recursive: true });
  const api = opts.objectApi ?? (await startObjectApi());
  allowTestEgress(api.url);
  try {
    const files = rootFiles({
      apiUrl: api.url,
      filesDir,
      statePath: join(stateDir, 'terraform.tfstate'),
      withTime: opts.withTime,
    });
    for (const [name, text] of Object.entries(files)) writeFileSync(join(sourceDir, name), text);
    const engine = new EngineClient({
      ...opts.engine,
      workdir: sourceDir,
      scopeId: opts.scopeId ?? 'test-scope',
    });
    await engine.init();
    await engine.apply();
    const name = opts.name ?? `bed-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    const repoUrl = `${opts.gitHostUrl}/${name}.git`;
    // Asynchronous git: the git host may run in this very process (demo, benchmarks).
    const git = (...args: string[]) => opts.git.run(args, sourceDir);
    await git('init', '--quiet', '--initial-branch=main');
    await git('add', '--all');
    await git('commit', '--quiet', '-m', 'Terraform root for the drift test bed');
    await git('push', '--quiet', repoUrl, 'main');
    return {
      repoUrl,
      sourceDir,
      filesDir,
      api,
      async inject(kind) {
        if (kind === 'attribute') await api.put(APP_CONFIG.id, { ...APP_CONFIG, replicas: 5 });
        else if (kind === 'ingress') {
          await api.put(SG_WEB_DEMO.id, {
            ...SG_WEB_DEMO,
            ingress: [
              ...SG_WEB_DEMO.ingress,
              { protocol: 'tcp', from_port: 8080, to_port: 8080, cidr_blocks: ['0.0.0.0/0'] },
            ],
          });
        } else {
          const file = join(filesDir, 'motd.txt');
          if (!existsSync(file)) throw new Error('motd.txt already gone');
          rmSync(file);
        }
      },
      async destroy() {
        await api.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
