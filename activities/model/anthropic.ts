// The Anthropic provider: the same port through the Messages API (@anthropic-ai/sdk). Each call
// requires one tool, `answer`, whose input schema is the answer's (zod → JSON Schema), and checks
// the tool's input with zod; an answer that does not fit is an error the activity retries, never
// a guess.
import Anthropic from '@anthropic-ai/sdk';
import { z } from 'zod';
import { ApplicationFailure } from '@temporalio/common';
import { ErrorTypes } from '../../shared/errors';
import type { DriftOperation } from '../../shared/drift';
import type {
  ConfigResource,
  FilterDecision,
  ModelProvider,
  GenerateInput,
  Generation,
  Remediation,
  ReportFacts,
  SourceFile,
  TargetSelection,
  PullRequestFacts,
  PullRequestText,
} from './port';

export interface AnthropicOptions {
  apiKey: string;
  baseURL?: string;
  /** Model for filtering, targeting and remediation. */
  model: string;
  /** The small model: summaries (and pull-request texts). */
  smallModel: string;
  maxTokens?: number;
  timeoutMs?: number;
}

const filterSchema = z.object({ accepted: z.boolean(), reason: z.string() });
const targetsSchema = z.object({ targets: z.array(z.string()), reason: z.string() });
const remediationSchema = z.object({
  edits: z.array(z.object({ path: z.string(), content: z.string() })),
  unremediable: z.array(
    z.object({ address: z.string(), attributes: z.array(z.string()), reason: z.string() }),
  ),
});
const generationSchema = z.object({
  edits: z.array(z.object({ path: z.string(), content: z.string() })),
  declined: z.string().optional(),
  summary: z.string(),
});
const summarySchema = z.object({ summary: z.string().min(1) });
const pullRequestSchema = z.object({ title: z.string().min(1).max(200), description: z.string() });

export class ModelAnswerError extends Error {
  override name = 'ModelAnswerError';
}

/** The one tool every call offers and requires: its input is the answer, in the call's schema. */
const ANSWER_TOOL = 'answer';

export class AnthropicModel implements ModelProvider {
  readonly name = 'anthropic';
  private readonly client: Anthropic;

  constructor(private readonly opts: AnthropicOptions) {
    this.client = new Anthropic({
      apiKey: opts.apiKey,
      ...(opts.baseURL ? { baseURL: opts.baseURL } : {}),
      timeout: opts.timeoutMs ?? 120_000,
      // Temporal retries the activity; the SDK's own retries would multiply every attempt.
      maxRetries: 0,
    });
  }

  private async ask<T>(schema: z.ZodType<T>, model: string, system: string, payload: unknown): Promise<T> {
    let res: Anthropic.Message;
    try {
      res = await this.client.messages.create({
        model,
        max_tokens: this.opts.maxTokens ?? 8192,
        system,
        messages: [{ role: 'user', content: JSON.stringify(payload, null, 2) }],
        // Tool use with the answer's JSON Schema: the model's answer arrives as the tool's input,
        // structured, not as JSON to be found in prose.
        tools: [
          {
            name: ANSWER_TOOL,
            description: 'Give your answer.',
            input_schema: z.toJSONSchema(schema) as Anthropic.Tool.InputSchema,
          },
        ],
        tool_choice: { type: 'tool', name: ANSWER_TOOL },
      });
    } catch (err) {
      // By HTTP status: the caller's mistakes (bad request, key, model) are final; overload, rate
      // limits, server errors and the network are retried by Temporal.
      if (
        err instanceof Anthropic.APIError &&
        typeof err.status === 'number' &&
        [400, 401, 403, 404, 413, 422].includes(err.status)
      ) {
        throw ApplicationFailure.nonRetryable(
          `The model API refused the request (HTTP ${err.status}): ${err.message}`,
          ErrorTypes.ModelRequestRejected,
        );
      }
      throw err;
    }
    const call = res.content.find(
      (b): b is Anthropic.ToolUseBlock => b.type === 'tool_use' && b.name === ANSWER_TOOL,
    );
    if (!call) {
      const text = res.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      throw new ModelAnswerError(`the model answered without using the answer tool: ${text.slice(0, 200)}`);
    }
    const parsed = schema.safeParse(call.input);
    if (!parsed.success) {
      throw new ModelAnswerError(
        `the model's answer has the wrong shape: ${parsed.error.issues[0]?.message ?? ''}`,
      );
    }
    return parsed.data;
  }

