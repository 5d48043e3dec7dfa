// The prompt catalogue (config `prompts.dir`, default ./prompts): the targeting policies, each
// cloud's drift-exception rules and the resource prompts, read from files so operators can change
// them without a release.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import {
  exceptionCatalogueSchema,
  exceptionPromptName,
  type Cloud,
  type ExceptionCatalogue,
} from '../shared/drift-exceptions';

export class CatalogueError extends Error {
  override name = 'CatalogueError';
}

export class PromptCatalogue {
  constructor(readonly dir: string) {}

  private read(name: string): string | undefined {
    const file = join(this.dir, name);
    return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  }

  targetingPolicies(): string {
    return this.read('general-guidelines-targeting_policies.md') ?? '';
  }

  /** `<cloud>-guidelines-drift_exceptions`: validated rules; a broken file is an error, not "no rules". */
  driftExceptions(cloud: Cloud): ExceptionCatalogue {
    const name = `${exceptionPromptName(cloud)}.yaml`;
    const text = this.read(name);
    if (text === undefined) return { guidance: '', rules: [] };
    let raw: unknown;
    try {
      raw = parseYaml(text) ?? {};
    } catch (err) {
      throw new CatalogueError(`${join(this.dir, name)} is not valid YAML: ${(err as Error).message}`);
    }
    const parsed = exceptionCatalogueSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new CatalogueError(
        `${join(this.dir, name)}: ${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`,
      );
    }
    return parsed.data;
  }

  resourcePrompt(type: string): string | undefined {
    return /^[a-z0-9_]+$/.test(type) ? this.read(join('resources', `${type}.md`)) : undefined;
  }

  /** The prompt given to the model for a round: policies, the cloud's exceptions, resource prompts. */
  compose(cloud: Cloud, resourceTypes: string[], request: string): string {
    const parts = [this.targetingPolicies()];
    const ex = this.driftExceptions(cloud);
    if (ex.guidance) parts.push(`# ${exceptionPromptName(cloud)}\n\n${ex.guidance}`);
    for (const t of [...new Set(resourceTypes)].sort()) {
      const p = this.resourcePrompt(t);
      if (p) parts.push(p);
    }
    parts.push(`# Request\n\n${request}`);
    return parts.filter(Boolean).join('\n\n');
  }
}
