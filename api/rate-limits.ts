// Rate limits (express-rate-limit, in this API process's memory): sign-in attempts and requests
// whose credential was refused, per client address, and cloud audit-event deliveries per
// organization. Over a limit the answer is `429` with `Retry-After` and the usual error body;
// nothing behind the limit runs. Behind N API replicas each counts its own (N × the limit in all).
import type { Request, RequestHandler, Response } from 'express';
import { rateLimit } from 'express-rate-limit';

export interface RateLimitConfig {
  /** Sign-in attempts (POST /api/v1/auth/session) per client address per minute. */
  sign_in_per_minute: number;
  /** Answers of 401 (a missing, wrong or revoked token or cookie) per client address per minute. */
  failed_auth_per_minute: number;
  /** Audit-event deliveries per organization per minute (the clouds retry a 429). */
  ingestion_per_minute: number;
}

export const DEFAULT_RATE_LIMITS: RateLimitConfig = {
  sign_in_per_minute: 30,
  failed_auth_per_minute: 300,
  ingestion_per_minute: 600,
};

const MINUTE = 60_000;

function limiter(
  limit: number,
  what: string,
  extra: Partial<Parameters<typeof rateLimit>[0]> = {},
): RequestHandler {
  return rateLimit({
    windowMs: MINUTE,
    limit,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    ...extra,
    handler: (req: Request, res: Response) => {
      const reset = (req as Request & { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const seconds = Math.max(1, Math.ceil(((reset?.getTime() ?? Date.now() + MINUTE) - Date.now()) / 1000));
      res
        .status(429)
        .setHeader('Retry-After', String(seconds))
        .json({ error: { code: 'rate_limited', message: `Too many ${what}; try again in ${seconds} s.` } });
    },
  });
}

/** Requests answered 401 count against their client address; past the limit every request is refused. */
export function failedAuthLimit(cfg: RateLimitConfig): RequestHandler {
  return limiter(cfg.failed_auth_per_minute, 'requests with a refused credential from this address', {
    skipSuccessfulRequests: true,
    requestWasSuccessful: (_req, res) => res.statusCode !== 401,
  });
}

/** Sign-in attempts per client address. */
export function signInLimit(cfg: RateLimitConfig): RequestHandler {
  return limiter(cfg.sign_in_per_minute, 'sign-in attempts from this address', {
    skip: (req) => req.method !== 'POST',
  });
}

/** Audit-event deliveries per organization (the path's last segment). */
export function ingestionLimit(cfg: RateLimitConfig): RequestHandler {
  return limiter(cfg.ingestion_per_minute, 'audit-event deliveries for this organization', {
    skip: (req) => req.method !== 'POST',
    keyGenerator: (req) => `org:${req.path.split('/').filter(Boolean).pop() ?? ''}`,
  });
}