  filterRequest(input: {
    text: string;
    prompt: string;
    mode?: 'drift' | 'generate';
  }): Promise<FilterDecision> {
    const rule =
      input.mode === 'generate'
        ? 'in generate mode. Accept requests to create or modify infrastructure. Decline requests to resolve drift (code and reality disagree) as an operation mismatch, pointing to the drift modes (POST /api/v1/drift/partial or /full).'
        : 'in drift mode. Accept requests to resolve or scope drift on existing resources. Decline requests to create or modify infrastructure as an operation mismatch.';
    return this.ask(
      filterSchema,
      this.opts.model,
      `${input.prompt}\n\nYou are the request filter of a Terraform change tool, ${rule} Answer with the answer tool, its input shaped {"accepted": boolean, "reason": string}.`,
      { request: input.text },
    );
  }

  async generate(input: GenerateInput): Promise<Generation> {
    const answer = await this.ask(
      generationSchema,
      this.opts.model,
      `${input.prompt}\n\nYou change Terraform code as the request asks. Edit only what the request needs; keep formatting and comments. ${input.feedback ? 'Your previous change did not validate; the files hold it, and the engine said what is wrong: fix it. ' : ''}When the request cannot be done safely, write no edit and say why under "declined". Answer with the answer tool, its input shaped {"edits": [{"path": string, "content": string}], "declined"?: string, "summary": string} where each edit is a whole file and summary is one sentence on the change.`,
      {
        request: input.text,
        files: input.files,
        resources: input.resources.map(({ address, type, name }) => ({ address, type, name })),
        ...(input.feedback ? { engine_diagnostic: input.feedback } : {}),
      },
    );
    const outside = answer.edits.filter((e) => e.path.split('/').includes('..') || e.path.startsWith('/'));
    if (outside.length > 0) {
      throw new ModelAnswerError(
        `the model wrote files outside the root: ${outside.map((e) => e.path).join(', ')}`,
      );
    }
    return {
      edits: answer.edits,
      summary: answer.summary,
      ...(answer.declined ? { declined: answer.declined } : {}),
    };
  }

  selectTargets(input: {
    text: string;
    resources: ConfigResource[];
    prompt: string;
  }): Promise<TargetSelection> {
    return this.ask(
      targetsSchema,
      this.opts.model,
      `${input.prompt}\n\nYou are the target generator of a drift remediation tool. From the request and the resources of the configuration, choose the Terraform resource addresses to pass as -target. Use only addresses from the list. Answer with the answer tool, its input shaped {"targets": string[], "reason": string}.`,
      {
        request: input.text,
        resources: input.resources.map(({ address, type, name }) => ({ address, type, name })),
      },
    );
  }

  async remediate(input: {
    operations: DriftOperation[];
    files: SourceFile[];
    prompt: string;
  }): Promise<Remediation> {
    const answer = await this.ask(
      remediationSchema,
      this.opts.model,
      `${input.prompt}\n\nYou reconcile Terraform code with reality. For each drift operation, change the code so that planning it against the real resources shows no change: write the actual values into the attributes. Keep formatting and comments. Do not touch anything else. When an operation cannot be fixed safely in code, list it under "unremediable" with the reason. Answer with the answer tool, its input shaped {"edits": [{"path": string, "content": string}], "unremediable": [{"address": string, "attributes": string[], "reason": string}]} where each edit is a whole file.`,
      { operations: input.operations, files: input.files },
    );
    const known = new Set(input.files.map((f) => f.path));
    const unknown = answer.edits.filter((e) => !known.has(e.path));
    if (unknown.length > 0) {
      throw new ModelAnswerError(
        `the model edited files outside the root: ${unknown.map((e) => e.path).join(', ')}`,
      );
    }
    return answer;
  }

  pullRequest(input: PullRequestFacts): Promise<PullRequestText> {
    return this.ask(
      pullRequestSchema,
      this.opts.smallModel,
      'Write the title and the description (Markdown) of a pull request that reconciles Terraform code with the real cloud state, from the drift rounds of the session. Answer with the answer tool, its input shaped {"title": string, "description": string}.',
      input,
    );
  }

  async summarize(input: ReportFacts): Promise<string> {
    const answer = await this.ask(
      summarySchema,
      this.opts.smallModel,
      'Summarize the outcome of a drift remediation round for an operator in two or three sentences. Name the remediated resources, what was left unreconciled and why, and what the exception rules left alone. Answer with the answer tool, its input shaped {"summary": string}.',
      input,
    );
    return answer.summary;
  }
}
