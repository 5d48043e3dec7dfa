// An STS that enforces its roles' trust policies' `sts:ExternalId` condition, on loopback: moto's
// STS answers AssumeRole for any role with any external id, so the confused-deputy boundary (an
// organization naming another's role) needs a service that refuses as AWS does. It speaks STS's
// query protocol (form-encoded `Action=AssumeRole…`, XML answers) to the real AWS SDK client.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StsLoopback {
  endpoint: string;
  /** Every AssumeRole asked: the role, the session name and the external id sent (if any). */
  requests: { roleArn: string; sessionName: string; externalId?: string }[];
  close(): Promise<void>;
}

const xmlEscape = (s: string) =>
  s.replace(
    /[<>&'"]/g,
    (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c] ?? c,
  );

/** `roles`: role ARN → the external id its trust policy requires. */
export async function startStsLoopback(roles: Record<string, string>): Promise<StsLoopback> {
  const requests: StsLoopback['requests'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const requestId = randomUUID();
      const fail = (status: number, code: string, message: string) => {
        res.writeHead(status, { 'content-type': 'text/xml' });
        res.end(
          `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>` +
            `<Code>${code}</Code><Message>${xmlEscape(message)}</Message></Error><RequestId>${requestId}</RequestId></ErrorResponse>`,
        );
      };
      if (form.get('Action') !== 'AssumeRole')
        return fail(400, 'InvalidAction', `${form.get('Action')} is not served here`);
      const roleArn = form.get('RoleArn') ?? '';
      const sessionName = form.get('RoleSessionName') ?? '';
      const externalId = form.get('ExternalId') ?? undefined;
      requests.push({ roleArn, sessionName, ...(externalId !== undefined ? { externalId } : {}) });
      const required = roles[roleArn];
      if (required === undefined || required !== externalId)
        return fail(
          403,
          'AccessDenied',
          `User: arn:aws:iam::000000000000:user/kumoss-worker is not authorized to perform: sts:AssumeRole on resource: ${roleArn}`,
        );
      const expiration = new Date(Date.now() + Number(form.get('DurationSeconds') ?? 3600) * 1000);
      const [, account = '', role = ''] = /^arn:aws[a-z-]*:iam::(\d{12}):role\/(.+)$/.exec(roleArn) ?? [];
      res.writeHead(200, { 'content-type': 'text/xml' });
      res.end(
        `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>` +
          `<AssumedRoleUser><Arn>arn:aws:sts::${account}:assumed-role/${xmlEscape(role)}/${xmlEscape(sessionName)}</Arn>` +
          `<AssumedRoleId>AROA${randomBytes(8).toString('hex').toUpperCase()}:${xmlEscape(sessionName)}</AssumedRoleId></AssumedRoleUser>` +
          `<Credentials><AccessKeyId>ASIA${randomBytes(8).toString('hex').toUpperCase()}</AccessKeyId>` +
          `<SecretAccessKey>${randomBytes(20).toString('base64')}</SecretAccessKey>` +
          `<SessionToken>${randomBytes(32).toString('base64')}</SessionToken>` +
          `<Expiration>${expiration.toISOString()}</Expiration></Credentials>` +
          `</AssumeRoleResult><ResponseMetadata><RequestId>${requestId}</RequestId></ResponseMetadata></AssumeRoleResponse>`,
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
