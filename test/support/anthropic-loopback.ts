// A loopback server speaking the Anthropic Messages API (POST /v1/messages) that the real
// @anthropic-ai/sdk client talks to. Each test scripts the answers; the server records requests.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DriftOperation } from '../../shared/drift';

export interface RecordedRequest {
  headers: Record<string, string | string[] | undefined>;
  body: {
    model: string;
    system?: string;
    max_tokens: number;
    messages: { role: string; content: string }[];
    tools?: { name: string; input_schema: unknown }[];
    tool_choice?: { type: string; name?: string };
  };
}

export type Script = (req: RecordedRequest) => {
  status?: number;
  text?: string;
  error?: { type: string; message: string };
};

export interface MessagesLoopback {
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export async function startMessagesLoopback(script: Script): Promise<MessagesLoopback> {
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/messages') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'Not found' } }));
        return;
      }
      const recorded = {
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as RecordedRequest['body'],
      };
      requests.push(recorded);
      const answer = script(recorded);
      if (answer.error) {
        res.writeHead(answer.status ?? 400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: answer.error }));
        return;
      }
      res.writeHead(answer.status ?? 200, {
        'content-type': 'application/json',
        'request-id': `req_${requests.length}`,
      });
      // A call that requires a tool gets its answer as that tool's input, as the service does when
      // the scripted answer is a JSON object; anything else comes back as text (a model that
      // did not use the tool).
      const tool = recorded.body.tool_choice?.type === 'tool' ? recorded.body.tool_choice.name : undefined;
      let input: unknown;
      try {
        input = tool ? (JSON.parse(answer.text ?? '') as unknown) : undefined;
      } catch {
        input = undefined;
      }
      const asTool =
        tool !== undefined && typeof input === 'object' && input !== null && !Array.isArray(input);
      res.end(
        JSON.stringify({
          id: `msg_loopback_${requests.length}`,
          type: 'message',
          role: 'assistant',
          model: recorded.body.model,
          content: asTool
            ? [{ type: 'tool_use', id: `toolu_loopback_${requests.length}`, name: tool, input }]
            : [{ type: 'text', text: answer.text ?? '' }],
          stop_reason: asTool ? 'tool_use' : 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: 10, output_tokens: 10 },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

export function payload(req: RecordedRequest): Record<string, unknown> {
  return JSON.parse(req.body.messages[0]?.content ?? '{}') as Record<string, unknown>;
}

/** Answers like a model would: accept the drift request, target the security group, write the fix. */
export function driftScript(req: RecordedRequest) {
  const system = req.body.system ?? '';
  const p = payload(req);
  if (system.includes('request filter'))
    return { text: '{"accepted": true, "reason": "Resolve drift on sg-web-demo."}' };
  if (system.includes('target generator')) {
    return { text: '{"targets": ["rest_object.sg_web_demo"], "reason": "The request names sg-web-demo."}' };
  }
  if (system.includes('reconcile Terraform code')) {
    const ops = p.operations as DriftOperation[];
    const files = p.files as { path: string; content: string }[];
    const actual = ops[0]?.attributes.data?.actual as string;
    const main = files.find((f) => f.path === 'main.tf') as { content: string };
    const content = main.content.replace(
      /(resource "rest_object" "sg_web_demo" \{\n {2}path = "\/api\/objects"\n {2}data = )jsonencode\([\s\S]*?\n {2}\}\)/,
      (_m, head: string) => `${head}jsonencode(${actual})`,
    );
    return { text: JSON.stringify({ edits: [{ path: 'main.tf', content }], unremediable: [] }) };
  }
  return { text: '{"summary": "Restored the code of sg-web-demo to match the console change."}' };
}
