// Every activity heartbeats while it runs, whatever it does (a git push, an upload, a model call),
// so the server notices a dead worker after the activity's heartbeat timeout and retries the
// activity on a live one — instead of waiting out a start-to-close timeout of many minutes.
import type { Context } from '@temporalio/activity';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor, Next } from '@temporalio/worker';

export const HEARTBEAT_EVERY_MS = 2_000;

class AutoHeartbeat implements ActivityInboundCallsInterceptor {
  constructor(private readonly ctx: Context) {}

  async execute(
    input: ActivityExecuteInput,
    next: Next<ActivityInboundCallsInterceptor, 'execute'>,
  ): Promise<unknown> {
    const timer = setInterval(() => this.ctx.heartbeat(), HEARTBEAT_EVERY_MS);
    try {
      return await next(input);
    } finally {
      clearInterval(timer);
    }
  }
}

export const autoHeartbeat = (ctx: Context) => ({ inbound: new AutoHeartbeat(ctx) });
